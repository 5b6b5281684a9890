"""What a pause looks like to the outside: inbox rows and pause summaries.

One place builds them for every surface, from an allow-list of fields: raw tool arguments, frozen
transcripts and fingerprints are never part of it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from approvals.models import Pause, PauseKind
from approvals.pause_kinds import details_provider_for


def iso(value: datetime | None) -> str | None:
    """Instants in UTC with millisecond precision, e.g. 2026-11-30T10:15:30.123Z."""
    if value is None:
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def inbox_row(pause: Pause) -> dict[str, Any]:
    return {
        "pauseId": str(pause.id),
        "surface": pause.surface,
        "conversationId": str(pause.subject_id),
        "agentId": str(pause.agent_id) if pause.agent_id else None,
        "groupId": str(pause.group_id) if pause.group_id else None,
        "ownerId": pause.owner.get_username() if pause.owner_id else None,
        "pausedAt": iso(pause.paused_at),
        "deadline": iso(pause.due_at),
        "pauseReason": pause.reason,
        "pauseType": pause.kind or PauseKind.RULE,
        "timeoutPolicy": pause.timeout_policy,
        "approvalTimeout": pause.approval_timeout or None,
        "toolNames": list(pause.tool_names or []),
    }


def pause_details(pause: Pause, *, step_actions: list[str] | None = None) -> dict[str, Any]:
    """The reference's pauseDetails: RULE {type, reason, actions}; TOOL_CALL per-call summaries."""
    provider = details_provider_for(pause.kind)
    if provider is not None:
        return provider(pause)
    if pause.kind == PauseKind.TOOL_CALL:
        details = pause.details or {}
        return {
            "type": PauseKind.TOOL_CALL,
            "calls": list(details.get("calls", [])),
            "executedUngatedCalls": list(details.get("executedUngatedCalls", [])),
            "outcomeUnknown": list(details.get("outcomeUnknown", [])),
        }
    actions = step_actions if step_actions is not None else (pause.details or {}).get("actions", [])
    return {"type": PauseKind.RULE, "reason": pause.reason, "actions": list(actions)}


def decision_summary(pause: Pause) -> dict[str, Any] | None:
    if not pause.verdict:
        return None
    return {
        "verdict": pause.verdict,
        "decidedBy": pause.decided_by,
        "automated": pause.automated,
        "note": pause.note,
        "decidedAt": iso(pause.decided_at),
    }
