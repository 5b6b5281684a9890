"""The approver-facing view of a tool pause: allow-listed fields only, every string re-redacted.

Raw arguments, the frozen transcript and the request fingerprint never appear here.
"""

from __future__ import annotations

from typing import Any

from approvals.models import Pause
from toolgate.amendments import shown_arguments
from toolgate.journal import outcome_unknown_call_ids
from toolgate.models import PendingToolBatch
from toolgate.redaction import redact


def _redacted_preview(preview: dict[str, Any] | None) -> dict[str, Any] | None:
    if not preview:
        return None
    return {
        "method": preview.get("method"),
        "uri": redact(preview.get("uri") or ""),
        "queryParams": {
            name: redact(str(value)) for name, value in (preview.get("queryParams") or {}).items()
        },
        "headers": {name: redact(str(value)) for name, value in (preview.get("headers") or {}).items()},
        "body": redact(preview.get("body") or ""),
        "bodyTruncated": bool(preview.get("bodyTruncated")),
    }


def tool_pause_details(pause: Pause) -> dict[str, Any]:
    batch = PendingToolBatch.objects.filter(pause=pause).prefetch_related("calls").first()
    if batch is None:
        return {"type": "TOOL_CALL", "calls": [], "executedUngatedCalls": [], "outcomeUnknown": []}
    return {
        "type": "TOOL_CALL",
        "calls": [
            {
                "callId": call.call_id,
                "toolName": call.tool_name,
                "source": call.source,
                "arguments": shown_arguments(call),
                "argsTruncated": call.args_truncated,
                "gateReason": call.gate_reason,
                "matchedRule": call.matched_rule or None,
                "requestPinned": call.request_pinned,
                "requestPreview": _redacted_preview(call.request_preview),
            }
            for call in batch.calls.all()
        ],
        "executedUngatedCalls": list(batch.executed_ungated_calls),
        "outcomeUnknown": outcome_unknown_call_ids(pause.epoch),
    }
