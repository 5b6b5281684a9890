"""Running an agent's workflows task by task, and noticing when a task asks to pause or stop.

A task that *adds* PAUSE_CONVERSATION pauses the turn after it (a PAUSE already present before the task
never re-pauses); STOP_CONVERSATION beats PAUSE in the same step. A task may also raise PauseRequested
(the LLM task does, when its tool loop meets a gated call). The bookmark is the workflow id and the
absolute index of the task in that workflow.

Before every task the turn asks whether a cancel of it was recorded (``turn.stop_if_cancelled``); a
task may ask too before a side effect of its own (the next http call, the next tool). Either way the
turn ends as ``cancelled`` before that task or side effect: nothing after it runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from conversations.pipeline.memory import (
    CONVERSATION_END,
    PAUSE_CONVERSATION,
    STOP_CONVERSATION,
    ConversationMemory,
)
from conversations.pipeline.registry import TurnContext, runner_for


class PauseRequested(Exception):  # noqa: N818 - a signal, not an error
    """Raised by a task that must wait for a human before it can finish (e.g. a gated tool call).

    ``timeout_config`` ({"timeoutPolicy", "approvalTimeout"}) replaces the agent's hitlConfig for this
    pause's deadline; ``on_committed(pause)`` runs inside the transaction that opens the pause (to store
    what belongs to it); ``after_commit(pause)`` runs once that transaction committed.
    ``matched_rules`` are the tool rules that tuned the gated calls (they may forbid self-approval).
    """

    def __init__(self, kind: str, reason: str, details: dict[str, Any] | None = None,
                 tool_names: list[str] | None = None, *, timeout_config: dict[str, Any] | None = None,
                 on_committed: Callable[[Any], None] | None = None,
                 after_commit: Callable[[Any], None] | None = None,
                 matched_rules: list[dict[str, Any]] | None = None) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason
        self.details = details or {}
        self.tool_names = tool_names or []
        self.timeout_config = timeout_config
        self.on_committed = on_committed
        self.after_commit = after_commit
        self.matched_rules = matched_rules or []


class TurnCancelled(Exception):  # noqa: N818 - a signal, not an error
    """Raised where a running turn checks for a recorded cancel; ``by`` names who cancelled it."""

    def __init__(self, by: str) -> None:
        super().__init__(f"cancelled by {by}")
        self.by = by


class ConfigDrift(Exception):  # noqa: N818
    """The paused workflow no longer exists in the agent version being continued."""


@dataclass
class LifecycleOutcome:
    kind: str  # "completed" | "paused" | "stopped" | "cancelled"
    workflow_id: str | None = None
    task_index: int | None = None
    pause_kind: str = "RULE"
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    tool_names: list[str] = field(default_factory=list)
    timeout_config: dict[str, Any] | None = None
    on_committed: Callable[[Any], None] | None = None
    after_commit: Callable[[Any], None] | None = None
    matched_rules: list[dict[str, Any]] = field(default_factory=list)
    cancelled_by: str = ""


def _start_position(workflows: list[dict[str, Any]], resume_at: tuple[str, int] | None) -> tuple[int, int]:
    if resume_at is None:
        return 0, 0
    workflow_id, task_index = resume_at
    for position, workflow in enumerate(workflows):
        if workflow.get("id") == workflow_id:
            return position, task_index
    raise ConfigDrift(f"Paused workflow '{workflow_id}' no longer exists (config drift)")


def run_lifecycle(
    document: dict[str, Any],
    memory: ConversationMemory,
    turn: TurnContext,
    *,
    resume_at: tuple[str, int] | None = None,
) -> LifecycleOutcome:
    """Run from the start, or from ``resume_at`` = (workflow id, absolute task index) onwards.

    An index equal to the number of tasks is valid and runs nothing of that workflow.
    """
    workflows = document.get("workflows") or []
    first_workflow, first_task = _start_position(workflows, resume_at)
    for position in range(first_workflow, len(workflows)):
        workflow = workflows[position]
        tasks = workflow.get("tasks") or []
        start = first_task if position == first_workflow else 0
        for index in range(start, len(tasks)):
            task = tasks[index]
            actions_before = set(memory.current.actions)
            try:
                turn.stop_if_cancelled()
                runner_for(task["type"])(task, memory, turn)
            except TurnCancelled as cancel:
                return LifecycleOutcome(kind="cancelled", workflow_id=workflow["id"], task_index=index,
                                        cancelled_by=cancel.by)
            except PauseRequested as pause:
                return LifecycleOutcome(
                    kind="paused", workflow_id=workflow["id"], task_index=index, pause_kind=pause.kind,
                    reason=pause.reason, details=pause.details, tool_names=pause.tool_names,
                    timeout_config=pause.timeout_config, on_committed=pause.on_committed,
                    after_commit=pause.after_commit, matched_rules=pause.matched_rules,
                )
            actions = memory.current.actions
            if STOP_CONVERSATION in actions or CONVERSATION_END in actions:
                return LifecycleOutcome(kind="stopped")
            if PAUSE_CONVERSATION in actions and PAUSE_CONVERSATION not in actions_before:
                return LifecycleOutcome(kind="paused", workflow_id=workflow["id"], task_index=index)
    return LifecycleOutcome(kind="completed")
