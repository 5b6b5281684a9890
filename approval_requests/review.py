"""What a reviewer is shown of an approval request's pause (the ACTION kind's details provider), and the
one line of its pinned request its inbox row shows."""

from __future__ import annotations

from typing import Any

from approval_requests.models import ApprovalRequest
from approval_requests.pinning import PinnedRequest
from approvals.models import Pause
from toolgate.outbound import redact_json_value, redact_uri

REQUEST_LINE_MAX = 300


def request_line(pinned: PinnedRequest) -> str:
    """The pinned request's method and URL for a row among many ("POST https://…"): kept on the pause when
    it opens (``details.requestLine``), so the inbox reads no request per row. The URL's credential-shaped
    parts are redacted (the line is a label: the decision page shows the request exactly as sent)."""
    line = f"{pinned.method} {redact_uri(pinned.url)}"
    return line if len(line) <= REQUEST_LINE_MAX else line[: REQUEST_LINE_MAX - 1] + "…"


def action_pause_details(pause: Pause, *, reviewer: bool = False) -> dict[str, Any]:
    """The pauseDetails of an approval request: the action, its arguments, the pinned request and the
    agent's context. A reviewer deciding it while it waits sees every byte (secret headers excepted: the
    agent marked them and the server never had their values); everyone else gets values that look like
    credentials redacted by shape."""
    request = ApprovalRequest.objects.filter(pk=pause.subject_id).select_related("on_behalf_of").first()
    if request is None:
        return {"type": "ACTION", "missing": True}
    shown = (lambda value: value) if reviewer else redact_json_value
    return {
        "type": "ACTION",
        "approvalRequestId": str(request.id),
        "agent": request.agent,
        "account": pause.details.get("account"),
        "onBehalfOf": request.on_behalf_of.get_username() if request.on_behalf_of else None,
        "action": {"name": request.action_name, "arguments": shown(request.arguments)},
        "requestPinned": request.request_preview is not None,
        "request": shown(request.request_preview) if request.request_preview is not None else None,
        "context": shown(request.context) if request.context is not None else None,
        "allowEdit": (request.hitl_config or {}).get("allowEdit") is not False,
        "allowRespond": (request.hitl_config or {}).get("allowRespond") is not False,
    }
