"""At most one execution per approval, one request per idempotency key: real threads racing on one
approval request (docs/approval-requests.md), each on its own PostgreSQL connection through the real
REST views (DRF's test client with the caller's token, in this process).

A round releases its callers with one ``threading.Barrier`` and judges the answers against the database:

- **claims** (``claim_round``): N claims of one approved request. Exactly one is granted (200, a grant
  token signed for that claim: its ``jti`` is the claim the database recorded), with one
  ``hitl.request.claimed`` entry; every other is 409 ``OUTCOME_UNKNOWN`` (nothing was reported yet), or,
  when an outcome report races them (``with_outcome``), ``ALREADY_CLAIMED`` once it landed. With a
  withdrawal racing them (``with_withdrawal``), either the claim won (the withdrawal is 409) or the
  withdrawal did (every claim is 409 and nothing was granted), never both.
- **outcomes** (``outcome_round``): N different reports of one claimed execution: the first stands (200),
  every other is 409, the same report again is answered as before.
- **filings** (``filing_round``): N filings with one idempotency key and ``variants`` different bodies.
  One request is filed (one 201); every filing with its body is answered with its id (200 or 201); every
  other body is 409 ``IDEMPOTENCY_CONFLICT`` naming it; the request has one pause and one ``hitl.pause``
  entry.

Used by tests/approval_requests/test_claim_races.py (fast) and at full size by its ``fullsize`` test.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jwt
from django.db import connections
from rest_framework.test import APIClient

from approval_requests import grants
from approval_requests.models import ApprovalRequest, RequestStatus
from approvals.models import AuditEntry, Pause
from harnesses.users import client_for

PINNED = {
    "method": "POST",
    "url": "https://payments.example/refunds",
    "headers": {"Content-Type": "application/json", "Authorization": "Bearer sk-live-abcdef123456"},
    "body": '{"orderId":"A-1","amount":250}',
    "secretHeaders": ["Authorization"],
}
JOIN_SECONDS = 60


@dataclass(frozen=True)
class Answer:
    """One caller's answer: who, the HTTP status, the problem ``code`` (or ``""``) and the JSON body."""

    who: str
    status: int
    code: str
    body: Any

    @classmethod
    def of(cls, who: str, response: Any) -> Answer:
        try:
            body = response.json()
        except ValueError:
            body = response.content[:300]
        code = body.get("code", "") if isinstance(body, dict) and response.status_code >= 400 else ""
        return cls(who, response.status_code, code, body)

    def __str__(self) -> str:
        return f"{self.who}: {self.status} {self.code}".rstrip()


def race(calls: dict[str, Callable[[], Any]], delays: dict[str, float] | None = None) -> list[Answer]:
    """Run every call in a thread of its own, all released at once (each after its ``delays``, seconds);
    each thread closes its connection."""
    barrier = threading.Barrier(len(calls))
    answers: dict[str, Answer] = {}

    def run(who: str, call: Callable[[], Any]) -> None:
        try:
            barrier.wait(timeout=JOIN_SECONDS)
            time.sleep((delays or {}).get(who, 0.0))
            answers[who] = Answer.of(who, call())
        except Exception as exc:  # an exception is a finding, reported as the answer
            answers[who] = Answer(who, 0, f"raised {type(exc).__name__}: {exc}", None)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=item, name=f"racer {item[0]}") for item in calls.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=JOIN_SECONDS)
    return [answers.get(who, Answer(who, 0, "no answer", None)) for who in calls]


def filing(
    key: str, *, reason: str = "Refund over 100 EUR", pinned: bool = False, on_behalf_of: Any = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "idempotencyKey": key,
        "agent": "refund-bot",
        "action": {"name": "refund", "arguments": {"orderId": "A-1", "amount": 250}},
        "reason": reason,
    }
    if pinned:
        body["request"] = PINNED
    if on_behalf_of is not None:
        body["onBehalfOf"] = on_behalf_of.get_username()
    return body


def approved_request(agent: Any, reviewer: Any, *, pinned: bool = False, person: Any = None) -> str:
    """A request ``agent`` filed (for ``person``) and ``reviewer`` approved over REST (committed): its id."""
    body = filing(f"race/{uuid.uuid4()}", pinned=pinned, on_behalf_of=person)
    filed = client_for(agent).post("/approval-requests", body, format="json")
    assert filed.status_code == 201, filed.content
    request_id = filed.json()["id"]
    decided = client_for(reviewer).post(
        f"/approval-requests/{request_id}/decision", {"verdict": "APPROVED"}, format="json"
    )
    assert decided.status_code == 200 and decided.json()["status"] == "APPROVED", decided.content
    return request_id


