"""Claiming an approval and reporting what happened: at most one execution, of exactly what was approved.

The first claim of an APPROVED request wins a compare-and-set on ``claimed_at`` and receives the grant,
once. Every later claim is refused, and says what the agent can know: ``ALREADY_CLAIMED`` with the
outcome the first claimant reported, or ``OUTCOME_UNKNOWN`` when it reported none (it may have executed
and crashed): never a second grant. A pinned request is claimed with the request about to be sent; one
that differs in any byte from the approved one (a reviewer's edit included) is refused with
``REQUEST_CHANGED`` and audited, and grants nothing. After ``grant_expires_at`` a claim is refused
(``GRANT_EXPIRED``).
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.utils import timezone
from rest_framework import serializers

from approval_requests import grants, pinning
from approval_requests.body_fields import PinnedRequestField
from approval_requests.errors import AlreadyClaimed, GrantExpired, OutcomeUnknown, RequestChanged
from approval_requests.models import ApprovalRequest, OutcomeStatus, RequestStatus
from approval_requests.selectors import own_request
from approvals.audit import append_audit_entry
from approvals.models import SubjectType
from common.body_rules import body_errors
from common.errors import BadRequest, Conflict, WrongState
from common.request_bodies import BodySerializer, TextField, validated_body

SUMMARY_MAX = 1000


class ClaimBodySerializer(BodySerializer):
    request = PinnedRequestField(
        required=False,
        allow_null=True,
        default=None,
        help_text="A pinned request: the request about to be sent, secret headers with their values",
    )


class OutcomeBodySerializer(BodySerializer):
    status = serializers.ChoiceField(choices=OutcomeStatus.values, help_text="succeeded or failed")
    httpStatus = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=100, max_value=599
    )
    summary = TextField(required=False, allow_blank=True, default="", max_length=SUMMARY_MAX)

    def validate_summary(self, summary: str) -> str:
        if errors := body_errors(summary):
            raise serializers.ValidationError([e["message"] for e in errors])
        return summary


def reported_outcome(request: ApprovalRequest) -> dict[str, Any] | None:
    if not request.outcome_status:
        return None
    return {
        "status": request.outcome_status,
        "httpStatus": request.outcome_http_status,
        "summary": request.outcome_summary,
        "reportedAt": request.outcome_at,
    }


def _audit(request: ApprovalRequest, verb: str, actor: str, detail: dict[str, Any]) -> None:
    append_audit_entry(
        subject_type=SubjectType.APPROVAL_REQUEST,
        subject_id=request.pk,
        verb=verb,
        actor=actor,
        automated=False,
        pause_id=request.pause_id,
        detail={"action": request.action_name, **detail},
    )


def claim_approval(*, user: Any, request_id: Any, body: Any) -> dict[str, Any]:
    """The grant of the approved request, to its service account, once (see the module)."""
    data = validated_body(ClaimBodySerializer, body)
    request = own_request(user, request_id)
    claimed = data["request"]
    if request.request_preview is None and claimed is not None:
        raise BadRequest(
            "request: this approval request pinned no HTTP request",
            errors=[{"field": "request", "message": "this approval request pinned no HTTP request"}],
        )
    if claimed is not None and (errors := pinning.request_errors(claimed, "request")):
        raise BadRequest(
            "; ".join(f"{e.field}: {e.message}" for e in errors), errors=[e.as_dict() for e in errors]
        )
    with transaction.atomic():
        request = ApprovalRequest.objects.select_for_update().get(pk=request.pk)
        _refuse_unclaimable(request)
        if request.request_preview is not None:
            if claimed is None:
                raise BadRequest(
                    "request: a pinned approval is claimed with the request about to be sent",
                    errors=[{"field": "request", "message": "required: this approval request is pinned"}],
                )
            fingerprint = pinning.claimed_fingerprint(pinning.parsed(claimed), request.approved_request)
            if not pinning.same_fingerprint(request.approved_fingerprint, fingerprint):
                changed = request
            else:
                changed = None
        else:
            changed = None
        if changed is None:
            now = timezone.now()
            request.claim_id = uuid.uuid4()
            request.claimed_at = now
            request.save(update_fields=["claim_id", "claimed_at"])
            _audit(request, "hitl.request.claimed", user.get_username(), {"claimId": str(request.claim_id)})
            return grant(request, token=True)
    # the refusal is audited in a transaction of its own: the claim's rolled back with nothing written
    with transaction.atomic():
        _audit(changed, "hitl.request.request_changed", user.get_username(), {"pinned": True})
    raise RequestChanged(
        "The request claimed differs from the one approved: nothing was granted. Send exactly the approved "
        "request (GET the approval request for it), or file a new approval request."
    )


def _refuse_unclaimable(request: ApprovalRequest) -> None:
    if request.claimed_at is not None:
        outcome = reported_outcome(request)
        if outcome is None:
            raise OutcomeUnknown(
                "This approval was claimed before and no outcome was reported: it may have been executed. "
                "Never a second grant: find out what happened before acting again.",
                claimedAt=request.claimed_at.isoformat(),
            )
        raise AlreadyClaimed(
            "This approval was claimed and executed before: never a second grant.",
            claimedAt=request.claimed_at.isoformat(),
            outcome={**outcome, "reportedAt": outcome["reportedAt"].isoformat()},
        )
    if request.status != RequestStatus.APPROVED:
        raise WrongState(
            f"Approval request is not approved (current state: {request.status}): there is nothing to claim.",
            current_state=request.status,
        )
    if request.grant_expires_at is not None and timezone.now() >= request.grant_expires_at:
        raise GrantExpired(
            "The approval was not claimed before its grant expired: file a new approval request.",
            expiredAt=request.grant_expires_at.isoformat(),
        )


def grant(request: ApprovalRequest, *, token: bool = False) -> dict[str, Any]:
    """What an approval grants; ``token``: with the signed grant token (the claim's answer only)."""
    body: dict[str, Any] = {
        "arguments": request.approved_arguments,
        "request": request.approved_request,
        "expiresAt": request.grant_expires_at.isoformat().replace("+00:00", "Z")
        if request.grant_expires_at
        else None,
        "claimed": request.claimed_at is not None,
    }
    if token and request.claim_id is not None:
        body["claimId"] = str(request.claim_id)
        body["token"] = grants.grant_token(
            request_id=str(request.id),
            claim_id=str(request.claim_id),
            action=request.action_name,
            arguments=request.approved_arguments,
            request=request.approved_request,
            issued_at=request.claimed_at,
            expires_at=request.grant_expires_at,
        )
    return body


def report_outcome(*, user: Any, request_id: Any, body: Any) -> ApprovalRequest:
    """Record what the claimed execution did. The same report again is answered as before (a retry);
    another one is a 409: the first report stands."""
    data = validated_body(OutcomeBodySerializer, body)
    request = own_request(user, request_id)
    with transaction.atomic():
        request = (
            ApprovalRequest.objects.select_for_update(of=("self",))
            .select_related("account", "on_behalf_of")
            .get(pk=request.pk)
        )
        if request.claimed_at is None:
            raise WrongState(
                f"Approval request was not claimed (current state: {request.status}): claim it before executing.",
                current_state=request.status,
            )
        reported = (data["status"], data["httpStatus"], data["summary"])
        if request.outcome_status:
            if (request.outcome_status, request.outcome_http_status, request.outcome_summary) == reported:
                return request
            raise Conflict("An outcome was reported before and stands; it differs from this one.")
        request.outcome_status, request.outcome_http_status, request.outcome_summary = reported
        request.outcome_at = timezone.now()
        request.save(update_fields=["outcome_status", "outcome_http_status", "outcome_summary", "outcome_at"])
        _audit(
            request,
            "hitl.request.outcome",
            user.get_username(),
            {"status": data["status"], "httpStatus": data["httpStatus"]},
        )
    return request
