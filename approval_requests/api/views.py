"""REST adapters of approval requests (docs/approval-requests.md): each validates, reads through a
selector behind its access rule and writes through a service."""

from __future__ import annotations

import time
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.status import HTTP_200_OK, HTTP_202_ACCEPTED
from rest_framework.views import APIView

from approval_requests import grants, webhooks
from approval_requests.api.permissions import SignedInOrServiceAccount
from approval_requests.api.schemas import (
    APPROVAL_REQUEST,
    APPROVAL_REQUEST_LIST,
    CLAIMED,
    GRANT_KEYS,
    SIGNING_SECRET,
)
from approval_requests.claims import (
    ClaimBodySerializer,
    OutcomeBodySerializer,
    claim_approval,
    report_outcome,
)
from approval_requests.decision_rules import RequestDecisionBodySerializer
from approval_requests.filing import NAME_MAX, FilingBodySerializer, file_approval_request
from approval_requests.models import ApprovalRequest, RequestStatus
from approval_requests.representation import creation_json, request_json
from approval_requests.request_decisions import cancel_approval_request, decide_approval_request
from approval_requests.selectors import STATUSES, readable_request, visible_requests, with_pauses
from approvals.access import is_service_account
from common.errors import Forbidden
from common.query_params import QueryParams
from common.request_bodies import json_body
from common.throttles import WriteRateThrottle

WAIT_MAX = 60.0
POLL_SECONDS = 0.05  # one status read by primary key: an agent learns of a decision within 50 ms
LIMIT_DEFAULT, LIMIT_MAX = 100, 1000
ID = OpenApiParameter("request_id", OpenApiTypes.UUID, OpenApiParameter.PATH)
PROBLEM = OpenApiResponse(description="Problem details")


