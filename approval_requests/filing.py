"""Filing an approval request: a service account asks for one action, once per idempotency key.

The body is checked first (400, nothing written). The same key with the same body answers the request
already filed (200); with another body it is refused (409 ``IDEMPOTENCY_CONFLICT``). A new request and
its pause are written in one transaction with the core's ``open_pause``, so the deadline, the timer, the
inbox and the ledger are the core's.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework import serializers

from approval_requests import pinning
from approval_requests.body_fields import PinnedRequestField, RequestConfigField
from approval_requests.errors import IdempotencyConflict
from approval_requests.models import ApprovalRequest
from approval_requests.review import request_line
from approvals.access import is_service_account
from approvals.hitl_config import allow_self_approval_errors, timeout_errors
from approvals.models import Engine, PauseKind, SubjectType
from approvals.pauses import open_pause
from approvals.routing import ROUTING_KEYS, routing_errors
from approvals.self_approval import effective_allow_self_approval
from common.body_rules import body_errors, context_size_problem
from common.errors import BadRequest, Forbidden
from common.field_errors import FieldError
from common.request_bodies import BodySerializer, TextField, validated_body
from toolgate.gate import pinning_key

NAME_MAX = 200
REASON_MAX = 500
REQUEST_CONFIG_KEYS = (
    "approvalTimeout",
    "timeoutPolicy",
    "allowSelfApproval",
    "allowEdit",
    "allowRespond",
    *ROUTING_KEYS,
)
ONLY_AGENTS = "Access denied: only a service account (role agent) files approval requests"


def request_config_errors(config: Any, field: str = "hitlConfig") -> list[FieldError]:
    """A request's ``hitlConfig``, checked like an agent's: known keys, a finite policy with its duration,
    booleans that are booleans."""
    if config is None:
        return []
    if not isinstance(config, dict):
        return [FieldError(field, f"{field} must be an object")]
    errors = [
        FieldError(
            f"{field}.{key}",
            f"{field}.{key} is not a field of a request's hitlConfig "
            f"(allowed: {', '.join(REQUEST_CONFIG_KEYS)})",
        )
        for key in config
        if key not in REQUEST_CONFIG_KEYS
    ]
    errors += timeout_errors(config, field)
    errors += allow_self_approval_errors(config.get("allowSelfApproval"), field)
    errors += routing_errors(config, field)
    for flag in ("allowEdit", "allowRespond"):
        value = config.get(flag)
        if value is not None and not isinstance(value, bool):
            errors.append(FieldError(f"{field}.{flag}", f"{field}.{flag} must be true or false"))
    return errors


def _refused(errors: list[FieldError], prefix: str) -> serializers.ValidationError:
    """Field errors whose paths start with ``prefix`` as the field's own validation error."""
    detail: dict[str, list[str]] = {}
    for error in errors:
        key = error.field[len(prefix) + 1 :] if error.field.startswith(prefix + ".") else ""
        detail.setdefault(key or serializers.api_settings.NON_FIELD_ERRORS_KEY, []).append(error.message)
    return serializers.ValidationError(detail)


class ActionSerializer(BodySerializer):
    name = TextField(min_length=1, max_length=NAME_MAX, help_text="The tool or action the agent will run")
    arguments = serializers.DictField(
        required=False, default=dict, help_text="Its arguments (a JSON object), shown to the reviewer in full"
    )

    def validate_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        if errors := body_errors(arguments):
            raise serializers.ValidationError(
                [f"{e['field']}: {e['message']}" if e["field"] else e["message"] for e in errors]
            )
        return arguments


class FilingBodySerializer(BodySerializer):
    """``POST /approval-requests``: what an agent asks to do, and (optionally) the exact request it will send."""

    idempotencyKey = TextField(
        min_length=1,
        max_length=NAME_MAX,
        help_text="The same key with the same body answers the same request",
    )
    agent = TextField(min_length=1, max_length=NAME_MAX, help_text="The agent's name, shown to reviewers")
    action = ActionSerializer()
    reason = TextField(min_length=1, max_length=REASON_MAX, help_text="Why it asks, shown to reviewers")
    request = PinnedRequestField(
        required=False,
        allow_null=True,
        default=None,
        help_text='The exact HTTP request if approved: {"method", "url", "headers", "body" (text), '
        '"secretHeaders": [names hidden from everyone]}; present: pinned',
    )
    onBehalfOf = TextField(
        required=False,
        allow_null=True,
        default=None,
        max_length=150,
        help_text="The username of the person whose run this is",
    )
    context = serializers.JSONField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Shown to reviewers (e.g. the run's last messages); bounded",
    )
    hitlConfig = RequestConfigField(
        required=False,
        allow_null=True,
        default=None,
        help_text=f"{', '.join(REQUEST_CONFIG_KEYS)}",
    )
    callbackUrl = TextField(
        required=False,
        allow_null=True,
        default=None,
        max_length=pinning.URL_MAX,
        help_text="Where the signed webhooks of this request go (http or https)",
    )

    def validate_idempotencyKey(self, key: str) -> str:
        if not key.strip():
            raise serializers.ValidationError("must not be blank")
        return key

    def validate_agent(self, agent: str) -> str:
        if not agent.strip():
            raise serializers.ValidationError("must not be blank")
        return agent

    def validate_reason(self, reason: str) -> str:
        if not reason.strip():
            raise serializers.ValidationError("must not be blank: it is what the reviewer reads first")
        return reason

    def validate_request(self, request: Any) -> Any:
        if request is not None and (errors := pinning.request_errors(request, "request")):
            raise _refused(errors, "request")
        return request

    def validate_context(self, context: Any) -> Any:
        if context is None:
            return None
        if errors := body_errors(context):
            raise serializers.ValidationError([e["message"] for e in errors])
        if problem := context_size_problem(context):
            raise serializers.ValidationError(problem)
        return context

    def validate_hitlConfig(self, config: Any) -> Any:
        if errors := request_config_errors(config):
            raise _refused(errors, "hitlConfig")
        return config or {}

    def validate_callbackUrl(self, url: str | None) -> str | None:
        if url is None:
            return None
        if errors := pinning.request_errors({"method": "POST", "url": url}, "callback"):
            raise serializers.ValidationError([e.message for e in errors])
        return url


