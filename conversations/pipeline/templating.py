"""The ``templating`` task: fills the placeholders of the turn's output (rules in toolgate.outbound.templates)."""

from __future__ import annotations

from typing import Any

from conversations.pipeline.conversation_memory import ConversationMemory
from conversations.pipeline.registry import TurnContext
from toolgate.outbound import TEMPLATE_ROOTS, lookup_path, render, value_as_text

__all__ = ["TEMPLATE_ROOTS", "lookup_path", "render", "value_as_text", "run"]


def run(task: dict[str, Any], memory: ConversationMemory, turn: TurnContext) -> None:
    """Render the step's output texts, their ``outputs["output"]`` mirror and quick reply values."""
    data = memory.template_data()
    step = memory.current
    step.output = [render(text, data) if isinstance(text, str) else text for text in step.output]
    mirror = step.outputs.get("output")
    if isinstance(mirror, list):
        step.outputs["output"] = [render(text, data) if isinstance(text, str) else text for text in mirror]
    for reply in step.quick_replies:
        if isinstance(reply.get("value"), str):
            reply["value"] = render(reply["value"], data)
