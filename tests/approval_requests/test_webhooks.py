"""Signed webhooks of approval requests, delivered to a real receiver on loopback and verified there with
the ``standardwebhooks`` library: each end (decided, expired, cancelled), retries with the same
webhook-id through django-q2's own scheduler, giving up, no secret, the egress guard, the secret command
and the admin's delivery log. One delivery through real q-clusters: tests/e2e/test_live_approval_requests.py.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from datetime import timedelta

import django_q.scheduler
import pytest
import time_machine
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.conf import Conf
from django_q.models import OrmQ, Schedule
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from approval_requests import webhooks
from approval_requests.claims import claim_approval
from approval_requests.models import ApprovalRequest, DeliveryStatus, WebhookDelivery
from approvals.models import Pause
from approvals.timers import fire_due_batch
from harnesses.queue_drain import queued_functions, run_queued_tasks
from harnesses.users import client_for, make_user
from tests.approval_requests.conftest import file_request
from tests.approval_requests.webhook_receiver import WebhookReceiver, receiving

pytestmark = pytest.mark.django_db

DELIVER = webhooks.DELIVER_TASK
TIMERS = "hitl-timers"


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with receiving() as started:
        yield started


@pytest.fixture
def secret(agent) -> str:
    """The agent's signing secret, made through its REST endpoint."""
    made = client_for(agent).post("/approval-requests/webhook-secret")
    assert made.status_code == 201, made.content
    return made.json()["secret"]


@pytest.fixture
def on_the_scheduler(monkeypatch) -> None:
    # a q-cluster's scheduler first drops stale connections; here that would close the test's transaction
    monkeypatch.setattr(django_q.scheduler, "close_old_django_connections", lambda: None)


def deliveries(request_id: str) -> list[WebhookDelivery]:
    return list(WebhookDelivery.objects.filter(approval_request_id=request_id).order_by("created_at"))


def deliver_queued() -> int:
    return run_queued_tasks(only=DELIVER)


def run_retry_when_due(delivery: WebhookDelivery) -> None:
    """Travel to the delivery's next attempt and let django-q2's scheduler turn its one-shot schedule into
    the task, then run the task as a worker would."""
    delivery.refresh_from_db()
    schedule = Schedule.objects.get(name=webhooks.retry_name(delivery))
    assert schedule.next_run == delivery.next_attempt_at
    with time_machine.travel(delivery.next_attempt_at + timedelta(milliseconds=10), tick=False):
        django_q.scheduler.scheduler(broker=get_broker())
    assert not Schedule.objects.filter(pk=schedule.pk).exists()  # a one-shot schedule deletes itself
    assert deliver_queued() == 1


def deliver_in_a_thread() -> None:
    try:
        deliver_queued()
    finally:
        connection.close()  # this thread's own connection


def decide(approver, request_id: str, verdict: str) -> None:
    decided = client_for(approver).post(
        f"/approval-requests/{request_id}/decision", {"verdict": verdict}, format="json"
    )
    assert decided.status_code == 200, decided.content


# --- each end of a request, delivered and verified ------------------------------------------------


@pytest.mark.parametrize("verdict", ["APPROVED", "REJECTED"])
def test_a_decision_is_delivered_signed_and_recorded(agent, approver, secret, receiver, verdict):
    filed = file_request(agent, callbackUrl=receiver.url)
    assert deliveries(filed["id"]) == []

    decide(approver, filed["id"], verdict)

    [delivery] = deliveries(filed["id"])
    assert (delivery.event, delivery.status, delivery.attempts) == (webhooks.DECIDED, "PENDING", 0)
    assert queued_functions() == [DELIVER]  # queued in the decision's transaction, with the row
    assert deliver_queued() == 1
    [payload] = receiver.verified(secret)
    assert payload == {
        "type": "approval_request.decided",
        "timestamp": payload["timestamp"],
        "data": {
            "id": filed["id"],
            "status": verdict,
            "agent": "refund-bot",
            "action": "refund",
            "idempotencyKey": "run-1/call-1",
        },
    }
    [got] = receiver.received
    assert got.path == "/hooks/hitl"
    assert got.headers["webhook-id"] == str(delivery.id)
    assert got.headers["content-type"] == "application/json"
    assert got.headers["webhook-signature"].startswith("v1,")
    assert abs(int(got.headers["webhook-timestamp"]) - timezone.now().timestamp()) < 60
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_status_code, delivery.last_error) == (
        DeliveryStatus.DELIVERED,
        1,
        200,
        "",
    )
    assert delivery.delivered_at is not None and delivery.next_attempt_at is None
    with pytest.raises(WebhookVerificationError):
        Webhook(webhooks.new_secret()).verify(got.body, got.headers)  # another secret: refused
    assert webhooks.deliver(str(delivery.id)) == "not pending"  # a duplicate task sends nothing
    assert len(receiver.received) == 1


