"""Conversation memory as the lifecycle tasks see it: the steps so far and the current one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PAUSE_CONVERSATION = "PAUSE_CONVERSATION"
STOP_CONVERSATION = "STOP_CONVERSATION"
CONVERSATION_START = "CONVERSATION_START"
CONVERSATION_END = "CONVERSATION_END"
RESERVED_ACTIONS = (PAUSE_CONVERSATION, STOP_CONVERSATION, CONVERSATION_START, CONVERSATION_END)


@dataclass
class Step:
    """One turn. ``outputs`` is template-visible (``{memory.current.X}``); ``data`` is raw step data
    (keys such as ``hitl:decision_verdict`` that templates cannot reach)."""

    input: str = ""
    context: dict[str, Any] = field(default_factory=dict)
    actions: list[str] = field(default_factory=list)
    output: list[str] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    quick_replies: list[dict[str, Any]] = field(default_factory=list)

    def add_actions(self, actions: list[str]) -> None:
        for action in actions:
            if action not in self.actions:
                self.actions.append(action)


@dataclass
class Caller:
    """The identity a turn runs as: the user who said it, or the approver on a resumed turn."""

    username: str
    token: str = ""


@dataclass
class ConversationMemory:
    conversation_id: str
    current: Step
    previous: list[Step] = field(default_factory=list)
    properties: dict[str, Any] = field(default_factory=dict)
    caller: Caller | None = None

    def set_property(self, name: str, value: Any, scope: str = "conversation") -> None:
        """``conversation`` writes ``properties[name]``; ``step`` writes ``current.outputs["properties"][name]``
        (read as ``{memory.current.properties.<name>}``, gone with the step)."""
        if scope == "step":
            self.current.outputs.setdefault("properties", {})[name] = value
        else:
            self.properties[name] = value

    @property
    def last(self) -> Step | None:
        return self.previous[-1] if self.previous else None

    def template_data(self) -> dict[str, Any]:
        """What ``{…}`` placeholders may read: memory.current/last, properties, context."""
        last = self.last
        return {
            "memory": {
                "current": {"input": self.current.input, **self.current.outputs},
                "last": ({"input": last.input, **last.outputs} if last else {}),
            },
            "properties": self.properties,
            "context": self.current.context,
        }
