"""How a task asks its turn to wait for a human, and where the continuation of the decided pause enters.

A task runner returns a ``PauseRequest`` (conversations.pipeline.registry); the lifecycle
(conversations.lifecycle) turns it into a pause, and the continuation re-enters the pipeline at a
``ResumePoint``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolgate.gate import PendingBatch
    from toolgate.models import PendingToolBatch
    from toolgate.runtime import GuardTrip


@dataclass(frozen=True)
class PauseRequest:
    """What a task returns when the turn must wait for a human before it can finish.

    ``timeout_config`` ({"timeoutPolicy", "approvalTimeout"}) replaces the agent's hitlConfig for this
    pause's deadline; ``matched_rules`` are the tool rules that tuned the gated calls (they may forbid
    self-approval). What belongs to the pause is data the commit step stores with it, in the transaction
    that opens it: ``tool_batch`` (the gated calls of a TOOL_CALL pause) and ``guard_trip`` (a no-progress
    guard that tripped on this pause: audited there, and acted on once the pause is committed).
    """

    kind: str
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    tool_names: list[str] = field(default_factory=list)
    timeout_config: dict[str, Any] | None = None
    matched_rules: list[dict[str, Any]] = field(default_factory=list)
    tool_batch: PendingBatch | None = None
    guard_trip: GuardTrip | None = None


@dataclass(frozen=True)
class ResumePoint:
    """Where the continuation of a decided pause enters the pipeline: the first task to run (workflow id,
    absolute index) and, for a tool pause, the frozen batch the llm task there re-enters its loop with
    (its ``pause`` is the decided pause whose verdicts apply)."""

    workflow_id: str
    task_index: int
    pause_id: str
    kind: str
    tool_batch: PendingToolBatch | None = None

    def past_paused_task(self) -> ResumePoint:
        """The same turn going on after the paused task, without re-entering it."""
        return replace(self, task_index=self.task_index + 1, tool_batch=None)