def test_an_abort_timeout_is_delivered_as_expired(agent, secret, receiver):
    filed = file_request(
        agent,
        callbackUrl=receiver.url,
        hitlConfig={"timeoutPolicy": "ABORT", "approvalTimeout": "PT10M"},
    )
    pause = Pause.objects.get(pk=ApprovalRequest.objects.get(pk=filed["id"]).pause_id)
    with time_machine.travel(pause.due_at - timedelta(seconds=1), tick=False):
        assert fire_due_batch() == 0
    with time_machine.travel(pause.due_at + timedelta(milliseconds=10), tick=False):
        assert fire_due_batch() == 1

    assert ApprovalRequest.objects.get(pk=filed["id"]).status == "EXPIRED"
    assert [d.event for d in deliveries(filed["id"])] == [webhooks.EXPIRED]
    assert deliver_queued() == 1
    [payload] = receiver.verified(secret)
    assert (payload["type"], payload["data"]["status"]) == ("approval_request.expired", "EXPIRED")


def test_an_expiry_on_the_timer_cluster_is_delivered_by_the_work_cluster(
    agent, secret, receiver, monkeypatch
):
    filed = file_request(
        agent, callbackUrl=receiver.url, hitlConfig={"timeoutPolicy": "ABORT", "approvalTimeout": "PT1M"}
    )
    pause = Pause.objects.get(pk=ApprovalRequest.objects.get(pk=filed["id"]).pause_id)
    OrmQ.objects.all().delete()
    monkeypatch.setattr(Conf, "CLUSTER_NAME", TIMERS)  # as in the cluster started with Q_CLUSTER_NAME

    with time_machine.travel(pause.due_at + timedelta(seconds=1), tick=False):
        assert fire_due_batch() == 1

    assert [(row.key, row.func()) for row in OrmQ.objects.all()] == [("hitl", DELIVER)]


def test_a_cancel_and_a_withdrawn_approval_are_delivered_as_cancelled(agent, approver, secret, receiver):
    pending = file_request(agent, idempotencyKey="k-1", callbackUrl=receiver.url)
    approved = file_request(agent, idempotencyKey="k-2", callbackUrl=receiver.url)
    decide(approver, approved["id"], "APPROVED")

    assert client_for(agent).post(f"/approval-requests/{pending['id']}/cancel").status_code == 200
    assert client_for(agent).post(f"/approval-requests/{approved['id']}/cancel").status_code == 200

    assert [d.event for d in deliveries(pending["id"])] == [webhooks.CANCELLED]
    assert [d.event for d in deliveries(approved["id"])] == [webhooks.DECIDED, webhooks.CANCELLED]
    assert deliver_queued() == 3
    told = [(p["data"]["id"], p["type"], p["data"]["status"]) for p in receiver.verified(secret)]
    assert told == [
        (approved["id"], "approval_request.decided", "APPROVED"),
        (pending["id"], "approval_request.cancelled", "CANCELLED"),
        (approved["id"], "approval_request.cancelled", "CANCELLED"),
    ]


def test_a_request_without_a_callback_url_queues_nothing(agent, approver, secret):
    filed = file_request(agent)
    decide(approver, filed["id"], "APPROVED")
    assert deliveries(filed["id"]) == []
    assert DELIVER not in queued_functions()


# --- retries -----------------------------------------------------------------------------------------


def test_a_failed_attempt_is_retried_with_the_same_webhook_id(agent, approver, secret, on_the_scheduler):
    with receiving(statuses=(500, 200)) as with_500:
        filed = file_request(agent, callbackUrl=with_500.url)
        decide(approver, filed["id"], "APPROVED")
        [delivery] = deliveries(filed["id"])
        before = timezone.now()

        assert deliver_queued() == 1

        delivery.refresh_from_db()
        assert (delivery.status, delivery.attempts, delivery.last_status_code, delivery.last_error) == (
            DeliveryStatus.PENDING,
            1,
            500,
            "HTTP 500",
        )
        wait = delivery.next_attempt_at - before
        assert webhooks.RETRY_DELAYS[0] <= wait < webhooks.RETRY_DELAYS[0] + timedelta(seconds=5)
        schedule = Schedule.objects.get(name=webhooks.retry_name(delivery))
        assert (schedule.func, schedule.schedule_type, schedule.cluster) == (DELIVER, Schedule.ONCE, "hitl")

        run_retry_when_due(delivery)

        delivery.refresh_from_db()
        assert (delivery.status, delivery.attempts, delivery.last_status_code, delivery.last_error) == (
            DeliveryStatus.DELIVERED,
            2,
            200,
            "",
        )
        assert with_500.ids() == [str(delivery.id)] * 2
        first, second = with_500.verified(secret)
        assert first == second  # the same event, signed again at each attempt


