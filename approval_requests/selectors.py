"""Reading approval requests, each read behind its access rule.

- A service account (role ``agent``) reads, claims and reports on its own requests only.
- A reviewer (admin, approver) reads and decides every request.
- A person named ``onBehalfOf`` reads and cancels the requests made for them, and never decides them.

No existence oracle: whoever may not read a request gets the same 403 for it as for an id that does
not exist; reviewers get 404 for an unknown id.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import CharField, Exists, OuterRef, Q, QuerySet
from django.db.models.expressions import RawSQL

from approval_requests.models import ApprovalRequest, RequestStatus
from approvals.access import is_admin, is_owner, is_service_account, no_access, sees_every_pause
from approvals.models import Pause, PauseRoute
from approvals.routing import routes_opened_to
from common.errors import Forbidden, NotFound

WHAT = "approval request"
NOT_A_REVIEWER = "Access denied: only approvers and admins decide approval requests"
NOT_THE_AGENT = (
    "Access denied: only the service account that filed an approval request claims it and reports on it"
)


def _by_id(request_id: Any) -> ApprovalRequest | None:
    """The request, or None for an id that does not exist or is no UUID at all (an MCP argument, a Slack
    button value): both are the same unknown id to the access rule."""
    try:
        key = uuid.UUID(str(request_id))
    except ValueError:
        return None
    return ApprovalRequest.objects.select_related("account", "on_behalf_of").filter(pk=key).first()


def readable_request(user: Any, request_id: Any) -> ApprovalRequest:
    """The request ``user`` may read (see the module), or 403/404."""
    request = _by_id(request_id)
    if sees_every_pause(user):
        if request is None:
            raise NotFound(f"{WHAT.capitalize()} not found.")
        return request
    if request is None or not (_is_filer(user, request) or _is_person(user, request)):
        raise no_access(WHAT)
    return request


def decidable_request(user: Any, request_id: Any) -> ApprovalRequest:
    """The request ``user`` may decide: reviewers only. Anyone who may read it otherwise gets a 403 that
    says why; anyone else the no-existence-oracle 403."""
    request = readable_request(user, request_id)
    if not sees_every_pause(user):
        raise Forbidden(NOT_A_REVIEWER)
    return request


def cancellable_request(user: Any, request_id: Any) -> ApprovalRequest:
    """The request ``user`` may cancel: its filer, its person, a reviewer."""
    return readable_request(user, request_id)


def own_request(user: Any, request_id: Any) -> ApprovalRequest:
    """The request the service account ``user`` filed (claims and outcomes); anyone else 403/404."""
    request = readable_request(user, request_id)
    if not _is_filer(user, request):
        raise Forbidden(NOT_THE_AGENT)
    return request


def _is_filer(user: Any, request: ApprovalRequest) -> bool:
    return is_service_account(user) and is_owner(user, request.account_id)


def _is_person(user: Any, request: ApprovalRequest) -> bool:
    return not is_service_account(user) and is_owner(user, request.on_behalf_of_id)


def visible_requests(
    user: Any, *, status: str | None = None, idempotency_key: str | None = None
) -> QuerySet[ApprovalRequest]:
    """The requests ``user`` may read, newest first: a service account's own, a person's made for them,
    a reviewer's every one (pending ones: those routing lets them decide now); of ``status`` only when given (one of ``STATUSES``), and only the one filed
    with ``idempotency_key`` when given (a service account's own: one at most)."""
    requests = ApprovalRequest.objects.select_related("account", "on_behalf_of")
    if is_service_account(user):
        requests = requests.filter(account=user)
    elif not sees_every_pause(user):
        requests = requests.filter(Q(on_behalf_of=user))
    if status is not None:
        requests = requests.filter(status=status_in_sql(status))
    if status == RequestStatus.PENDING and sees_every_pause(user) and not is_admin(user):
        # an approver's pending list is what they may decide now (approvals.routing): a request whose
        # pause is not routed (no step-0 route), or one of whose routes names them and is open; probed
        # per listed row through the routes' index, so the list keeps its own index's order
        requests = requests.filter(
            ~Exists(PauseRoute.objects.filter(pause_id=OuterRef("pause_id"), step=0))
            | Exists(routes_opened_to(user).filter(pause_id=OuterRef("pause_id")))
        )
    if idempotency_key is not None:
        requests = requests.filter(idempotency_key=idempotency_key)
    return requests.order_by("-created_at", "-id")


def status_in_sql(status: str) -> RawSQL:
    """``status`` written into the SQL text rather than bound as a parameter, so that every plan of a
    list, a prepared statement's generic one included, knows it. Bound, the generic plan (psycopg prepares
    a statement a connection runs twice, PostgreSQL plans it generically from its sixth run) cannot use
    the partial index of pending requests: the reviewer's pending inbox walked the newest requests of
    every status instead, through 100,000 newer decided ones in 54 ms rather than 0.2 ms
    (bench/approval_requests.py --decided). Only a value of ``RequestStatus`` reaches the SQL."""
    value = RequestStatus(status).value  # ValueError for anything else: never the caller's text
    return RawSQL(f"'{value}'", (), output_field=CharField())  # nosec B611  # an enum constant, no input


def with_pauses(requests: list[ApprovalRequest]) -> list[ApprovalRequest]:
    """``requests`` each with its pause (``request.pause``), read in one query for all of them."""
    pauses = Pause.objects.in_bulk([request.pause_id for request in requests if request.pause_id])
    for request in requests:
        request.pause = pauses.get(request.pause_id)  # type: ignore[attr-defined]
    return requests


STATUSES = tuple(RequestStatus.values)
