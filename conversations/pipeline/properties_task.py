"""The ``properties`` task: set conversation (or step) properties from templates.

Rules, per entry of ``setProperties`` in order:

- With ``actions``, the entry applies only when one of them is among the step's actions.
- A string ``value`` is rendered as a template (seeing properties set by earlier entries); any other
  JSON value is stored as is.
- ``scope`` ``conversation`` (default) writes ``memory.properties[name]``; ``step`` writes
  ``memory.current.outputs["properties"][name]`` (so ``{memory.current.properties.name}`` reads it).
- Names set are appended to ``data["properties:set"]``.
"""

from __future__ import annotations

import copy
from typing import Any

from conversations.pipeline.conversation_memory import ConversationMemory
from conversations.pipeline.registry import TurnContext
from conversations.pipeline.templating import render


def run(task: dict[str, Any], memory: ConversationMemory, turn: TurnContext) -> None:
    step = memory.current
    names_set: list[str] = step.data.setdefault("properties:set", [])
    for entry in task.get("setProperties") or []:
        name = entry.get("name")
        if not name:
            continue
        required = entry.get("actions")
        if required and not any(action in step.actions for action in required):
            continue
        value = entry.get("value")
        value = render(value, memory.template_data()) if isinstance(value, str) else copy.deepcopy(value)
        memory.set_property(name, value, entry.get("scope", "conversation"))
        names_set.append(name)