def test_a_receiver_that_always_fails_is_failed_after_the_last_retry(
    agent, approver, secret, on_the_scheduler
):
    with receiving(statuses=(503,)) as failing:
        filed = file_request(agent, callbackUrl=failing.url)
        decide(approver, filed["id"], "REJECTED")
        [delivery] = deliveries(filed["id"])
        before = timezone.now()
        assert deliver_queued() == 1
        for delay in webhooks.RETRY_DELAYS:
            delivery.refresh_from_db()
            assert delivery.status == DeliveryStatus.PENDING
            assert delay <= delivery.next_attempt_at - before < delay + timedelta(seconds=5)
            before = timezone.now()
            run_retry_when_due(delivery)

        delivery.refresh_from_db()
        attempts = 1 + len(webhooks.RETRY_DELAYS)
        assert (delivery.status, delivery.attempts, delivery.last_status_code, delivery.last_error) == (
            DeliveryStatus.FAILED,
            attempts,
            503,
            "HTTP 503",
        )
        assert delivery.next_attempt_at is None
        assert not Schedule.objects.filter(name__startswith=f"hitl-webhook-retry-{delivery.id}").exists()
        assert failing.ids() == [str(delivery.id)] * attempts
        assert len(failing.verified(secret)) == attempts
        assert webhooks.deliver(str(delivery.id)) == "not pending"


# --- failures recorded -------------------------------------------------------------------------------


def test_without_a_secret_the_attempt_fails_and_is_retried_once_there_is_one(
    agent, approver, receiver, on_the_scheduler
):
    filed = file_request(agent, callbackUrl=receiver.url)
    decide(approver, filed["id"], "APPROVED")
    [delivery] = deliveries(filed["id"])

    assert deliver_queued() == 1

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("PENDING", 1, None)
    assert delivery.last_error == webhooks.NO_SECRET
    assert receiver.received == []

    out = io.StringIO()
    call_command("hitl_webhook_secret", "refund-bot", stdout=out)
    secret = out.getvalue().strip().splitlines()[-1]
    assert secret.startswith("whsec_")

    run_retry_when_due(delivery)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.DELIVERED, 2)
    [payload] = receiver.verified(secret)
    assert payload["data"]["id"] == filed["id"]


def test_the_egress_guard_refuses_a_loopback_callback_and_nothing_is_sent(
    agent, approver, secret, receiver, settings
):
    filed = file_request(agent, callbackUrl=receiver.url)
    decide(approver, filed["id"], "APPROVED")
    [delivery] = deliveries(filed["id"])
    settings.HITL_HTTP_DENY_PRIVATE = True  # as in production

    assert deliver_queued() == 1

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == (DeliveryStatus.FAILED, 1, None)
    assert delivery.last_error.startswith("not sent: refusing to call 127.0.0.1")
    assert "HITL_HTTP_ALLOW_PRIVATE" in delivery.last_error
    assert receiver.received == []
    assert not Schedule.objects.filter(name__startswith=f"hitl-webhook-retry-{delivery.id}").exists()


def test_an_unreachable_receiver_is_recorded_and_retried(agent, approver, secret, receiver):
    filed = file_request(agent, callbackUrl=receiver.url)
    decide(approver, filed["id"], "APPROVED")
    receiver.stop()  # nothing listens on its port any more

    assert deliver_queued() == 1

    [delivery] = deliveries(filed["id"])
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("PENDING", 1, None)
    assert delivery.last_error.startswith("ConnectError")
    assert Schedule.objects.filter(name=webhooks.retry_name(delivery)).exists()


# --- a receiver that acts on the event while it is being delivered ----------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_receiver_can_claim_the_approval_while_its_webhook_is_being_delivered(agent, approver, secret):
    """A receiver that claims the approval before it answers the webhook: the delivery holds no lock on the
    approval request, so the claim does not wait for the delivery, which waits for the receiver."""
    claims: list[object] = []

    def claim_before_answering(_got) -> int:
        try:
            with connection.cursor() as cursor:  # this thread's own connection
                cursor.execute("SET lock_timeout = '2s'")
            claims.append(claim_approval(user=agent, request_id=filed["id"], body={}))
        except Exception as exc:  # the receiver answers 500 and the test says why
            claims.append(exc)
            return 500
        finally:
            connection.close()
        return 200

    with receiving(on_request=claim_before_answering) as claiming:
        filed = file_request(agent, callbackUrl=claiming.url)
        decide(approver, filed["id"], "APPROVED")
        worker = threading.Thread(target=deliver_in_a_thread)  # a worker of its own, as on the q-cluster
        worker.start()
        worker.join(timeout=30)
        assert not worker.is_alive()

    [claimed] = claims
    assert isinstance(claimed, dict) and claimed["token"], claimed
    [delivery] = deliveries(filed["id"])
    assert (delivery.status, delivery.last_status_code) == (DeliveryStatus.DELIVERED, 200)