def _poster(client: APIClient, path: str, body: Any = None) -> Callable[[], Any]:
    if body is None:
        return lambda: client.post(path)
    return lambda: client.post(path, body, format="json")


@dataclass
class Round:
    """One round's answers and what broke the rule (empty: it held)."""

    kind: str
    answers: list[Answer]
    problems: list[str] = field(default_factory=list)

    def won_by(self, who: str) -> bool:
        return any(a.who == who and a.status == 200 for a in self.answers)

    @property
    def tally(self) -> Counter:
        return Counter(f"{a.status} {a.code}".rstrip() for a in self.answers)


def _token_problems(request_id: str, grant: dict[str, Any], claim_id: Any) -> list[str]:
    """The grant token verifies with the published key set and names this request and the recorded claim."""
    key = jwt.PyJWK(grants.key_set()["keys"][0])
    try:
        claims = jwt.decode(grant["token"], key, algorithms=[grants.ALGORITHM], audience=grants.AUDIENCE)
    except jwt.PyJWTError as exc:
        return [f"the grant token does not verify: {exc}"]
    found = []
    if claims["sub"] != request_id or claims["jti"] != str(claim_id) or grant["claimId"] != str(claim_id):
        found.append(f"the token names {claims['sub']}/{claims['jti']}, the database claim {claim_id}")
    return found


def claim_round(
    agent: Any,
    reviewer: Any,
    person: Any,
    *,
    claimers: int,
    pinned: bool = False,
    with_outcome: bool = False,
    with_withdrawal: bool = False,
    withdrawal_ahead: float = 0.0,
) -> Round:
    """``claimers`` claims of one approved request at once (see the module). ``with_outcome``: the request
    was claimed once before and its outcome report races the claims; ``with_withdrawal``: the person
    it was made for withdraws it while it is claimed, the claims starting up to ``withdrawal_ahead``
    seconds after it."""
    request_id = approved_request(agent, reviewer, pinned=pinned, person=person)
    path = f"/approval-requests/{request_id}"
    claim_body = {"request": PINNED} if pinned else {}
    first_claim = None
    if with_outcome:
        first_claim = client_for(agent).post(f"{path}/claim", claim_body, format="json")
        assert first_claim.status_code == 200, first_claim.content
    calls = {f"claim {i}": _poster(client_for(agent), f"{path}/claim", claim_body) for i in range(claimers)}
    if with_outcome:
        calls["outcome"] = _poster(
            client_for(agent), f"{path}/outcome", {"status": "succeeded", "httpStatus": 201}
        )
    if with_withdrawal:
        calls["withdrawal"] = _poster(client_for(person), f"{path}/cancel")
    kind = "claims" + (" + outcome" if with_outcome else "") + (" + withdrawal" if with_withdrawal else "")
    delays = {who: random.uniform(0, withdrawal_ahead) for who in calls if who.startswith("claim")}
    answers = race(calls, delays)
    judged = Round(kind + (" (pinned)" if pinned else ""), answers)
    judged.problems = _claim_problems(request_id, answers, first_claim)
    return judged


def _claim_problems(request_id: str, answers: list[Answer], first_claim: Any) -> list[str]:
    request = ApprovalRequest.objects.get(pk=request_id)
    claimed_entries = AuditEntry.objects.filter(subject_id=request_id, verb="hitl.request.claimed").count()
    claims = [a for a in answers if a.who.startswith("claim")]
    granted = [a for a in claims if a.status == 200]
    withdrawal = next((a for a in answers if a.who == "withdrawal"), None)
    outcome = next((a for a in answers if a.who == "outcome"), None)
    found = [f"unclear answer {a}" for a in answers if a.status == 0 or a.status >= 500]
    if withdrawal is not None and withdrawal.status == 200:  # the withdrawal won: nothing may be granted
        if granted or request.claimed_at is not None or claimed_entries:
            found.append(
                f"withdrawn and granted: {[str(a) for a in granted]}, {claimed_entries} claim entries"
            )
        if request.status != RequestStatus.CANCELLED:
            found.append(f"withdrawn, but the request is {request.status}")
        found += [f"a claim of a withdrawn request answered {a}" for a in claims if a.code != "WRONG_STATE"]
        return found
    if withdrawal is not None and not (withdrawal.status == 409 and withdrawal.code == "WRONG_STATE"):
        found.append(f"the withdrawal of a claimed request answered {withdrawal}")
    if first_claim is not None:  # claimed before the race: nothing more may be granted
        if granted:
            found.append(f"a second grant: {[str(a) for a in granted]}")
        if claimed_entries != 1 or str(request.claim_id) != first_claim.json()["grant"]["claimId"]:
            found.append(f"the claim moved: {request.claim_id}, {claimed_entries} claim entries")
        if outcome is None or outcome.status != 200 or request.outcome_status != "succeeded":
            found.append(f"the outcome answered {outcome}, the request says {request.outcome_status!r}")
        allowed = {"OUTCOME_UNKNOWN", "ALREADY_CLAIMED"}
    else:
        if len(granted) != 1:
            found.append(f"{len(granted)} grants: {[str(a) for a in granted]}")
        if claimed_entries != 1 or request.claimed_at is None:
            found.append(f"{claimed_entries} claim entries, claimed at {request.claimed_at}")
        if len(granted) == 1:
            found += _token_problems(request_id, granted[0].body["grant"], request.claim_id)
        allowed = {"OUTCOME_UNKNOWN"}
    found += [
        f"a refused claim answered {a}"
        for a in claims
        if a.status != 200 and not (a.status == 409 and a.code in allowed)
    ]
    return found


