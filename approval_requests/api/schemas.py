"""The OpenAPI shapes of an approval request's answers (what ``approval_requests.representation`` returns)."""

from __future__ import annotations

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

from approval_requests.models import OutcomeStatus, RequestStatus

_ANY = serializers.JSONField


def _object(name: str, fields: dict, **kwargs) -> serializers.Serializer:
    """An inline serializer of a copy of ``fields`` (DRF's metaclass pops the fields out of the dict it is
    given: a dict shared by two shapes would leave the second without them)."""
    return inline_serializer(name, dict(fields), **kwargs)


PINNED_REQUEST = _object(
    "PinnedRequestPreview",
    {
        "method": serializers.CharField(),
        "url": serializers.CharField(),
        "headers": serializers.DictField(
            child=serializers.CharField(), help_text="secret ones hidden by name"
        ),
        "body": serializers.CharField(allow_null=True),
        "secretHeaders": serializers.ListField(child=serializers.CharField()),
    },
    allow_null=True,
)
DECISION = _object(
    "ApprovalRequestDecisionMade",
    {
        "verdict": serializers.ChoiceField(
            ["APPROVED", "REJECTED", "CANCELLED"],
            help_text="CANCELLED: withdrawn while pending, or an ABORT timeout",
        ),
        "note": serializers.CharField(allow_blank=True),
        "decidedBy": serializers.CharField(),
        "automated": serializers.BooleanField(),
        "decidedAt": serializers.DateTimeField(),
        "amendedArguments": serializers.DictField(required=False),
        "amendedRequest": serializers.DictField(required=False),
        "guidance": serializers.CharField(
            required=False, help_text="the reviewer's instruction (a rejection)"
        ),
    },
    allow_null=True,
)
GRANT_FIELDS = {
    "arguments": serializers.DictField(help_text="as approved (edited or not)"),
    "request": _object(
        "GrantedRequest",
        {
            "method": serializers.CharField(),
            "url": serializers.CharField(),
            "headers": serializers.DictField(child=serializers.CharField()),
            "body": serializers.CharField(allow_null=True),
            "secretHeaders": serializers.ListField(child=serializers.CharField()),
        },
        allow_null=True,
    ),
    "expiresAt": serializers.DateTimeField(allow_null=True),
    "claimed": serializers.BooleanField(),
}
OUTCOME = _object(
    "ApprovalRequestOutcome",
    {
        "status": serializers.ChoiceField(OutcomeStatus.values),
        "httpStatus": serializers.IntegerField(allow_null=True),
        "summary": serializers.CharField(allow_blank=True),
        "reportedAt": serializers.DateTimeField(),
    },
    allow_null=True,
)
APPROVAL_REQUEST = _object(
    "ApprovalRequest",
    {
        "id": serializers.UUIDField(),
        "status": serializers.ChoiceField(RequestStatus.values),
        "deadline": serializers.DateTimeField(
            allow_null=True, help_text="null when waiting indefinitely or decided"
        ),
        "requestPinned": serializers.BooleanField(),
        "requestPreview": PINNED_REQUEST,
        "agent": serializers.CharField(),
        "account": serializers.CharField(help_text="the service account that filed it"),
        "idempotencyKey": serializers.CharField(),
        "action": _object(
            "ApprovalRequestAction", {"name": serializers.CharField(), "arguments": serializers.DictField()}
        ),
        "reason": serializers.CharField(),
        "onBehalfOf": serializers.CharField(allow_null=True),
        "context": _ANY(allow_null=True),
        "hitlConfig": serializers.DictField(),
        "callbackUrl": serializers.CharField(allow_null=True),
        "createdAt": serializers.DateTimeField(),
        "timeoutPolicy": serializers.CharField(allow_null=True),
        "decidedAt": serializers.DateTimeField(allow_null=True),
        "decision": DECISION,
        "grant": _object("ApprovalRequestGrant", GRANT_FIELDS, allow_null=True),
        "claim": _object(
            "ApprovalRequestClaim",
            {"claimedAt": serializers.DateTimeField(), "outcome": OUTCOME},
            allow_null=True,
        ),
    },
)
APPROVAL_REQUEST_LIST = _object(
    "ApprovalRequestList", {"approvalRequests": serializers.ListField(child=APPROVAL_REQUEST)}
)
CLAIMED = _object(
    "ApprovalRequestClaimed",
    {
        "id": serializers.UUIDField(),
        "grant": _object(
            "ApprovalRequestGrantToken",
            {
                **GRANT_FIELDS,
                "claimId": serializers.UUIDField(help_text="the grant's single-use id (the token's jti)"),
                "token": serializers.CharField(help_text="an Ed25519-signed JWT (docs/approval-requests.md)"),
            },
        ),
    },
)
SIGNING_SECRET = _object(
    "WebhookSigningSecret", {"secret": serializers.CharField(help_text="whsec_…, shown once")}
)
GRANT_KEYS = _object(
    "GrantKeySet",
    {
        "keys": _object(
            "GrantKey",
            {
                "kty": serializers.CharField(),
                "crv": serializers.CharField(),
                "x": serializers.CharField(),
                "kid": serializers.CharField(),
                "alg": serializers.CharField(),
                "use": serializers.CharField(),
            },
            many=True,
        )
    },
)
