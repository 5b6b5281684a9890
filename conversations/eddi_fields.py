"""A conversation under EDDI's names: the fields of EDDI's memory snapshot that its clients read, which
``approval-status?detail=full`` carries beside ours (docs/eddi-compatibility.md).

EDDI answers ``detail=full`` with the sanitized snapshot itself: its state, outputs, properties and the
pause bookmark (``hitlPausedAt``, ``hitlPauseReason``, …, ``hitlPendingToolCalls``). Here the same fields
sit at the top level of the answer, beside the summary and ``conversation`` (our snapshot). The pending
tool calls are the redacted view, sanitized further than EDDI does: EDDI sets the raw arguments, the
frozen transcript and the trace to null, here they are absent (no key names them); a pinned request's
fingerprint is only the marker ``"<REDACTED>"``, as in EDDI.
"""

from __future__ import annotations

from typing import Any

from approvals.models import Pause, PauseKind
from approvals.pause_summaries import iso, pause_details, shown_approval_timeout

REDACTED = "<REDACTED>"
NOT_PAUSED: dict[str, Any] = {
    "hitlPausedAt": None,
    "hitlPauseReason": None,
    "hitlTimeoutPolicy": None,
    "hitlApprovalTimeout": None,
    "hitlPauseType": None,
    "hitlPendingToolCalls": None,
}


def _output(step: dict[str, Any]) -> dict[str, Any]:
    return {
        "input": step["input"],
        "actions": list(step["actions"]),
        "output": [{"type": "text", "text": text} for text in step["output"]],
    }


def _pending_tool_calls(pause: Pause) -> dict[str, Any]:
    details = pause_details(pause)  # the redacted view, whoever asks
    return {
        "pauseEpoch": str(pause.epoch),
        "calls": [
            {
                "callId": call["callId"],
                "toolName": call["toolName"],
                "source": call["source"],
                "argumentsRedacted": call["arguments"],
                "argsTruncated": call["argsTruncated"],
                "gateReason": call["gateReason"],
                "matchedRule": call.get("matchedRule"),
                "requestFingerprint": REDACTED if call["requestPinned"] else None,
                "requestPinned": call["requestPinned"],
                "requestPreview": call["requestPreview"],
            }
            for call in details.get("calls", [])
        ],
        "executedUngatedCallNames": list(details.get("executedUngatedCalls", [])),
    }


def _bookmark(pause: Pause | None) -> dict[str, Any]:
    if pause is None:
        return NOT_PAUSED
    kind = pause.kind or PauseKind.RULE
    return {
        "hitlPausedAt": iso(pause.paused_at),
        "hitlPauseReason": pause.reason,
        "hitlTimeoutPolicy": pause.timeout_policy,
        "hitlApprovalTimeout": shown_approval_timeout(pause.timeout_policy, pause.approval_timeout),
        "hitlPauseType": kind,
        "hitlPendingToolCalls": _pending_tool_calls(pause) if kind == PauseKind.TOOL_CALL else None,
    }


def eddi_snapshot(snapshot: dict[str, Any], *, owner: str | None, pending: Pause | None) -> dict[str, Any]:
    """EDDI's snapshot fields from ours (conversations.snapshots.snapshot) and the pending pause (None
    when nothing awaits a decision)."""
    return {
        "agentId": snapshot["agentId"],
        "agentVersion": snapshot["agentVersion"],
        "userId": owner,
        "environment": snapshot["environment"],
        "conversationState": snapshot["state"],
        "conversationOutputs": [_output(step) for step in snapshot["steps"]],
        "conversationProperties": snapshot["properties"],
        **_bookmark(pending),
    }
