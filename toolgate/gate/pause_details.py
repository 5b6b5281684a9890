"""The pauseDetails of a tool pause: allow-listed fields only, for two audiences.

- **The reviewer deciding it** while it waits (``approvals.access.sees_what_runs``) sees every byte the
  model controls: each call's arguments as the model wrote them (up to 256 KiB, ``argsTruncated``
  beyond) and its request exactly as it will be sent (``requestPreview``, with ``url``: the whole target,
  query included), values the service injects shown by their reference; and ``warnings`` for each
  value that looks like a credential (``toolgate.gate.credential_warnings``).
- **Everyone else** (the owner, anyone once it is decided) gets the redacted view: the arguments and the
  request through the one redaction filter, no warnings.

The frozen transcript and the request fingerprint never appear in either.
"""

from __future__ import annotations

from typing import Any

from approvals.models import Pause
from toolgate.gate.amendments import shown_arguments
from toolgate.gate.credential_warnings import credential_warnings
from toolgate.gate.journal import outcome_unknown_call_ids
from toolgate.models import PendingToolBatch, PendingToolCall
from toolgate.outbound.request_views import redacted_preview


def call_details(call: PendingToolCall, *, reviewer: bool) -> dict[str, Any]:
    details: dict[str, Any] = {
        "callId": call.call_id,
        "toolName": call.tool_name,
        "source": call.source,
        "arguments": call.arguments_raw if reviewer else shown_arguments(call),
        "argsTruncated": call.args_truncated,
        "gateReason": call.gate_reason,
        "matchedRule": call.matched_rule or None,
        "requestPinned": call.request_pinned,
        "requestPreview": call.request_preview if reviewer else redacted_preview(call.request_preview),
    }
    if reviewer:
        details["warnings"] = credential_warnings(call.arguments_raw, call.request_preview)
    return details


def tool_pause_details(pause: Pause, *, reviewer: bool = False) -> dict[str, Any]:
    batch = PendingToolBatch.objects.filter(pause=pause).prefetch_related("calls").first()
    if batch is None:
        return {"type": "TOOL_CALL", "calls": [], "executedUngatedCalls": [], "outcomeUnknown": []}
    return {
        "type": "TOOL_CALL",
        "calls": [call_details(call, reviewer=reviewer) for call in batch.calls.all()],
        "executedUngatedCalls": list(batch.executed_ungated_calls),
        "outcomeUnknown": outcome_unknown_call_ids(pause.epoch),
    }