@dataclass(frozen=True)
class Filed:
    request: ApprovalRequest
    created: bool


def filing_digest(body: Any) -> str:
    """A keyed digest of the body as sent (canonical JSON), to tell a retry from a reuse of its key."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hmac.new(pinning_key(), b"filing\n" + canonical.encode("utf-8"), hashlib.sha256).hexdigest()


def file_approval_request(*, user: Any, body: Any) -> Filed:
    """File the request in ``body`` for the service account ``user`` (see the module)."""
    if not is_service_account(user):
        raise Forbidden(ONLY_AGENTS)
    data = validated_body(FilingBodySerializer, body)
    digest = filing_digest(body)
    existing = _filed(user, data["idempotencyKey"], digest)
    if existing is not None:
        return Filed(existing, created=False)
    on_behalf_of = _person(data["onBehalfOf"])
    try:
        with transaction.atomic():
            return Filed(_file(user, data, digest, on_behalf_of), created=True)
    except IntegrityError:
        existing = _filed(user, data["idempotencyKey"], digest)  # a concurrent retry filed it first
        if existing is None:
            raise
        return Filed(existing, created=False)


def _filed(user: Any, key: str, digest: str) -> ApprovalRequest | None:
    existing = ApprovalRequest.objects.filter(account=user, idempotency_key=key).first()
    if existing is not None and not hmac.compare_digest(existing.filing_digest, digest):
        raise IdempotencyConflict(
            "This idempotencyKey was used before with a different body: use a new key for a new request",
            approvalRequestId=str(existing.id),
        )
    return existing


def _person(username: str | None) -> Any:
    if username is None:
        return None
    person = get_user_model().objects.filter(username=username, is_active=True).first()
    if person is None:
        raise BadRequest(
            f"onBehalfOf: no active user '{username[:60]}'",
            errors=[{"field": "onBehalfOf", "message": "no active user with this username"}],
        )
    return person


def _file(user: Any, data: dict[str, Any], digest: str, on_behalf_of: Any) -> ApprovalRequest:
    config = data["hitlConfig"]
    pinned = pinning.parsed(data["request"]) if data["request"] is not None else None
    digests = pinning.secret_digests(pinned) if pinned else {}
    request = ApprovalRequest(
        account=user,
        idempotency_key=data["idempotencyKey"],
        filing_digest=digest,
        agent=data["agent"],
        action_name=data["action"]["name"],
        arguments=data["action"]["arguments"],
        reason=data["reason"],
        context=data["context"],
        on_behalf_of=on_behalf_of,
        hitl_config=config,
        callback_url=data["callbackUrl"] or "",
        request_preview=pinning.preview(pinned) if pinned else None,
        request_fingerprint=pinning.fingerprint(pinned, digests) if pinned else "",
        secret_digests=digests,
        created_at=timezone.now(),
    )
    request.save(force_insert=True)
    pause = open_pause(
        surface=Engine.REQUEST,
        kind=PauseKind.ACTION,
        subject_type=SubjectType.APPROVAL_REQUEST,
        subject_id=request.id,
        owner_id=None,
        raised_by_id=on_behalf_of.pk if on_behalf_of else None,
        reason=data["reason"],
        hitl_config=config,
        bookmark={},
        details={
            "agent": data["agent"],
            "account": user.get_username(),
            **({"requestLine": request_line(pinned)} if pinned else {}),
        },
        tool_names=[data["action"]["name"]],
        allow_self_approval=effective_allow_self_approval(config),
    )
    request.pause_id = pause.id
    ApprovalRequest.objects.filter(pk=request.pk).update(pause_id=pause.id)
    request.pause = pause  # type: ignore[attr-defined]  # the representation reads it without a query
    return request