# --- the secret: endpoint and command ---------------------------------------------------------------


def test_only_a_service_account_has_a_secret(alice, approver):
    assert client_for(alice).post("/approval-requests/webhook-secret").status_code == 403
    assert client_for(approver).post("/approval-requests/webhook-secret").status_code == 403
    with pytest.raises(CommandError, match="not a service account"):
        call_command("hitl_webhook_secret", "alice", stdout=io.StringIO())
    with pytest.raises(CommandError, match="no user"):
        call_command("hitl_webhook_secret", "nobody", stdout=io.StringIO())


def test_the_command_replaces_the_secret_and_later_deliveries_use_the_new_one(
    agent, approver, secret, receiver
):
    out = io.StringIO()
    call_command("hitl_webhook_secret", "refund-bot", stdout=out)
    lines = out.getvalue().strip().splitlines()
    replaced = lines[-1]
    assert replaced.startswith("whsec_") and replaced != secret
    assert replaced not in "\n".join(lines[:-1])  # printed once, on the last line

    filed = file_request(agent, callbackUrl=receiver.url)
    decide(approver, filed["id"], "APPROVED")
    deliver_queued()

    assert len(receiver.verified(replaced)) == 1
    with pytest.raises(WebhookVerificationError):
        receiver.verified(secret)


# --- the delivery log in the admin -------------------------------------------------------------------


def browser_for(user) -> Client:
    browser = Client()
    browser.force_login(user)
    return browser


def test_the_admin_delivery_log_is_read_only_for_reviewers(agent, approver, secret, admin_user):
    filed = file_request(agent, callbackUrl="https://hooks.example/hitl?token=sk-live-abcdef123456")
    decide(approver, filed["id"], "APPROVED")
    [delivery] = deliveries(filed["id"])
    listing = "/admin/approval_requests/webhookdelivery/"
    page = f"{listing}{delivery.pk}/change/"

    for reviewer in (admin_user, approver):
        browser = browser_for(reviewer)
        shown = browser.get(listing)
        assert shown.status_code == 200
        text = shown.content.decode()
        assert "approval_request.decided" in text and "refund-bot" in text
        assert "https://hooks.example/hitl" in text and "sk-live-abcdef123456" not in text
        detail = browser.get(page)
        assert detail.status_code == 200
        assert str(delivery.pk) in detail.content.decode()
        assert browser.get(f"{listing}add/").status_code == 403
        assert browser.post(page, {"status": "DELIVERED"}).status_code == 403
        assert browser.post(f"{page.removesuffix('change/')}delete/", {"post": "yes"}).status_code == 403
    assert WebhookDelivery.objects.get(pk=delivery.pk).status == DeliveryStatus.PENDING

    plain_staff = make_user("operator-without-role", "user")
    plain_staff.is_staff = True
    plain_staff.save()
    assert browser_for(plain_staff).get(listing).status_code == 403
    assert browser_for(make_user("carol")).get(listing).status_code == 302  # not staff: the login page


def test_an_escalation_step_and_the_reminder_reach_the_callback_signed_once(agent, secret, receiver):
    from approvals.notices import queue_due_notices

    filed = file_request(
        agent,
        callbackUrl=receiver.url,
        hitlConfig={
            "timeoutPolicy": "AUTO_REJECT",
            "approvalTimeout": "PT30M",
            "remindBefore": "PT10M",
            "escalation": [{"after": "PT15M", "approvers": {"groups": ["on-call"]}}],
        },
    )
    run_queued_tasks()
    assert deliveries(filed["id"]) == []
    with time_machine.travel(timezone.now() + timedelta(minutes=21), tick=False):
        assert queue_due_notices() == 2  # the step and the reminder
        queue_due_notices()  # a second sweep before the tasks ran: each is still told once
        run_queued_tasks()
        assert sorted(payload["type"] for payload in receiver.verified(secret)) == [
            "approval_request.escalated",
            "approval_request.reminder",
        ]
    assert len(deliveries(filed["id"])) == 2
