"""The decision body of an approval request and its checks against the request (the ACTION kind).

The body is the core's decision body (``verdict``, ``note``, ``guidance``) plus a reviewer's edit:
``amendedArguments`` (the arguments to run instead) and, for a pinned request, ``amendedRequest`` (the
parts of the request to change: method, url, visible headers, body). An edit approves; a request whose
``hitlConfig`` says ``allowEdit: false`` takes none, one that says ``allowRespond: false`` takes no reply
with guidance. Every refusal is a 400 naming the field, before anything is touched.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from approval_requests import pinning
from approval_requests.body_fields import RequestAmendmentField
from approval_requests.models import ApprovalRequest
from approvals.decision_input import DecisionBodySerializer, DecisionInput
from approvals.models import Pause, Verdict
from common.body_rules import body_errors
from common.errors import BadRequest
from common.request_bodies import validated_body


@extend_schema_serializer(component_name="ApprovalRequestDecision")
class RequestDecisionBodySerializer(DecisionBodySerializer):
    amendedArguments = serializers.DictField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Approve with these arguments instead (a JSON object); needs verdict APPROVED",
    )
    amendedRequest = RequestAmendmentField(
        required=False,
        allow_null=True,
        default=None,
        help_text="A pinned request only: the parts to change ({method, url, headers, body}); secret headers "
        "stay as the agent sent them. Needs verdict APPROVED",
    )

    def validate_amendedArguments(self, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and (errors := body_errors(value)):
            raise serializers.ValidationError([e["message"] for e in errors])
        return value

    def validate_amendedRequest(self, value: Any) -> Any:
        if value is not None and (errors := body_errors(value)):
            raise serializers.ValidationError([e["message"] for e in errors])
        return value


def parse_request_decision(data: Any) -> DecisionInput:
    """The decision in ``data`` or a 400 naming each bad field (nothing is touched before this)."""
    body = validated_body(RequestDecisionBodySerializer, data)
    amendments = {
        name: body[name] for name in ("amendedArguments", "amendedRequest") if body.get(name) is not None
    }
    return DecisionInput(
        verdict=body["verdict"],
        note=body["note"],
        tool_decisions=body["toolDecisions"],
        guidance=body["guidance"],
        amendments=amendments,
    )


def validate_action_decision(pause: Pause, decision: DecisionInput) -> dict[str, Any]:
    """The ACTION kind's check of a decision (registered with the core); returns its audit detail."""
    request = ApprovalRequest.objects.filter(pk=pause.subject_id).first()
    if request is None:
        raise BadRequest("The approval request of this pause no longer exists")
    config = request.hitl_config or {}
    errors: list[dict[str, str]] = []
    if decision.amendments:
        if decision.verdict != Verdict.APPROVED:
            errors += [
                {"field": name, "message": "an edit approves: needs verdict APPROVED"}
                for name in decision.amendments
            ]
        if config.get("allowEdit") is False:
            errors += [
                {"field": name, "message": "this request does not allow edits (hitlConfig.allowEdit)"}
                for name in decision.amendments
            ]
    if decision.guidance and config.get("allowRespond") is False:
        errors.append(
            {"field": "guidance", "message": "this request does not allow a reply (hitlConfig.allowRespond)"}
        )
    if "amendedRequest" in decision.amendments:
        if request.request_preview is None:
            errors.append({"field": "amendedRequest", "message": "this request pinned no HTTP request"})
        else:
            errors += [
                e.as_dict()
                for e in pinning.amendment_errors(
                    request.request_preview, decision.amendments["amendedRequest"], "amendedRequest"
                )
            ]
    if errors:
        raise BadRequest("; ".join(f"{e['field']}: {e['message']}" for e in errors), errors=errors)
    return {
        "approvalRequestId": str(request.id),
        "action": request.action_name,
        **({"amended": sorted(decision.amendments)} if decision.amendments else {}),
    }
