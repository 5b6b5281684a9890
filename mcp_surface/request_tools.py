"""The approval request tools, each the REST operation's service call (approval_requests.api): the same
selectors behind the same access rule (a reviewer reads and decides every request, a person reads and
cancels the requests made for them and decides none; no existence oracle), the same decision and cancel
services, the same view of a request (``request_json``: credential-shaped values redacted for anyone
but a reviewer). Service accounts never get here: the token gate refuses them (mcp_surface.identity)."""

from __future__ import annotations

from typing import Any

from approval_requests.models import ApprovalRequest
from approval_requests.representation import request_json
from approval_requests.request_decisions import cancel_approval_request as cancel_request
from approval_requests.request_decisions import decide_approval_request as decide_request
from approval_requests.selectors import STATUSES, readable_request, visible_requests, with_pauses
from approvals.selectors import clamp_limit
from common.errors import BadRequest
from common.throttles import WRITES, count_request
from mcp_surface.answers import require_mutations_enabled
from mcp_surface.conversation_tools import required_id
from mcp_surface.identity import mcp_actor

LIST_DEFAULT = 100  # as REST's GET /approval-requests


def _status(value: Any) -> str | None:
    """A status filter, case-insensitive; None (or blank) lists every status."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    status = value.strip().upper() if isinstance(value, str) else None
    if status not in STATUSES:
        raise BadRequest(
            f"status must be one of {', '.join(STATUSES)}",
            errors=[{"field": "status", "message": f"must be one of {', '.join(STATUSES)}"}],
        )
    return status


def list_approval_requests(user: Any, *, status: Any = None, limit: Any = None) -> dict[str, Any]:
    """REST's list: a reviewer's every request, a person's those made for them, newest first."""
    found = with_pauses(
        list(visible_requests(user, status=_status(status))[: clamp_limit(limit, LIST_DEFAULT)])
    )
    return {"approvalRequests": [request_json(request, viewer=user) for request in found]}


def get_approval_request(user: Any, *, request_id: Any) -> dict[str, Any]:
    return request_json(readable_request(user, required_id(request_id, "requestId")), viewer=user)


def _decision_body(
    verdict: Any, note: Any, guidance: Any, amended_arguments: Any, amended_request: Any
) -> dict[str, Any]:
    """REST's decision body from the tool's arguments (an argument not given is a field not sent)."""
    body: dict[str, Any] = {"verdict": verdict}
    optional = {
        "note": note,
        "guidance": guidance,
        "amendedArguments": amended_arguments,
        "amendedRequest": amended_request,
    }
    body.update({name: value for name, value in optional.items() if value is not None})
    return body


def decide_approval_request(
    user: Any,
    *,
    request_id: Any,
    verdict: Any,
    note: Any = None,
    guidance: Any = None,
    amended_arguments: Any = None,
    amended_request: Any = None,
) -> dict[str, Any]:
    """REST's decision (reviewers only), recorded as ``mcp:<username>``; answers the request as decided."""
    require_mutations_enabled()
    count_request(user=user, scope=WRITES)
    decided: ApprovalRequest = decide_request(
        user=user,
        request_id=required_id(request_id, "requestId"),
        body=_decision_body(verdict, note, guidance, amended_arguments, amended_request),
        actor=mcp_actor(user),
    )
    return request_json(decided, viewer=user)


def cancel_approval_request(user: Any, *, request_id: Any) -> dict[str, Any]:
    """REST's cancel (the person it was made for, a reviewer): a pending request, or an approved one
    nobody claimed yet, ends CANCELLED."""
    require_mutations_enabled()
    count_request(user=user, scope=WRITES)
    cancelled = cancel_request(
        user=user, request_id=required_id(request_id, "requestId"), actor=mcp_actor(user)
    )
    return request_json(cancelled, viewer=user)
