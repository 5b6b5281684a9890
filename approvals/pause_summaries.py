"""What a pause looks like to the outside: inbox rows and pause summaries.

One place builds them for every surface, from an allow-list of fields: raw tool arguments, frozen
transcripts and fingerprints are never part of it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from approvals.models import Pause, PauseKind, Verdict, Vote
from approvals.pause_kinds import details_provider_for, outcome_unknown_steps
from approvals.pauses import FINITE_POLICIES

# What approval-status shows for each pause field when nothing awaits a decision.
NO_PAUSE_FIELDS: dict[str, None] = dict.fromkeys(
    ("pauseId", "pausedAt", "pauseReason", "pauseType", "timeoutPolicy", "approvalTimeout", "deadline")
)


def iso(value: datetime | None) -> str | None:
    """Instants in UTC with millisecond precision, e.g. 2026-11-30T10:15:30.123Z."""
    if value is None:
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def shown_approval_timeout(policy: str, approval_timeout: str) -> str | None:
    """A field with no value is null, never "": a pause that waits indefinitely has no timeout (and no
    deadline), whatever duration its configuration carried."""
    return approval_timeout if policy in FINITE_POLICIES and approval_timeout else None


def pause_fields(pause: Pause) -> dict[str, Any]:
    """The pause fields of approval-status, for a pending pause; see ``NO_PAUSE_FIELDS`` otherwise."""
    return {
        "pauseId": str(pause.id),
        "pausedAt": iso(pause.paused_at),
        "pauseReason": pause.reason,
        "pauseType": pause.kind or PauseKind.RULE,
        "timeoutPolicy": pause.timeout_policy,
        "approvalTimeout": shown_approval_timeout(pause.timeout_policy, pause.approval_timeout),
        "deadline": iso(pause.due_at),
        **(_approvals(pause.required_approvals, _votes_of(pause)) if pause.required_approvals > 1 else {}),
    }


def _votes_of(pause: Pause) -> list[tuple[str, datetime]]:
    return list(Vote.objects.filter(pause=pause).values_list("voter", "voted_at"))


def inbox_row_from_values(row: dict[str, Any]) -> dict[str, Any]:
    """An inbox row of the API contract from a row of approvals.selectors.INBOX_COLUMNS."""
    return {
        "pauseId": str(row["id"]),
        "surface": row["surface"],
        "conversationId": str(row["subject_id"]),
        "agentId": str(row["agent_id"]) if row["agent_id"] else None,
        "groupId": str(row["group_id"]) if row["group_id"] else None,
        "ownerId": row["owner__username"],
        "userId": row["owner__username"],  # EDDI's name for the same
        "pausedAt": iso(row["paused_at"]),
        "deadline": iso(row["due_at"]),
        "pauseReason": row["reason"],
        "pauseType": row["kind"] or PauseKind.RULE,
        "timeoutPolicy": row["timeout_policy"],
        "approvalTimeout": shown_approval_timeout(row["timeout_policy"], row["approval_timeout"]),
        "toolNames": list(row["tool_names"] or []),
        **_approvals(row.get("required_approvals") or 1, row.get("votes")),
    }


def _approvals(required: int, votes: list[tuple[str, datetime]] | None) -> dict[str, Any]:
    """``approvals`` of a pause that needs several (approvals.votes): the count, how many, who and when."""
    if required <= 1:
        return {}
    by = [{"voter": voter, "at": iso(at)} for voter, at in votes or []]
    return {"approvals": {"count": len(by), "required": required, "by": by}}


def pause_details(
    pause: Pause, *, step_actions: list[str] | None = None, reviewer: bool = False
) -> dict[str, Any]:
    """EDDI's pauseDetails: RULE {type, reason, actions, outcomeUnknown}; TOOL_CALL per-call
    summaries. A RULE pause's ``outcomeUnknown`` lists the steps an earlier, interrupted run of its
    continuation claimed and never recorded (they are never sent again), empty otherwise. ``reviewer``:
    the view of a reviewer deciding the pause (approvals.access.sees_what_runs)."""
    provider = details_provider_for(pause.kind)
    if provider is not None:
        return provider(pause, reviewer=reviewer)
    if pause.kind == PauseKind.TOOL_CALL:
        details = pause.details or {}
        return {
            "type": PauseKind.TOOL_CALL,
            "calls": list(details.get("calls", [])),
            "executedUngatedCalls": list(details.get("executedUngatedCalls", [])),
            "outcomeUnknown": list(details.get("outcomeUnknown", [])),
        }
    actions = step_actions if step_actions is not None else (pause.details or {}).get("actions", [])
    return {
        "type": PauseKind.RULE,
        "reason": pause.reason,
        "actions": list(actions),
        "outcomeUnknown": outcome_unknown_steps(pause),
    }


def decision_summary(pause: Pause) -> dict[str, Any] | None:
    """The pause's decision. ``cancelledBy``/``cancelledAt`` say who cancelled and when: the pending pause
    itself (verdict CANCELLED), or its continuation after the decision (which then stopped, or stops,
    before its next task); null when nobody cancelled."""
    if not pause.verdict:
        return None
    cancelled_by, cancelled_at = pause.cancel_requested_by, pause.cancel_requested_at
    if pause.verdict == Verdict.CANCELLED and not cancelled_by:
        cancelled_by, cancelled_at = pause.decided_by, pause.decided_at
    return {
        "verdict": pause.verdict,
        "decidedBy": pause.decided_by,
        "automated": pause.automated,
        "note": pause.note or None,  # a field with no value is null, never ""
        "decidedAt": iso(pause.decided_at),
        "cancelledBy": cancelled_by or None,
        "cancelledAt": iso(cancelled_at),
    }
