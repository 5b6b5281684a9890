"""Webhook delivery after a decision, measured at a loopback receiver (bench/approval_requests.py).

``Receiver`` is a real HTTP server on 127.0.0.1 (a thread of the bench process) that verifies every
delivery with the ``standardwebhooks`` library and the service account's secret, answers 204 to a
verified one and 400 to any other (which the sender retries), and records when each request id's
first verified delivery arrived.

``run_deliveries`` files ``count`` requests with the receiver as ``callbackUrl`` and decides them one at
a time as the approver; after each decision it waits for the verified delivery, then a random 0–250 ms
so that decisions fall at every point of the q-cluster's 0.2 s poll. The latency of a delivery is taken
two ways, both on this machine's one clock:

- **from the decision's answer** to the verified delivery: the decision commits before its answer is
  sent, so this leaves out the answer's own few milliseconds (a lower bound);
- **from the pause's ``decided_at``**, set inside the decision's transaction before its commit (an upper
  bound by the rest of that transaction).
"""

from __future__ import annotations

import math
import random
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
from _service_accounts import filing, load
from standardwebhooks import Webhook

WAIT_SECONDS = 30.0


@dataclass
class Arrival:
    monotonic: float
    wall: float


class Receiver:
    """The loopback receiver (see the module); ``arrivals`` by request id, the first verified one each."""

    def __init__(self) -> None:
        self.secret = ""
        self.arrivals: dict[str, Arrival] = {}
        self.deliveries = 0
        self.duplicates = 0
        self.refused: list[str] = []
        self.arrived = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    payload = Webhook(receiver.secret).verify(body, dict(self.headers.items()))
                except Exception as exc:  # a bad signature, a stale timestamp: refused, retried
                    receiver.refused.append(f"{type(exc).__name__}: {exc}")
                    self.send_response(400)
                    self.end_headers()
                    return
                receiver.record(payload["data"]["id"], Arrival(time.perf_counter(), time.time()))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks"
        self.thread = threading.Thread(target=self.server.serve_forever, name="webhook-receiver", daemon=True)

    def record(self, request_id: str, arrival: Arrival) -> None:
        with self.arrived:
            self.deliveries += 1
            if request_id in self.arrivals:
                self.duplicates += 1
                return
            self.arrivals[request_id] = arrival
            self.arrived.notify_all()

    def wait_for(self, request_id: str, timeout: float = WAIT_SECONDS) -> Arrival | None:
        with self.arrived:
            self.arrived.wait_for(lambda: request_id in self.arrivals, timeout=timeout)
            return self.arrivals.get(request_id)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class DeliveryRun:
    from_answer: list[float] = field(default_factory=list)
    from_decided_at: list[float] = field(default_factory=list)
    decision: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    load_before: float = math.nan
    load_after: float = math.nan


def run_deliveries(
    receiver: Receiver, agent: httpx.Client, reviewer: httpx.Client, *, count: int, warmup: int, prefix: str
) -> DeliveryRun:
    """``warmup`` untimed then ``count`` timed decisions, each followed by its delivery (see the module)."""
    run = DeliveryRun()
    answered: dict[str, float] = {}
    timed: list[str] = []
    run.load_before = load()
    for number in range(warmup + count):
        created = agent.post(
            "/approval-requests", json=filing(f"{prefix}-{number}", callback_url=receiver.url)
        )
        if created.status_code != 201:
            run.errors.append(f"create: {created.status_code} {created.text[:200]}")
            continue
        request_id = created.json()["id"]
        sent = time.perf_counter()
        decided = reviewer.post(f"/approval-requests/{request_id}/decision", json={"verdict": "APPROVED"})
        answered[request_id] = time.perf_counter()
        if decided.status_code != 200:
            run.errors.append(f"decision: {decided.status_code} {decided.text[:200]}")
            continue
        arrival = receiver.wait_for(request_id)
        if arrival is None:
            run.errors.append(f"no verified delivery of {request_id} within {WAIT_SECONDS:.0f} s")
            continue
        if number >= warmup:
            timed.append(request_id)
            run.decision.append(answered[request_id] - sent)
            run.from_answer.append(arrival.monotonic - answered[request_id])
        time.sleep(random.uniform(0, 0.25))  # spacing, not a secret
    run.load_after = load()
    for request_id, decided_at in decided_at_of(timed).items():
        run.from_decided_at.append(receiver.arrivals[request_id].wall - decided_at.timestamp())
    return run


def decided_at_of(request_ids: list[str]) -> dict[str, datetime]:
    """The ``decided_at`` of each request's pause (written in the decision's transaction)."""
    from approval_requests.models import ApprovalRequest
    from approvals.models import Pause

    pauses = dict(ApprovalRequest.objects.filter(pk__in=request_ids).values_list("id", "pause_id"))
    decided = dict(Pause.objects.filter(pk__in=pauses.values()).values_list("id", "decided_at"))
    return {str(request_id): decided[pause_id] for request_id, pause_id in pauses.items()}


def delivery_rows(prefix: str) -> dict[str, int]:
    """This run's deliveries by status, and their attempts in all."""
    from django.db.models import Count, Sum

    from approval_requests.models import WebhookDelivery

    rows = WebhookDelivery.objects.filter(approval_request__idempotency_key__startswith=prefix + "-")
    by_status = dict(rows.values_list("status").annotate(n=Count("id")).values_list("status", "n"))
    return {**by_status, "attempts": rows.aggregate(n=Sum("attempts"))["n"] or 0}
