"""The ``behavior_rules`` task: rules whose conditions all hold add their actions to the step.

Rules are evaluated in document order, every one of them (a firing rule does not stop the others), and
each sees the actions added by the rules before it. A rule without conditions always fires. Actions
keep their order and are never duplicated (``Step.add_actions``); the names of fired rules are
appended to ``data["behavior_rules:fired"]``.
"""

from __future__ import annotations

from typing import Any

from conversations.pipeline.conditions import all_conditions_hold
from conversations.pipeline.conversation_memory import ConversationMemory
from conversations.pipeline.registry import TurnContext


def run(task: dict[str, Any], memory: ConversationMemory, turn: TurnContext) -> None:
    fired: list[str] = memory.current.data.setdefault("behavior_rules:fired", [])
    for rule in task.get("rules") or []:
        conditions = [c for c in rule.get("conditions") or [] if isinstance(c, dict)]
        if all_conditions_hold(conditions, memory):
            memory.current.add_actions([str(action) for action in rule.get("actions") or []])
            fired.append(str(rule.get("name", "")))