def outcome_round(agent: Any, reviewer: Any, *, reporters: int) -> Round:
    """``reporters`` different outcome reports of one claimed execution at once: the first stands."""
    request_id = approved_request(agent, reviewer)
    path = f"/approval-requests/{request_id}"
    claimed = client_for(agent).post(f"{path}/claim", {}, format="json")
    assert claimed.status_code == 200, claimed.content
    reports = {
        f"report {i}": {
            "status": "failed" if i % 2 else "succeeded",
            "httpStatus": 200 + i,
            "summary": f"run {i}",
        }
        for i in range(reporters)
    }
    answers = race(
        {who: _poster(client_for(agent), f"{path}/outcome", body) for who, body in reports.items()}
    )
    judged = Round("outcomes", answers)
    request = ApprovalRequest.objects.get(pk=request_id)
    stood = [a for a in answers if a.status == 200]
    entries = AuditEntry.objects.filter(subject_id=request_id, verb="hitl.request.outcome").count()
    if len(stood) != 1 or entries != 1:
        judged.problems.append(f"{len(stood)} reports stood, {entries} outcome entries")
    elif request.outcome_http_status != reports[stood[0].who]["httpStatus"]:
        judged.problems.append(f"{stood[0].who} stood, the request says {request.outcome_http_status}")
    judged.problems += [f"a later report answered {a}" for a in answers if a.status not in (200, 409)]
    if len(stood) == 1:
        again = client_for(agent).post(f"{path}/outcome", reports[stood[0].who], format="json")
        if again.status_code != 200:
            judged.problems.append(f"the standing report sent again answered {again.status_code}")
    return judged


def filing_round(agent: Any, *, filers: int, variants: int, pinned: bool = False) -> Round:
    """``filers`` filings with one idempotency key at once, their bodies ``variants`` different ones."""
    key = f"race/{uuid.uuid4()}"
    bodies = {
        f"filer {i}": filing(key, reason=f"Refund over 100 EUR, variant {i % variants}", pinned=pinned)
        for i in range(filers)
    }
    answers = race(
        {who: _poster(client_for(agent), "/approval-requests", body) for who, body in bodies.items()}
    )
    judged = Round(f"filings ({variants} bodies)", answers)
    judged.problems = _filing_problems(agent, key, bodies, answers)
    return judged


def _filing_problems(agent: Any, key: str, bodies: dict[str, Any], answers: list[Answer]) -> list[str]:
    filed = list(ApprovalRequest.objects.filter(account=agent, idempotency_key=key))
    if len(filed) != 1:
        return [f"{len(filed)} requests filed for one key"]
    request = filed[0]
    found = []
    created = [a for a in answers if a.status == 201]
    if len(created) != 1:
        found.append(f"{len(created)} answers 201")
    winning_reason = request.reason
    for answer in answers:
        same_body = bodies[answer.who]["reason"] == winning_reason
        if same_body and not (answer.status in (200, 201) and answer.body.get("id") == str(request.pk)):
            found.append(f"the winning body answered {answer} ({str(answer.body)[:120]})")
        if not same_body and not (
            answer.status == 409
            and answer.code == "IDEMPOTENCY_CONFLICT"
            and answer.body.get("approvalRequestId") == str(request.pk)
        ):
            found.append(f"another body answered {answer} ({str(answer.body)[:120]})")
    pauses = Pause.objects.filter(subject_id=request.pk).count()
    opened = AuditEntry.objects.filter(subject_id=request.pk, verb="hitl.pause").count()
    if pauses != 1 or opened != 1 or request.pause_id is None:
        found.append(f"{pauses} pauses and {opened} pause entries for the request")
    return found
