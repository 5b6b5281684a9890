"""The gated call of an agent that runs elsewhere, over HTTP: file → decide → claim → outcome.

``run_cycles`` starts ``agents`` threads, each a service account with its own token and keep-alive
httpx client, and ``reviewers`` reviewer threads (the approver; one by default). Each agent, per cycle:

  1. files a pinned approval request (``POST /approval-requests``, a new idempotency key): **create**;
  2. waits for the decision with ``GET /approval-requests/{id}?wait=30``;
  3. claims it with the pinned request about to be sent (``POST …/claim``, answers the grant and its
     signed token): **claim**;
  4. reports what the call did (``POST …/outcome``): **outcome**.

A reviewer approves each request as soon as it was filed (``POST …/decision``): **decision**. The
agents hand the reviewers their requests in process, so reviewing adds no load of its own (the
reviewer's list is timed apart, with a backlog: bench/_request_inbox.py); with many agents and one
reviewer, the requests queue at it.

The added latency of a gated call is **cycle** = create + decision + claim + outcome, the four round
trips the service adds to the call. The human's time is left out: here it is the reviewer's queue,
from the create's answer to the decision being sent (printed as ``reviewer's queue``). Also printed:
**notice**, from the decision's answer to the agent's ``?wait`` answering, the time an agent waiting
that way takes to learn of the decision (the server looks every 0.2 s). Each agent runs ``warmup``
untimed cycles first. Every answer is checked (status codes, APPROVED, a grant token, the outcome
recorded); anything else is counted on ``errors``.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from _service_accounts import OUTCOME, PINNED, filing, load, token_client

WAIT_SECONDS = 30


@dataclass
class Filed:
    """One request of this run as the threads see it."""

    created_answered: float
    decided: threading.Event = field(default_factory=threading.Event)
    decision_sent: float = math.nan
    decision_answered: float = math.nan
    decision: float = math.nan


@dataclass
class CycleRun:
    agents: int
    create: list[float] = field(default_factory=list)
    decision: list[float] = field(default_factory=list)
    claim: list[float] = field(default_factory=list)
    outcome: list[float] = field(default_factory=list)
    cycle: list[float] = field(default_factory=list)
    notice: list[float] = field(default_factory=list)
    reviewer_queue: list[float] = field(default_factory=list)
    window: list[float] = field(default_factory=list)  # [first timed create sent, last outcome answered]
    errors: list[str] = field(default_factory=list)
    load_before: float = math.nan
    load_after: float = math.nan

    @property
    def cycles_per_second(self) -> float:
        if len(self.window) < 2 or not self.cycle:
            return math.nan
        return len(self.cycle) / (max(self.window) - min(self.window))


class Reviewer(threading.Thread):
    """Approves each request of this run as soon as an agent has filed it (in filing order)."""

    def __init__(
        self, url: str, token: str, run: CycleRun, filed: queue.Queue[tuple[str, Filed] | None]
    ) -> None:
        super().__init__(name="reviewer", daemon=True)
        self.client = token_client(url, token)
        self.run_ = run
        self.filed = filed

    def run(self) -> None:
        try:
            while (item := self.filed.get()) is not None:
                self.decide(*item)
        finally:
            self.client.close()

    def decide(self, request_id: str, entry: Filed) -> None:
        try:
            entry.decision_sent = time.perf_counter()
            answer = self.client.post(
                f"/approval-requests/{request_id}/decision", json={"verdict": "APPROVED"}
            )
            entry.decision_answered = time.perf_counter()
            entry.decision = entry.decision_answered - entry.decision_sent
            if answer.status_code != 200 or answer.json().get("status") != "APPROVED":
                self.run_.errors.append(f"decision: {answer.status_code} {answer.text[:200]}")
        except Exception as exc:  # counted; the agent waiting for it fails on its own
            self.run_.errors.append(f"reviewer: {type(exc).__name__}: {exc}")
        finally:
            entry.decided.set()


def _agent(
    url: str, token: str, prefix: str, cycles: int, warmup: int, filed: queue.Queue[Any], run: CycleRun
) -> None:
    with token_client(url, token) as client:
        for number in range(warmup + cycles):
            try:
                _one_cycle(client, f"{prefix}-{number}", filed, run, timed=number >= warmup)
            except Exception as exc:  # counted, never silent
                run.errors.append(f"agent {prefix}: {type(exc).__name__}: {exc}")


def _one_cycle(
    client: httpx.Client, key: str, filed: queue.Queue[Any], run: CycleRun, *, timed: bool
) -> None:
    started = time.perf_counter()
    created = client.post("/approval-requests", json=filing(key))
    created_answered = time.perf_counter()
    if created.status_code != 201:
        raise RuntimeError(f"create: {created.status_code} {created.text[:200]}")
    request_id = created.json()["id"]
    entry = Filed(created_answered)
    filed.put((request_id, entry))
    seen = client.get(f"/approval-requests/{request_id}", params={"wait": WAIT_SECONDS})
    seen_at = time.perf_counter()
    if seen.status_code != 200 or seen.json()["status"] != "APPROVED":
        raise RuntimeError(f"wait: {seen.status_code} {seen.text[:200]}")
    if not entry.decided.wait(WAIT_SECONDS):
        raise RuntimeError("the reviewer did not record its decision")
    claim_sent = time.perf_counter()
    claimed = client.post(f"/approval-requests/{request_id}/claim", json={"request": PINNED})
    claim_answered = time.perf_counter()
    if claimed.status_code != 200 or not claimed.json()["grant"].get("token"):
        raise RuntimeError(f"claim: {claimed.status_code} {claimed.text[:200]}")
    reported = client.post(f"/approval-requests/{request_id}/outcome", json=OUTCOME)
    finished = time.perf_counter()
    if reported.status_code != 200 or reported.json()["claim"]["outcome"]["status"] != OUTCOME["status"]:
        raise RuntimeError(f"outcome: {reported.status_code} {reported.text[:200]}")
    if not timed:
        return
    steps = (
        created_answered - started,
        entry.decision,
        claim_answered - claim_sent,
        finished - claim_answered,
    )
    run.create.append(steps[0])
    run.decision.append(steps[1])
    run.claim.append(steps[2])
    run.outcome.append(steps[3])
    run.cycle.append(sum(steps))
    run.notice.append(max(0.0, seen_at - entry.decision_answered))
    run.reviewer_queue.append(entry.decision_sent - entry.created_answered)
    run.window += [started, finished]


def run_cycles(
    url: str,
    *,
    agent_tokens: list[str],
    reviewer_token: str,
    reviewers: int = 1,
    cycles: int,
    warmup: int,
    prefix: str,
) -> CycleRun:
    """``cycles`` timed cycles in all, shared out over one thread per token in ``agent_tokens``."""
    run = CycleRun(agents=len(agent_tokens))
    filed: queue.Queue[tuple[str, Filed] | None] = queue.Queue()
    deciding = [Reviewer(url, reviewer_token, run, filed) for _ in range(reviewers)]
    per_agent = [
        cycles // len(agent_tokens) + (i < cycles % len(agent_tokens)) for i in range(len(agent_tokens))
    ]
    threads = [
        threading.Thread(
            target=_agent,
            args=(url, token, f"{prefix}-a{number}", count, warmup, filed, run),
            name=f"agent-{number}",
            daemon=True,
        )
        for number, (token, count) in enumerate(zip(agent_tokens, per_agent, strict=True))
    ]
    run.load_before = load()
    for reviewer in deciding:
        reviewer.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for _ in deciding:
        filed.put(None)  # one stop for each reviewer
    for reviewer in deciding:
        reviewer.join(timeout=WAIT_SECONDS)
    run.load_after = load()
    return run


def cycle_check(prefix: str, expected: int) -> dict[str, Any]:
    """What the database holds of this run: requests filed, claimed once with an outcome, audit entries."""
    from approval_requests.models import ApprovalRequest
    from approvals.models import AuditEntry

    requests = ApprovalRequest.objects.filter(idempotency_key__startswith=prefix + "-")
    ids = list(requests.values_list("id", flat=True))
    return {
        "expected": expected,
        "filed": len(ids),
        "reported": requests.filter(claimed_at__isnull=False, outcome_status=OUTCOME["status"]).count(),
        "audit": AuditEntry.objects.filter(subject_id__in=ids).count(),
    }


def statements_per_step(agent: str, reviewer: str, key: str) -> dict[str, int]:
    """The statements of each step of one cycle through the real views, in process (DRF's test client,
    signed in without the token's lookup), filed under the idempotency key ``key``."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from rest_framework.test import APIClient

    users = get_user_model().objects
    as_agent, as_reviewer = APIClient(), APIClient()
    as_agent.force_authenticate(users.get(username=agent))
    as_reviewer.force_authenticate(users.get(username=reviewer))
    counted = {}

    def step(name: str, client: APIClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
        with CaptureQueriesContext(connection) as captured:
            answer = client.post(path, body, format="json")
        if answer.status_code not in (200, 201):
            raise RuntimeError(f"{name} in process: {answer.status_code} {answer.content[:200]!r}")
        counted[name] = len(captured.captured_queries)
        return answer.json()

    request_id = step("create", as_agent, "/approval-requests", filing(key))["id"]
    step("decision", as_reviewer, f"/approval-requests/{request_id}/decision", {"verdict": "APPROVED"})
    step("claim", as_agent, f"/approval-requests/{request_id}/claim", {"request": PINNED})
    step("outcome", as_agent, f"/approval-requests/{request_id}/outcome", OUTCOME)
    return counted
