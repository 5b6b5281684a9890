"""Running an agent's workflows task by task, and noticing when a task asks to pause or stop.

A task that *adds* PAUSE_CONVERSATION pauses the turn after it (a PAUSE already present before the task
never re-pauses); STOP_CONVERSATION beats PAUSE in the same step. A task may also return a PauseRequest
(the LLM task does, when its tool loop meets a gated call). The bookmark is the workflow id and the
absolute index of the task in that workflow.

A continuation enters at a ResumePoint, checked once for config drift (``config_drift``) before it runs;
the task it names is the only one that sees it (``TurnContext.resume``).

A cancel of a running turn is honoured before every side effect: a task that has one asks first
(``turn.stop_if_cancelled``: the httpcalls task before each call and retry, the llm task before each
model call and tool run), and the turn ends as ``cancelled`` there, so nothing after it runs. Tasks
without side effects (parser, rules, properties, output, templating) do not ask, which saves a query
each; a cancel that lands during them is seen by the next task that has one, or by the commit, which
refuses to land a turn whose cancel was recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from approvals.models import PauseKind
from conversations.pipeline.conversation_memory import (
    CONVERSATION_END,
    PAUSE_CONVERSATION,
    STOP_CONVERSATION,
    ConversationMemory,
)
from conversations.pipeline.pausing import PauseRequest, ResumePoint
from conversations.pipeline.registry import TurnContext, runner_for


@dataclass(frozen=True)
class Drift:
    """Why a resume point no longer fits the agent version being continued."""

    reason: str
    workflow_gone: bool  # the turn cannot go on at all; otherwise only the paused llm task moved


def config_drift(document: dict[str, Any], point: ResumePoint) -> Drift | None:
    """The config-drift rule, checked once before a continuation runs: the paused workflow must still
    exist in the agent version being continued and, for a tool pause, the task at the point's index must
    still be the llm task that paused (same id, still an llm task). Returns what drifted, or None.

    A drifted tool pause applies nothing of its batch and the rest of the turn runs; a gone workflow
    fails the turn.
    """
    workflow = next((w for w in document.get("workflows") or [] if w.get("id") == point.workflow_id), None)
    if workflow is None:
        return Drift(
            f"Paused workflow '{point.workflow_id}' no longer exists (config drift)", workflow_gone=True
        )
    if point.kind != PauseKind.TOOL_CALL:
        return None
    paused_task_id = point.tool_batch.llm_task_id if point.tool_batch is not None else None
    tasks = workflow.get("tasks") or []
    task = tasks[point.task_index] if 0 <= point.task_index < len(tasks) else None
    if task is None or task.get("type") != "llm" or task.get("id") != paused_task_id:
        return Drift(
            f"the paused llm task '{paused_task_id}' is no longer at its place in the workflow",
            workflow_gone=False,
        )
    return None


class TurnCancelled(Exception):  # a signal, not an error
    """Raised where a running turn checks for a recorded cancel; ``by`` names who cancelled it."""

    def __init__(self, by: str) -> None:
        super().__init__(f"cancelled by {by}")
        self.by = by


class ConfigDrift(Exception):
    """The paused workflow no longer exists in the agent version being continued (the turn fails)."""


@dataclass(frozen=True)
class Completed:
    """Every task ran."""


@dataclass(frozen=True)
class Stopped:
    """A task added STOP_CONVERSATION or CONVERSATION_END."""


@dataclass(frozen=True)
class Paused:
    """The turn waits for a human; the bookmark is the task that asked (the task after it resumes a RULE pause)."""

    workflow_id: str
    task_index: int
    request: PauseRequest


@dataclass(frozen=True)
class Cancelled:
    """A recorded cancel stopped the turn before the task at (workflow_id, task_index)."""

    workflow_id: str
    task_index: int
    by: str


LifecycleOutcome = Completed | Stopped | Paused | Cancelled


def _start_position(workflows: list[dict[str, Any]], resume: ResumePoint | None) -> tuple[int, int]:
    if resume is None:
        return 0, 0
    for position, workflow in enumerate(workflows):
        if workflow.get("id") == resume.workflow_id:
            return position, resume.task_index
    raise LookupError(f"no workflow '{resume.workflow_id}' to resume in: check config_drift first")


def run_lifecycle(
    document: dict[str, Any],
    memory: ConversationMemory,
    turn: TurnContext,
    *,
    resume: ResumePoint | None = None,
) -> LifecycleOutcome:
    """Run from the start, or from ``resume`` (a point config_drift found no gone workflow in) onwards.

    An index equal to the number of tasks is valid and runs nothing of that workflow.
    """
    workflows = document.get("workflows") or []
    first_workflow, first_task = _start_position(workflows, resume)
    for position in range(first_workflow, len(workflows)):
        workflow = workflows[position]
        tasks = workflow.get("tasks") or []
        start = first_task if position == first_workflow else 0
        for index in range(start, len(tasks)):
            task = tasks[index]
            entered = resume is not None and (position, index) == (first_workflow, first_task)
            actions_before = set(memory.current.actions)
            try:
                request = runner_for(task["type"])(
                    task, memory, replace(turn, resume=resume) if entered else turn
                )
            except TurnCancelled as cancel:
                return Cancelled(workflow_id=workflow["id"], task_index=index, by=cancel.by)
            if isinstance(request, PauseRequest):
                return Paused(workflow_id=workflow["id"], task_index=index, request=request)
            actions = memory.current.actions
            if STOP_CONVERSATION in actions or CONVERSATION_END in actions:
                return Stopped()
            if PAUSE_CONVERSATION in actions and PAUSE_CONVERSATION not in actions_before:
                return Paused(
                    workflow_id=workflow["id"], task_index=index, request=PauseRequest(PauseKind.RULE)
                )
    return Completed()
