"""A discussion under EDDI's names: the fields of EDDI's group conversation that its clients read,
carried beside ours in every REST answer that shows a discussion (docs/eddi-compatibility.md).

EDDI's transcript entries name the speaker ``speakerAgentId``/``speakerDisplayName``, the phase
``phaseName`` and what the entry is ``type`` (its phase's kind, ``ERROR`` or ``SKIPPED``); ours name
them ``member``/``role``/``phase``/``status``. Each entry carries both.
"""

from __future__ import annotations

from typing import Any

from approvals.models import PauseStatus, SubjectType
from approvals.pause_summaries import iso, shown_approval_timeout
from approvals.selectors import current_pause_of
from groups.models import DiscussionState, GroupConversation

# an OK entry's type is its phase's kind; EDDI calls an EXECUTE phase's entries TASK_RESULT
ENTRY_TYPES = {"EXECUTE": "TASK_RESULT"}
NOT_PAUSED: dict[str, Any] = {
    "pausedAtPhaseIndex": -1,
    "pausedPhaseName": None,
    "pausedAt": None,
    "hitlPauseType": None,
    "hitlPauseReason": None,
    "hitlTimeoutPolicy": None,
    "hitlApprovalTimeout": None,
}


def transcript_entry(entry: dict[str, Any]) -> dict[str, Any]:
    status = entry.get("status", "OK")
    return entry | {
        "speakerAgentId": entry.get("member"),
        "speakerDisplayName": entry.get("role"),
        "phaseName": entry.get("phase"),
        "type": status
        if status != "OK"
        else ENTRY_TYPES.get(entry.get("phaseType", ""), entry.get("phaseType")),
        "errorReason": entry.get("note") if status != "OK" else None,
    }


def _task(task: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": task["id"],
        "description": task["description"],
        "assignedAgentId": task["assignee"],
        "dependsOn": list(task["dependsOn"]),
        "status": task["status"],
        "result": task.get("result"),
    }


def _pause_fields(discussion: GroupConversation) -> dict[str, Any]:
    if discussion.state != DiscussionState.AWAITING_APPROVAL:
        return NOT_PAUSED
    pause = current_pause_of(SubjectType.DISCUSSION, discussion.id)
    if pause is None or pause.status != PauseStatus.PENDING:
        return NOT_PAUSED
    where = pause.details or {}
    return {
        "pausedAtPhaseIndex": where.get("phaseIndex", -1),
        "pausedPhaseName": where.get("phaseName"),
        "pausedAt": iso(pause.paused_at),
        "hitlPauseType": pause.kind,
        "hitlPauseReason": pause.reason,
        "hitlTimeoutPolicy": pause.timeout_policy,
        "hitlApprovalTimeout": shown_approval_timeout(pause.timeout_policy, pause.approval_timeout),
    }


def _synthesized_answer(transcript: list[dict[str, Any]]) -> str | None:
    said = [e["content"] for e in transcript if e.get("phaseType") == "SYNTHESIS" and e.get("status") == "OK"]
    return said[-1] if said else None


def eddi_group_conversation(discussion: GroupConversation) -> dict[str, Any]:
    """EDDI's fields of the discussion (the transcript is ``transcript_entry``'s, with both names)."""
    owner = discussion.owner
    return {
        "id": str(discussion.id),
        "userId": owner.get_username() if owner is not None else None,
        "originalQuestion": discussion.question,
        "currentPhaseIndex": discussion.phase_index,
        "synthesizedAnswer": _synthesized_answer(discussion.transcript),
        "taskList": {"tasks": [_task(t) for t in discussion.tasks]},
        **_pause_fields(discussion),
        "created": iso(discussion.created_at),
        "lastModified": iso(discussion.updated_at),
        "transcript": [transcript_entry(e) for e in discussion.transcript],
    }