def _wait(request_id: Any, seconds: float) -> None:
    """Until the request leaves PENDING or ``seconds`` passed (the worker or thread waits with it)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status = ApprovalRequest.objects.filter(pk=request_id).values_list("status", flat=True).first()
        if status != RequestStatus.PENDING:
            return
        time.sleep(POLL_SECONDS)


def wait_seconds(params: QueryParams) -> float:
    raw = params.single("wait")
    if raw is None:
        return 0.0
    try:
        return max(0.0, min(WAIT_MAX, float(raw)))
    except ValueError:
        params.refuse("wait", "must be a number of seconds (0 to 60)")
        return 0.0


class ApprovalRequestListView(APIView):
    permission_classes = [SignedInOrServiceAccount]

    def get_throttles(self) -> list[Any]:
        return [WriteRateThrottle()] if self.request.method == "POST" else []

    @extend_schema(
        summary="File an approval request (service accounts, role agent)",
        request=FilingBodySerializer,
        responses={
            201: APPROVAL_REQUEST,
            200: APPROVAL_REQUEST,
            400: PROBLEM,
            403: PROBLEM,
            409: PROBLEM,
        },
        description="201 with the new request; 200 with the request this idempotencyKey filed before (same "
        "body); 409 IDEMPOTENCY_CONFLICT when the key was used with another body.",
    )
    def post(self, request: Request) -> Response:
        filed = file_approval_request(user=request.user, body=json_body(request, required=True))
        return Response(
            creation_json(filed.request, viewer=request.user), status=201 if filed.created else 200
        )

    @extend_schema(
        operation_id="approval_requests_list",
        summary="List approval requests: a service account's own, a person's made for them, a reviewer's all",
        parameters=[
            OpenApiParameter("status", OpenApiTypes.STR, enum=list(STATUSES)),
            OpenApiParameter("limit", OpenApiTypes.INT, description="1..1000, default 100"),
            OpenApiParameter(
                "idempotencyKey",
                OpenApiTypes.STR,
                description="only the request filed with this key (a service account finds its own request)",
            ),
        ],
        responses={200: APPROVAL_REQUEST_LIST, 400: PROBLEM},
    )
    def get(self, request: Request) -> Response:
        params = QueryParams(request.query_params)
        status = params.text("status")
        if status is not None and status.upper() not in STATUSES:
            params.refuse("status", f"must be one of {', '.join(STATUSES)}")
        limit = params.integer("limit", default=LIMIT_DEFAULT, low=1, high=LIMIT_MAX)
        key = params.text("idempotencyKey")
        if key is not None and not 0 < len(key) <= NAME_MAX:
            params.refuse("idempotencyKey", f"must be 1 to {NAME_MAX} characters")
        params.raise_if_invalid()
        status = status.upper() if status else None
        found = with_pauses(list(visible_requests(request.user, status=status, idempotency_key=key)[:limit]))
        return Response({"approvalRequests": [request_json(item, viewer=request.user) for item in found]})


class ApprovalRequestView(APIView):
    permission_classes = [SignedInOrServiceAccount]

    @extend_schema(
        operation_id="approval_request_retrieve",
        summary="Read an approval request (?wait=SECONDS: long-poll until it is decided)",
        parameters=[ID, OpenApiParameter("wait", OpenApiTypes.NUMBER, description="0..60 seconds")],
        responses={200: APPROVAL_REQUEST, 400: PROBLEM, 403: PROBLEM, 404: PROBLEM},
    )
    def get(self, request: Request, request_id: str) -> Response:
        params = QueryParams(request.query_params)
        seconds = wait_seconds(params)
        params.raise_if_invalid()
        found = readable_request(request.user, request_id)
        if seconds and found.status == RequestStatus.PENDING:
            _wait(found.pk, seconds)
            found = readable_request(request.user, request_id)
        return Response(request_json(found, viewer=request.user))


class DecisionView(APIView):
    permission_classes = [SignedInOrServiceAccount]
    throttle_classes = [WriteRateThrottle]

    @extend_schema(
        summary="Decide an approval request (approvers and admins)",
        parameters=[ID],
        request=RequestDecisionBodySerializer,
        responses={200: APPROVAL_REQUEST, 400: PROBLEM, 403: PROBLEM, 404: PROBLEM, 409: PROBLEM},
    )
    def post(self, request: Request, request_id: str) -> Response:
        decided = decide_approval_request(
            user=request.user, request_id=request_id, body=json_body(request, required=True)
        )
        # still pending: one approval of several was recorded (``approvals``: the votes so far)
        code = HTTP_202_ACCEPTED if decided.status == RequestStatus.PENDING else HTTP_200_OK
        return Response(request_json(decided, viewer=request.user), status=code)


class ClaimView(APIView):
    permission_classes = [SignedInOrServiceAccount]
    throttle_classes = [WriteRateThrottle]

    @extend_schema(
        summary="Claim an approved request before executing it: the grant, once",
        parameters=[ID],
        request=ClaimBodySerializer,
        responses={200: CLAIMED, 400: PROBLEM, 403: PROBLEM, 404: PROBLEM, 409: PROBLEM},
        description="409 ALREADY_CLAIMED (with the first claim's outcome) or OUTCOME_UNKNOWN after a first "
        "claim; REQUEST_CHANGED when the pinned request differs from the approved one; GRANT_EXPIRED; "
        "WRONG_STATE when it is not approved.",
    )
    def post(self, request: Request, request_id: str) -> Response:
        granted = claim_approval(
            user=request.user, request_id=request_id, body=json_body(request, required=False)
        )
        return Response({"id": request_id, "grant": granted})


class OutcomeView(APIView):
    permission_classes = [SignedInOrServiceAccount]
    throttle_classes = [WriteRateThrottle]

    @extend_schema(
        summary="Report what the claimed execution did",
        parameters=[ID],
        request=OutcomeBodySerializer,
        responses={200: APPROVAL_REQUEST, 400: PROBLEM, 403: PROBLEM, 404: PROBLEM, 409: PROBLEM},
    )
    def post(self, request: Request, request_id: str) -> Response:
        reported = report_outcome(
            user=request.user, request_id=request_id, body=json_body(request, required=True)
        )
        return Response(request_json(reported, viewer=request.user))


class CancelView(APIView):
    permission_classes = [SignedInOrServiceAccount]
    throttle_classes = [WriteRateThrottle]

    @extend_schema(
        summary="Withdraw an approval request (its service account, its person, a reviewer)",
        parameters=[ID],
        request=None,
        responses={200: APPROVAL_REQUEST, 403: PROBLEM, 404: PROBLEM, 409: PROBLEM},
    )
    def post(self, request: Request, request_id: str) -> Response:
        cancelled = cancel_approval_request(user=request.user, request_id=request_id)
        return Response(request_json(cancelled, viewer=request.user))


class WebhookSecretView(APIView):
    permission_classes = [SignedInOrServiceAccount]
    throttle_classes = [WriteRateThrottle]

    @extend_schema(
        summary="Make (or replace) the service account's webhook signing secret: shown this once",
        request=None,
        responses={201: SIGNING_SECRET, 403: PROBLEM},
    )
    def post(self, request: Request) -> Response:
        if not is_service_account(request.user):
            raise Forbidden("Access denied: only a service account (role agent) has a webhook signing secret")
        return Response({"secret": webhooks.rotate_secret(request.user)}, status=201)


class GrantKeysView(APIView):
    permission_classes = [AllowAny]
    authentication_classes: list[Any] = []

    @extend_schema(
        summary="The public keys of execution grant tokens (a JWK set)", responses={200: GRANT_KEYS}
    )
    def get(self, request: Request) -> Response:
        return Response(grants.key_set())
