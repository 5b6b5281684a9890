"""Conversation memory as the lifecycle tasks see it: the steps so far and the current one.

A turn holds only the newest earlier steps (``previous``, a window); what reaches further back reads
the rest on demand: ``recent(n)`` for an llm task's history, ``every_previous()`` for the ``anyStep``
and ``never`` conditions, ``search_history`` for the recall tool.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import InitVar, dataclass, field
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
    """The identity a turn runs as: the user who said it, also when the turn resumes after a decision
    (conversations.acting_identity).

    ``token`` is read only when a request needs it (``${caller:token}``, an llm task's tools): most turns
    never do, so ``load_token`` saves them a query."""

    username: str
    given_token: InitVar[str | None] = None
    load_token: Callable[[], str] | None = field(default=None, repr=False, compare=False)
    _token: str | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self, given_token: str | None) -> None:
        self._token = given_token

    @property
    def token(self) -> str:
        if self._token is None:
            self._token = self.load_token() if self.load_token is not None else ""
        return self._token


@dataclass
class ConversationMemory:
    """``previous`` holds the newest earlier steps, oldest first; ``first_index`` is the position in the
    conversation of ``previous[0]`` (0: ``previous`` holds every earlier step). ``load_steps(start, stop)``
    reads the earlier steps at positions ``start`` to ``stop - 1`` and ``search_steps(needle, limit)``
    searches all of them; without them (a memory built in memory) ``previous`` is taken to be complete."""

    conversation_id: str
    current: Step
    previous: list[Step] = field(default_factory=list)
    properties: dict[str, Any] = field(default_factory=dict)
    caller: Caller | None = None
    first_index: int = 0
    load_steps: Callable[[int, int], list[Step]] | None = field(default=None, repr=False)
    search_steps: Callable[[str, int], list[dict[str, Any]]] | None = field(default=None, repr=False)

    def recent(self, count: int) -> list[Step]:
        """The newest ``count`` earlier steps, oldest first; what the window lacks is read now, once."""
        if count <= 0:
            return []
        missing = count - len(self.previous)
        if missing > 0 and self.first_index > 0 and self.load_steps is not None:
            start = max(0, self.first_index - missing)
            self.previous[:0] = self.load_steps(start, self.first_index)
            self.first_index = start
        return self.previous[-count:]

    def every_previous(self) -> list[Step]:
        """Every earlier step, oldest first (reads the steps before the window, once)."""
        if self.first_index > 0 and self.load_steps is not None:
            self.previous[:0] = self.load_steps(0, self.first_index)
            self.first_index = 0
        return self.previous

    def search_history(self, query: str, limit: int) -> list[dict[str, Any]]:
        """The newest ``limit`` earlier steps whose input and output texts, joined by spaces, contain
        ``query`` (ignoring case), oldest first, as ``{"turn": position, "input", "output"}``."""
        needle = (query or "").lower()
        limit = max(1, int(limit or 5))
        if not needle:
            return []
        if self.search_steps is not None:
            return self.search_steps(needle, limit)
        hits = []
        for index, step in enumerate(self.every_previous()):
            if needle in " ".join([step.input, *step.output]).lower():
                hits.append({"turn": index, "input": step.input, "output": step.output})
        return hits[-limit:]

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
