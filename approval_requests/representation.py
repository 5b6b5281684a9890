"""An approval request as the REST API, MCP and the webhooks' readers see it."""

from __future__ import annotations

from typing import Any

from approval_requests.claims import grant, reported_outcome
from approval_requests.models import ApprovalRequest, RequestStatus
from approvals.access import is_service_account, sees_every_pause
from approvals.models import Pause
from approvals.votes import tally_of
from toolgate.outbound import redact_json_value


def _iso(value: Any) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def decision_of(request: ApprovalRequest, pause: Pause | None) -> dict[str, Any] | None:
    if pause is None or not pause.verdict or request.status == RequestStatus.PENDING:
        return None
    details = pause.decision_details or {}
    decision: dict[str, Any] = {
        "verdict": pause.verdict,
        "note": pause.note,
        "decidedBy": pause.decided_by,
        "automated": pause.automated,
        "decidedAt": _iso(pause.decided_at),
    }
    if "amendedArguments" in details:
        decision["amendedArguments"] = details["amendedArguments"]
    if "amendedRequest" in details:
        decision["amendedRequest"] = details["amendedRequest"]
    if details.get("guidance"):
        decision["guidance"] = pause.note
    return decision


def request_json(request: ApprovalRequest, *, viewer: Any, pause: Pause | None = None) -> dict[str, Any]:
    """The request as ``viewer`` may see it: its service account and reviewers every byte it filed (secret
    header values were never kept); the person it was made for with credential-shaped values redacted."""
    if pause is None:
        pause = getattr(request, "pause", None) or Pause.objects.filter(pk=request.pause_id).first()
    whole = is_service_account(viewer) or sees_every_pause(viewer)
    shown = (lambda value: value) if whole else redact_json_value
    config = request.hitl_config or {}
    body: dict[str, Any] = {
        "id": str(request.id),
        "status": request.status,
        "agent": request.agent,
        "account": request.account.get_username(),
        "idempotencyKey": request.idempotency_key,
        "action": {"name": request.action_name, "arguments": shown(request.arguments)},
        "reason": request.reason,
        "onBehalfOf": request.on_behalf_of.get_username() if request.on_behalf_of_id else None,
        "context": shown(request.context),
        "hitlConfig": config,
        "callbackUrl": request.callback_url or None,
        "createdAt": _iso(request.created_at),
        "timeoutPolicy": pause.timeout_policy if pause else None,
        "deadline": _iso(pause.due_at) if pause and request.status == RequestStatus.PENDING else None,
        "requestPinned": request.request_preview is not None,
        "requestPreview": shown(request.request_preview),
        "decidedAt": _iso(request.decided_at),
        "decision": decision_of(request, pause),
        "grant": None,
        "claim": None,
    }
    if pause is not None and pause.required_approvals > 1:
        body["approvals"] = tally_of(pause).as_json()  # the votes so far (approvals.votes)
    if request.status == RequestStatus.APPROVED or request.claimed_at is not None:
        granted = grant(request)
        body["grant"] = {
            **granted,
            "arguments": shown(granted["arguments"]),
            "request": shown(granted["request"]),
        }
    if request.claimed_at is not None:
        outcome = reported_outcome(request)
        body["claim"] = {
            "claimedAt": _iso(request.claimed_at),
            "outcome": None if outcome is None else {**outcome, "reportedAt": _iso(outcome["reportedAt"])},
        }
    return body


def creation_json(request: ApprovalRequest, *, viewer: Any) -> dict[str, Any]:
    """The answer to a filing: the fields the contract names first, then the rest of the request."""
    whole = request_json(request, viewer=viewer)
    head = {key: whole[key] for key in ("id", "status", "deadline", "requestPinned", "requestPreview")}
    return {**head, **whole}
