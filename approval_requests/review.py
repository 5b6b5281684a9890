"""What a reviewer is shown of an approval request's pause (the ACTION kind's details provider)."""

from __future__ import annotations

from typing import Any

from approval_requests.models import ApprovalRequest
from approvals.models import Pause
from toolgate.outbound import redact_json_value


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
