"""Approval requests on a live uvicorn: the status stream (SSE) read with httpx's streaming client, and
webhooks delivered by real q-clusters to a receiver on loopback that verifies each signature.

The stack starts without q-clusters (a decision's continuation runs in the web process) and sends a
keep-alive after 0.2 idle seconds; the webhook test starts its own clusters. Every stream read is capped
twice: httpx's timeouts and an overall deadline.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from django.conf import settings
from django_q.models import OrmQ

from approval_requests import webhooks
from approval_requests.models import DeliveryStatus, WebhookDelivery
from harnesses.clusters import Clusters
from harnesses.live_stack import LiveStack, api_user, eventually, running_stack
from tests.approval_requests.conftest import filing
from tests.approval_requests.webhook_receiver import receiving

pytestmark = pytest.mark.django_db(transaction=True)

KEEPALIVE_SECONDS = "0.2"
STREAM_DEADLINE = 20.0
TIMEOUT = httpx.Timeout(10.0, read=5.0)
SSE = {"Accept": "text/event-stream"}
PROBLEM = "application/problem+json"


@pytest.fixture(scope="module")
def live_stack(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[LiveStack]:
    yield from running_stack(
        django_db_blocker,
        tmp_path_factory.mktemp("approval-requests-stack"),
        qclusters=False,
        HITL_SSE_KEEPALIVE_SECONDS=KEEPALIVE_SECONDS,
    )


@dataclass
class Stream:
    status: int
    headers: httpx.Headers
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)  # event names and keep-alive comments, in order
    seen_at: list[float] = field(default_factory=list)  # time.monotonic() when each of ``seen`` arrived
    ended: bool = False
    problem: dict[str, Any] | None = None

    @property
    def statuses(self) -> list[str]:
        return [data["status"] for _, data in self.events]


def stream(client: httpx.Client, path: str) -> Stream:
    """GET ``path`` accepting only text/event-stream and read it to its end (or fail at the deadline)."""
    deadline = time.monotonic() + STREAM_DEADLINE
    with client.stream("GET", path, headers=SSE, timeout=TIMEOUT) as response:
        result = Stream(response.status_code, response.headers)
        if response.status_code != 200:
            response.read()
            result.problem = response.json()
            return result
        name, data = None, None
        for line in response.iter_lines():
            if time.monotonic() > deadline:
                pytest.fail(f"{path}: the stream was still open after {STREAM_DEADLINE:.0f}s: {result.seen}")
            if line.startswith(":"):
                result.seen.append(line)
                result.seen_at.append(time.monotonic())
            elif line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                data = json.loads(line[len("data: ") :])
            elif line == "" and name is not None:
                result.events.append((name, data))
                result.seen.append(name)
                result.seen_at.append(time.monotonic())
                name, data = None, None
        result.ended = True
    return result


def assert_streamed(result: Stream) -> None:
    assert result.status == 200, result.problem
    assert result.headers["content-type"] == "text/event-stream"
    assert result.headers["cache-control"] == "no-cache"
    assert result.headers["x-accel-buffering"] == "no"
    assert result.ended


@dataclass
class People:
    agent: httpx.Client
    approver: httpx.Client
    alice: httpx.Client
    other_agent: httpx.Client
    anonymous: httpx.Client


@pytest.fixture
def people(live_stack: LiveStack) -> Iterator[People]:
    clients = People(
        agent=live_stack.client(api_user("refund-bot", "agent")),
        approver=live_stack.client(api_user("approver", "approver")),
        alice=live_stack.client(api_user("alice")),
        other_agent=live_stack.client(api_user("deploy-bot", "agent")),
        anonymous=live_stack.client(),
    )
    yield clients
    for client in vars(clients).values():
        client.close()


def file(client: httpx.Client, **overrides: Any) -> str:
    filed = client.post("/approval-requests", json=filing(**overrides))
    assert filed.status_code == 201, filed.text
    return filed.json()["id"]


def later(seconds: float, call: Any) -> threading.Thread:
    """Run ``call`` in a thread after ``seconds`` (while the test reads a stream)."""

    def run() -> None:
        time.sleep(seconds)
        call()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


# --- the status stream ------------------------------------------------------------------------------


def test_the_stream_tells_pending_then_the_decision_and_ends(people):
    request_id = file(people.agent)
    answers: list[httpx.Response] = []
    decided_at: list[float] = []

    def approve() -> None:
        decided_at.append(time.monotonic())
        answers.append(
            people.approver.post(f"/approval-requests/{request_id}/decision", json={"verdict": "APPROVED"})
        )

    approving = later(1.0, approve)

    result = stream(people.agent, f"/approval-requests/{request_id}/events")

    approving.join(timeout=10)
    assert answers and answers[0].status_code == 200, answers
    assert_streamed(result)
    assert result.events == [
        ("status", {"id": request_id, "status": "PENDING"}),
        ("status", {"id": request_id, "status": "APPROVED"}),
    ]
    between = result.seen[1:-1]
    assert between and set(between) == {": keep-alive"}, result.seen  # 1 s of waiting, 0.2 s keep-alives
    # sent as they happen, not collected: PENDING and a keep-alive arrived before anyone decided
    assert result.seen_at[1] < decided_at[0] <= result.seen_at[-1]
    assert people.agent.get(f"/approval-requests/{request_id}").json()["status"] == "APPROVED"


def test_the_person_it_was_made_for_watches_it_until_cancelled(people):
    request_id = file(people.agent, onBehalfOf="alice")
    later(0.5, lambda: people.agent.post(f"/approval-requests/{request_id}/cancel"))

    result = stream(people.alice, f"/approval-requests/{request_id}/events")

    assert_streamed(result)
    assert result.statuses == ["PENDING", "CANCELLED"]


def test_a_request_already_decided_is_one_event(people):
    request_id = file(people.agent)
    rejected = people.approver.post(f"/approval-requests/{request_id}/decision", json={"verdict": "REJECTED"})
    assert rejected.status_code == 200, rejected.text

    for watcher in (people.agent, people.approver):
        result = stream(watcher, f"/approval-requests/{request_id}/events")
        assert_streamed(result)
        assert result.seen == ["status"] and result.statuses == ["REJECTED"]


def test_who_may_not_read_the_request_is_refused_before_the_stream(people):
    request_id = file(people.agent)
    path = f"/approval-requests/{request_id}/events"
    unknown = f"/approval-requests/{uuid.uuid4()}/events"

    for client, where, status in (
        (people.other_agent, path, 403),
        (people.alice, path, 403),
        (people.alice, unknown, 403),  # the same answer as for a request she may not read
        (people.approver, unknown, 404),
        (people.anonymous, path, 401),
    ):
        result = stream(client, where)
        assert result.status == status, (where, result.problem)
        assert result.headers["content-type"].startswith(PROBLEM)
        assert result.problem is not None and result.problem["status"] == status


# --- webhooks through real q-clusters ---------------------------------------------------------------


def deliver_tasks_queued_for(cluster: str) -> int:
    return sum(1 for row in OrmQ.objects.filter(key=cluster) if row.func() == webhooks.DELIVER_TASK)


def test_webhooks_are_delivered_by_the_work_cluster_and_verify(live_stack, people):
    """An ABORT timeout fired by the timer cluster queues its webhook for the work cluster, which delivers
    it once it runs; a decision made over REST is delivered by it too. Each is verified by the receiver."""
    secret = people.agent.post("/approval-requests/webhook-secret").json()["secret"]
    clusters = Clusters(stack=live_stack)
    with receiving() as receiver:
        try:
            clusters.start("timers", cluster=settings.HITL_TIMER_CLUSTER)
            expiring = file(
                people.agent,
                idempotencyKey="expiring",
                callbackUrl=receiver.url,
                hitlConfig={"timeoutPolicy": "ABORT", "approvalTimeout": "PT1S"},
            )
            eventually(
                lambda: people.agent.get(f"/approval-requests/{expiring}").json()["status"] == "EXPIRED",
                timeout=30,
                what="the timer cluster to expire the request",
            )
            eventually(
                lambda: deliver_tasks_queued_for(settings.Q_CLUSTER["name"]) == 1,
                timeout=10,
                what="its webhook queued for the work cluster",
            )
            time.sleep(1.0)  # the timer cluster polls its own queue only: nothing is sent yet
            assert receiver.received == []

            clusters.start("work")
            eventually(lambda: len(receiver.received) == 1, timeout=30, what="the expiry's webhook")
            decided = file(people.agent, idempotencyKey="decided", callbackUrl=receiver.url)
            approved = people.approver.post(
                f"/approval-requests/{decided}/decision", json={"verdict": "APPROVED"}
            )
            assert approved.status_code == 200, approved.text
            eventually(lambda: len(receiver.received) == 2, timeout=30, what="the decision's webhook")
            # the receiver answered before the work cluster recorded the answer: wait for the record
            eventually(
                lambda: not WebhookDelivery.objects.exclude(status=DeliveryStatus.DELIVERED).exists(),
                timeout=30,
                what="both deliveries recorded as delivered",
            )
        finally:
            clusters.stop_all()

        told = [(p["type"], p["data"]["id"], p["data"]["status"]) for p in receiver.verified(secret)]
        assert told == [
            ("approval_request.expired", expiring, "EXPIRED"),
            ("approval_request.decided", decided, "APPROVED"),
        ]
        rows = WebhookDelivery.objects.order_by("created_at")
        assert [(row.status, row.attempts, row.last_status_code) for row in rows] == [
            (DeliveryStatus.DELIVERED, 1, 200),
            (DeliveryStatus.DELIVERED, 1, 200),
        ]
        assert receiver.ids() == [str(row.id) for row in rows]
