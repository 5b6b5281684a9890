"""The approval gates of a discussion (docs/groups.md, "Approval gates").

A phase with ``requiresApproval`` is followed by a gate. With ``hitlConfig.granularity`` TASK on an
EXECUTE phase the gate is a TASK pause, and only while there is something to decide (results awaiting
approval) or left to run; with PHASE, or TASK on any other phase type (a gate is never skipped), it is
a PHASE pause. The pause is one core Pause row (surface ``group``), opened in the transaction that
moves the discussion to AWAITING_APPROVAL, with the same timers, audit, inbox and recovery as a 1:1
pause.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from approvals.models import Engine, Pause, PauseKind, SubjectType
from approvals.pauses import open_pause
from groups import task_list
from groups.group_document import EXECUTE
from groups.models import DiscussionState, GroupConversation

PHASE, TASK = PauseKind.PHASE, PauseKind.TASK
NO_PROGRESS = (
    "Discussion failed: EXECUTE phase '{name}' cannot make progress — the same task(s) remained executable "
    "across an approval cycle without advancing (exhausted turn budget or tasks assigned to an agent that "
    "can no longer be resolved). Increase protocol.maxTurns, fix the task assignments, or cancel the "
    "discussion."
)


def granularity(document: dict[str, Any]) -> str:
    return (document.get("hitlConfig") or {}).get("granularity") or PHASE


def task_gated(document: dict[str, Any], phase: dict[str, Any]) -> bool:
    """Whether the phase's task results are submitted for approval one by one (TASK on EXECUTE)."""
    return bool(phase.get("requiresApproval")) and phase["type"] == EXECUTE and granularity(document) == TASK


def gate_after(document: dict[str, Any], phase: dict[str, Any], tasks: list[dict[str, Any]]) -> str | None:
    """The pause kind the end of ``phase`` calls for, or None to go on (``tasks``: the phase's own)."""
    if not phase.get("requiresApproval"):
        return None
    if task_gated(document, phase):
        return TASK if task_list.awaiting(tasks) or task_list.ready(tasks) else None
    return PHASE


def pause_reason(kind: str, phase_name: str) -> str:
    return f"Requires human approval ({kind}) — phase: {phase_name}"


def _counted(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def produced(discussion: GroupConversation, phase: dict[str, Any], kind: str) -> str:
    """What the phase produced, as a reviewer counts it: its members' contributions, or for a TASK gate the
    tasks awaiting approval."""
    if kind == TASK:
        awaiting = task_list.awaiting(task_list.of_phase(discussion.tasks, phase["name"]))
        return _counted(len(awaiting), "task")
    said = [
        entry
        for entry in discussion.transcript
        if entry.get("phase") == phase["name"] and entry.get("member") is not None
    ]
    return _counted(len(said), "contribution")


def open_gate(
    *, discussion: GroupConversation, document: dict[str, Any], index: int, kind: str
) -> Pause | None:
    """Move the running discussion to AWAITING_APPROVAL and open its pause, in one transaction. None when
    a cancel was requested meanwhile: the caller cancels the discussion instead (no pause)."""
    phase = document["phases"][index]
    phase_tasks = task_list.of_phase(discussion.tasks, phase["name"])
    awaiting_ids = [task["id"] for task in task_list.awaiting(phase_tasks)]
    reason = pause_reason(kind, phase["name"])
    with transaction.atomic():
        moved = GroupConversation.objects.filter(
            pk=discussion.pk, state=DiscussionState.IN_PROGRESS, cancel_requested_at__isnull=True
        ).update(
            state=DiscussionState.AWAITING_APPROVAL,
            phase_index=index,
            turn_count=discussion.turn_count,
            transcript=discussion.transcript,
            tasks=discussion.tasks,
            member_conversations=discussion.member_conversations,
            budget_base=discussion.budget_base,
            last_pause_fingerprint=discussion.last_pause_fingerprint,
            turn_alive_until=None,
        )
        if not moved:
            return None
        discussion.state = DiscussionState.AWAITING_APPROVAL
        where = {"phaseIndex": index, "phaseName": phase["name"], "phaseType": phase["type"]}
        # what the reviewer's pages say of it without a query: the group's name, what the phase produced
        shown = {"groupName": document.get("name") or "", "produced": produced(discussion, phase, kind)}
        return open_pause(
            surface=Engine.GROUP,
            kind=kind,
            subject_type=SubjectType.DISCUSSION,
            subject_id=discussion.pk,
            owner_id=discussion.owner_id,
            raised_by_id=discussion.owner_id,
            reason=reason,
            hitl_config=document.get("hitlConfig"),
            group_id=discussion.group_id,
            bookmark=where
            | {
                "granularity": granularity(document),
                "turnCount": discussion.turn_count,
                "groupVersion": discussion.group_version,
            },
            details=where | shown | {"granularity": granularity(document), "awaitingTaskIds": awaiting_ids},
        )
