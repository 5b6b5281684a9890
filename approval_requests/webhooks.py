"""Signed webhooks: each end of an approval request told to its ``callbackUrl``, at least once; and,
while it waits, each escalation step and its reminder (approvals.notices).

An event is a ``WebhookDelivery`` row written in the transaction that ends the request (decided,
expired, cancelled) and a django-q2 task queued with it (ORM broker: it commits or not with the row).
The work cluster sends it, signed per the Standard Webhooks specification with the service account's
secret (``standardwebhooks``: the ``webhook-id`` is the delivery's id, stable across retries, so a
receiver can drop a duplicate; ``webhook-timestamp``; ``webhook-signature``), through the egress guard
of the tool calls, without following redirects. A 2xx delivers it; anything else is retried with
backoff (``RETRY_DELAYS``, a one-shot schedule each) and, after the last, marked FAILED. A callback the
egress guard refuses is never sent and FAILED at once (the same address would be refused again). Every
attempt is recorded on the row, which operators read in the admin.

The task locks its delivery row only (never the approval request), so a receiver that claims the
approval while its webhook is being answered is not kept waiting on it; the work cluster sends every
delivery, whichever process ended the request (an ABORT timeout ends it on the timer cluster).
"""

from __future__ import annotations

import base64
import json
import logging
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django_q.models import Schedule
from django_q.tasks import async_task
from standardwebhooks import Webhook

from approval_requests.models import (
    ApprovalRequest,
    DeliveryStatus,
    RequestStatus,
    SigningSecret,
    WebhookDelivery,
)
from common import rows
from toolgate.outbound import EgressRefused, outbound_client

logger = logging.getLogger(__name__)

DECIDED = "approval_request.decided"
EXPIRED = "approval_request.expired"
CANCELLED = "approval_request.cancelled"
# while it waits (approvals.notices): an escalation step opened, the reminder before the deadline
ESCALATED = "approval_request.escalated"
REMINDED = "approval_request.reminder"
WAITING_EVENTS = {"escalated": ESCALATED, "reminder": REMINDED}
EVENT_FOR = {RequestStatus.EXPIRED: EXPIRED, RequestStatus.CANCELLED: CANCELLED}
DELIVER_TASK = "approval_requests.webhooks.deliver"
# After the first attempt fails: the waits before each retry (7 attempts in all, the last about 1 h 43 min
# after the first).
RETRY_DELAYS = (
    timedelta(seconds=5),
    timedelta(seconds=30),
    timedelta(minutes=2),
    timedelta(minutes=10),
    timedelta(minutes=30),
    timedelta(hours=1),
)
SEND_TIMEOUT = 10.0
ERROR_MAX = 500
USER_AGENT = "hitl-webhooks"
NO_SECRET = "the service account has no webhook signing secret (POST /approval-requests/webhook-secret)"  # nosec B105  # a message, not a password


