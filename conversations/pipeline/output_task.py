"""The ``output`` task: texts and quick replies for the step's actions.

For each action of the step, in the step's order, every ``outputs`` entry for that action appends ALL
its texts to ``memory.current.output`` (unrendered; the ``templating`` task fills placeholders) and its
quick replies to ``memory.current.quick_replies``. ``outputs["output"]`` mirrors the step's texts so
templates and clients can read them.
"""

from __future__ import annotations

from typing import Any

from conversations.pipeline.conversation_memory import ConversationMemory
from conversations.pipeline.registry import TurnContext


def run(task: dict[str, Any], memory: ConversationMemory, turn: TurnContext) -> None:
    step = memory.current
    entries = [entry for entry in task.get("outputs") or [] if isinstance(entry, dict)]
    for action in list(step.actions):
        for entry in entries:
            if entry.get("action") != action:
                continue
            step.output.extend(str(text) for text in entry.get("texts") or [])
            step.quick_replies.extend(
                dict(reply) for reply in entry.get("quickReplies") or [] if isinstance(reply, dict)
            )
    step.outputs["output"] = list(step.output)