def new_secret() -> str:
    """A fresh Standard Webhooks secret (``whsec_`` and 32 random bytes, base64)."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def rotate_secret(account: Any) -> str:
    """Make (or replace) ``account``'s signing secret and return it: the only time it is shown. Deliveries
    still to be attempted are signed with the new one."""
    secret = new_secret()
    SigningSecret.objects.update_or_create(
        account=account, defaults={"secret": secret, "created_at": timezone.now()}
    )
    return secret


def event_payload(request: ApprovalRequest, event: str, now: datetime) -> dict[str, Any]:
    """What the receiver is told: the event and the request's status, never its arguments or request (the
    agent reads those with its token)."""
    return {
        "type": event,
        "timestamp": now.isoformat().replace("+00:00", "Z"),
        "data": {
            "id": str(request.id),
            "status": request.status,
            "agent": request.agent,
            "action": request.action_name,
            "idempotencyKey": request.idempotency_key,
        },
    }


def on_notice(pause: Any, event: str, step: int) -> None:
    """The notice listener (approvals.notices): an approval request's escalation steps and reminder reach
    its callback URL too, signed like its other events, once."""
    if pause.kind == "ACTION" and event in WAITING_EVENTS:
        queue_event(pause.subject_id, WAITING_EVENTS[event])


def queue_event(request_id: Any, event: str) -> WebhookDelivery | None:
    """In the caller's transaction: the delivery of ``event`` to the request's callback URL (if it has one)."""
    request = ApprovalRequest.objects.filter(pk=request_id).first()
    if request is None or not request.callback_url:
        return None
    now = timezone.now()
    delivery = WebhookDelivery(
        approval_request=request,
        event=event,
        url=request.callback_url,
        payload=event_payload(request, event, now),
        created_at=now,
        next_attempt_at=now,
    )
    rows.insert(delivery)
    async_task(
        DELIVER_TASK,
        str(delivery.id),
        task_name=f"hitl-webhook-{delivery.id}",
        group="hitl-webhooks",
        # the work cluster, also when a timeout fired on the timer cluster ended the request
        cluster=settings.Q_CLUSTER["name"],
    )
    return delivery


@dataclass(frozen=True)
class Attempt:
    """What one attempt came to: the receiver's status (None: no answer), the error, and whether trying
    again could change anything."""

    status_code: int | None
    error: str
    final: bool = False

    @property
    def delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def deliver(delivery_id: str) -> str:
    """One attempt (the q-cluster task): send, record, and on failure schedule the next attempt."""
    with transaction.atomic():
        delivery = (
            WebhookDelivery.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(pk=delivery_id, status=DeliveryStatus.PENDING)
            .select_related("approval_request")
            .first()
        )
        if delivery is None:
            return "not pending"  # delivered, failed for good, or another worker is sending it
        attempt = _send(delivery)
        now = timezone.now()
        delivery.attempts += 1
        delivery.last_status_code = attempt.status_code
        delivery.last_error = attempt.error[:ERROR_MAX]
        if attempt.delivered:
            delivery.status, delivery.delivered_at, delivery.next_attempt_at = (
                DeliveryStatus.DELIVERED,
                now,
                None,
            )
        elif attempt.final or delivery.attempts > len(RETRY_DELAYS):
            delivery.status, delivery.next_attempt_at = DeliveryStatus.FAILED, None
        else:
            delivery.next_attempt_at = now + RETRY_DELAYS[delivery.attempts - 1]
            _schedule_retry(delivery)
        delivery.save(
            update_fields=[
                "attempts",
                "last_status_code",
                "last_error",
                "status",
                "delivered_at",
                "next_attempt_at",
            ]
        )
        return delivery.status


def retry_name(delivery: WebhookDelivery) -> str:
    return f"hitl-webhook-retry-{delivery.id}-{delivery.attempts}"


def _schedule_retry(delivery: WebhookDelivery) -> None:
    """A one-shot schedule on the work cluster; django-q2 deletes it once it has fired (repeats -1)."""
    rows.insert(
        Schedule(
            name=retry_name(delivery),
            func=DELIVER_TASK,
            args=repr(str(delivery.id)),
            schedule_type=Schedule.ONCE,
            repeats=-1,
            next_run=delivery.next_attempt_at,
            cluster=settings.Q_CLUSTER["name"],
        )
    )


def _send(delivery: WebhookDelivery) -> Attempt:
    secret = SigningSecret.objects.filter(account_id=delivery.approval_request.account_id).first()
    if secret is None:
        return Attempt(None, NO_SECRET)
    text = _json(delivery.payload)
    body = text.encode("utf-8")
    signed_at = timezone.now()
    # the text, not its bytes: standardwebhooks 1.1 signs str(data), which for bytes is "b'...'"
    signature = Webhook(secret.secret).sign(str(delivery.id), signed_at, text)
    headers = {
        "content-type": "application/json",
        "webhook-id": str(delivery.id),
        "webhook-timestamp": str(int(signed_at.timestamp())),
        "webhook-signature": signature,
        "user-agent": USER_AGENT,
    }
    try:
        with outbound_client(SEND_TIMEOUT) as client:
            response = client.post(delivery.url, content=body, headers=headers)
    except EgressRefused as refused:  # nothing was sent; the same address would be refused again
        return Attempt(None, f"not sent: {refused}", final=True)
    except Exception as exc:  # unreachable, timed out, a bad URL: retried
        logger.info("webhook %s to %s failed: %s", delivery.id, delivery.url, type(exc).__name__)
        return Attempt(None, f"{type(exc).__name__}: {exc}")
    if 200 <= response.status_code < 300:
        return Attempt(response.status_code, "")
    return Attempt(response.status_code, f"HTTP {response.status_code}")


def _json(payload: dict[str, Any]) -> str:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
