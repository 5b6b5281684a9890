"""The REST API under injected database faults: a client that retries, then the invariants.

``run_fault_load`` plays one client against the REST API (DRF's APIClient, token auth, real PostgreSQL):
``ops`` operations at random - start a conversation (a local agent whose rules pause on "delete my
account", and an agent whose scripted model calls a gated http tool on a loopback server), say "hello",
say what pauses on a rule or on a tool call, say to a paused conversation (409), approve or reject
(``resume``, with and without ``?wait``), cancel, end, fire an overdue pause's timer (the timers
service, as the drainer does) and the recovery sweep the drainer runs every few seconds. Every
operation runs inside ``DatabaseFaults.injected()`` (harnesses/database_faults.py): each statement fails
before it runs with ``before_rate``, each commit fails after it landed with ``after_rate``.

The client behaves as a real one: an answer it can act on (2xx, 4xx) ends the operation; a 5xx or an
exception means "did it happen?", so it re-reads the state through the API (the snapshot's steps, the
approval status) and retries only what did not happen. ``check_invariants`` then states what must hold
once the faults stop and recovery has swept (as the drainer does within a lease):

- each pause has at most one decision: its ``hitl.approval`` entries are its restores plus one when it
  is decided (none while pending), and its terminal state matches its conversation's;
- no conversation is stuck: none IN_PROGRESS or RESOLVING after recovery, none AWAITING_HUMAN without
  its one pending pause, none ERROR because of a database fault;
- no input consumed without an answer: a say the client was told was refused (409) left no step, one
  answered 200 left exactly one, one answered 5xx left at most one, and each say's input is stored at
  most once; every 5xx is problem JSON, and a database error is a 503;
- a gated tool call reached its server at most once, however often its pause was approved;
- the audit ledger verifies (``verify_ledger`` and ``hitl_audit_verify``) and every chain is gap-free.

Shared by tests/conversations/test_database_faults.py (fast size) and bench/db_faults.py (full size).
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pydoc import locate
from typing import Any

from django.db.models import Count, Max, Min
from django.test import override_settings
from django_q.models import OrmQ
from django_q.signing import SignedPackage
from rest_framework.test import APIClient

from approvals.audit import verify_ledger
from approvals.continuation_runs import ContinuationStillClaimed
from approvals.leases import lease_seconds
from approvals.models import AuditEntry, Pause, PauseStatus
from approvals.recovery import recover_expired_leases
from approvals.timers import fire_timeout
from conversations.models import Conversation, ConversationState, ConversationStep
from harnesses.agents import payments_agent
from harnesses.database_faults import DatabaseFaults
from harnesses.factories import account_bot, deployed_agent
from harnesses.ledger_load import run_verify_command
from harnesses.queue_drain import run_queued_tasks
from harnesses.users import client_for, make_user

S = ConversationState
MAX_ATTEMPTS = 12
TALKABLE = (S.READY, S.ERROR, S.EXECUTION_INTERRUPTED)


@dataclass
class FaultLoadResult:
    ops: int
    seed: int
    seconds: float = 0.0
    counts: Counter = field(default_factory=Counter)  # per operation kind and outcome
    says: list[dict[str, Any]] = field(default_factory=list)  # one per say attempt: input, status, steps
    statuses: Counter = field(default_factory=Counter)
    bad_answers: list[str] = field(default_factory=list)
    starts_answered: int = 0
    faults: Counter = field(default_factory=Counter)


class _UnhandledErrors(logging.Handler):
    """What the exception handler logged as unhandled (a 500): the exception and where it was raised."""

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            frames = [
                f for f in traceback.extract_tb(error.__traceback__) if "/site-packages/" not in f.filename
            ]
            where = f" at {frames[-1].filename.rsplit('/', 2)[-1]}:{frames[-1].lineno}" if frames else ""
            self.seen.append(f"{type(error).__name__}: {str(error).splitlines()[0][:160]}{where}")

    def drain(self) -> list[str]:
        seen, self.seen = self.seen, []
        return seen


_UNHANDLED = _UnhandledErrors()


class _Client:
    """One API client of one user, whose requests run with faults injected; it never raises."""

    def __init__(self, user: Any, faults: DatabaseFaults, result: FaultLoadResult) -> None:
        self.api: APIClient = client_for(user)
        self.api.raise_request_exception = False
        self.faults, self.result = faults, result

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        with self.faults.injected():
            response = (
                getattr(self.api, method)(path, body, format="json")
                if body is not None
                else (getattr(self.api, method)(path, format="json"))
            )
        status = response.status_code
        self.result.statuses[status] += 1
        try:
            payload = json.loads(response.content) if response.content else None
        except ValueError:
            payload = None
        if status >= 500 and (payload is None or "problem+json" not in response.get("Content-Type", "")):
            self.result.bad_answers.append(f"{method.upper()} {path}: {status} not problem JSON")
        if status >= 500 and payload is not None and payload.get("status") == 500:
            raised = "; ".join(_UNHANDLED.drain()) or payload.get("detail")
            self.result.bad_answers.append(f"{method.upper()} {path}: 500, not 503: {raised}")
        return status, payload

    def read(self, path: str) -> Any:
        """A GET the client repeats until it answers (a read changes nothing, so retrying is safe)."""
        for _ in range(MAX_ATTEMPTS * 4):
            status, payload = self.request("get", path)
            if status < 500:
                return payload
        raise AssertionError(f"GET {path} never answered")


class _Load:
    def __init__(
        self, *, ops: int, seed: int, before_rate: float, after_rate: float, tool_server: str
    ) -> None:
        self.rng = random.Random(seed)
        self.faults = DatabaseFaults(random.Random(seed + 1), before_rate=before_rate, after_rate=after_rate)
        self.result = FaultLoadResult(ops=ops, seed=seed)
        self.owner = _Client(make_user("fault-owner"), self.faults, self.result)
        self.approver = _Client(make_user("fault-approver", "approver"), self.faults, self.result)
        self.rule_agent = deployed_agent(account_bot())
        # A deadline on tool pauses too: a timer's decision on one is queued for the q-cluster (not quick).
        self.tool_agent = deployed_agent(
            payments_agent(
                tool_server, hitl_config={"approvalTimeout": "PT15M", "timeoutPolicy": "AUTO_REJECT"}
            )
        )
        self.conversations: dict[str, str] = {}  # conversation id -> agent id
        self.said = 0

    # operations ---------------------------------------------------------------------------------

    def run(self) -> None:
        kinds = [
            ("start", 2, self.start),
            ("say_hello", 3, self.say_hello),
            ("say_pause", 4, self.say_pause),
            ("say_to_paused", 1, self.say_to_paused),
            ("resume", 4, self.resume),
            ("cancel", 1, self.cancel),
            ("end", 1, self.end),
            ("timer", 1, self.timer),
            ("recovery", 1, self.recovery),
            ("worker", 1, self.worker),
        ]
        names, weights = [k[0] for k in kinds], [k[1] for k in kinds]
        operations = dict((k[0], k[2]) for k in kinds)
        for _ in range(self.result.ops):
            kind = "start" if len(self.conversations) < 2 else self.rng.choices(names, weights)[0]
            outcome = operations[kind]()
            self.result.counts[f"{kind}:{outcome}"] += 1
        self.result.faults = Counter(self.faults.counts)

    def start(self) -> str:
        agent = self.rng.choice([self.rule_agent, self.rule_agent, self.tool_agent])
        for attempt in range(MAX_ATTEMPTS):
            status, payload = self.owner.request("post", f"/agents/{agent}/start?environment=production", {})
            if status == 201:
                self.conversations[payload["conversationId"]] = agent
                self.result.starts_answered += 1
                return "started" if attempt == 0 else "started-after-retry"
            if status < 500:
                self.result.bad_answers.append(f"start answered {status}: {payload}")
                return "refused"
            # Nothing says whether it was created: the client starts again (a new conversation).
        return "gave-up"

    def _state(self, conversation: str) -> dict[str, Any]:
        return self.owner.read(f"/agents/{conversation}")

    def _pick(self, states: tuple[str, ...], agent: str | None = None) -> str | None:
        """A conversation in one of ``states``, read as the database has it (the harness's own view)."""
        candidates = [
            str(pk)
            for pk in Conversation.objects.filter(pk__in=list(self.conversations), state__in=states)
            .order_by("created_at")
            .values_list("pk", flat=True)
            if agent is None or self.conversations[str(pk)] == agent
        ]
        return self.rng.choice(candidates) if candidates else None

    def _say(self, conversation: str, text: str) -> str:
        """Say ``text`` (unique) until the client knows it was processed, or was refused."""
        for attempt in range(MAX_ATTEMPTS):
            before = _steps_with_input(conversation, text)
            count_before = ConversationStep.objects.filter(conversation_id=conversation).count()
            status, payload = self.owner.request("post", f"/agents/{conversation}", {"input": text})
            after = _steps_with_input(conversation, text)
            self.result.says.append(
                {
                    "conversation": conversation,
                    "input": text,
                    "status": status,
                    "new_steps": ConversationStep.objects.filter(conversation_id=conversation).count()
                    - count_before,
                    "consumed": after - before,
                    "state": payload.get("state") if isinstance(payload, dict) else None,
                }
            )
            if status == 200:
                return "answered" if attempt == 0 else "answered-after-retry"
            if status < 500:
                return f"refused-{status}"
            # Did it land? The snapshot's steps say (a real client looks for its input among them).
            snapshot = self._state(conversation)
            if any(step.get("input") == text for step in snapshot.get("steps") or []):
                return "landed-behind-an-error"
        return "gave-up"

    def say_hello(self) -> str:
        conversation = self._pick(TALKABLE)
        if conversation is None:
            return "none"
        self.said += 1
        text = (
            f"hello {self.said}" if self.conversations[conversation] == self.rule_agent else f"hi {self.said}"
        )
        return self._say(conversation, text)

    def say_pause(self) -> str:
        conversation = self._pick(TALKABLE)
        if conversation is None:
            return "none"
        self.said += 1
        if self.conversations[conversation] == self.rule_agent:
            return self._say(conversation, f"please delete my account {self.said}")
        return self._say(conversation, f"transfer 100 to bob, request {self.said}")

    def say_to_paused(self) -> str:
        conversation = self._pick((S.AWAITING_HUMAN,))
        if conversation is None:
            return "none"
        self.said += 1
        return self._say(conversation, f"hello while paused {self.said}")

    def _decided(self, conversation: str, pause_id: str) -> bool:
        status = self.approver.read(f"/agents/{conversation}/approval-status")
        return status.get("pauseId") != pause_id

    def resume(self) -> str:
        conversation = self._pick((S.AWAITING_HUMAN,))
        if conversation is None:
            return "none"
        pause_id = str(_pending_pause(conversation).pk)
        verdict = self.rng.choice(["APPROVED", "APPROVED", "REJECTED"])
        tool = self.conversations[conversation] == self.tool_agent
        wait = "?wait=5" if tool or self.rng.random() < 0.5 else ""  # a tool continuation is never local
        for attempt in range(MAX_ATTEMPTS):
            status, payload = self.approver.request(
                "post", f"/agents/{conversation}/resume{wait}", {"verdict": verdict, "note": "fault load"}
            )
            if status == 200:
                return "decided" if attempt == 0 else "decided-after-retry"
            if status < 500:
                return f"refused-{status}"
            if self._decided(conversation, pause_id):
                return "decided-behind-an-error"
        return "gave-up"

    def cancel(self) -> str:
        conversation = self._pick((S.AWAITING_HUMAN,))
        if conversation is None:
            return "none"
        pause_id = str(_pending_pause(conversation).pk)
        for attempt in range(MAX_ATTEMPTS):
            status, _ = self.owner.request("post", f"/agents/{conversation}/cancel", {})
            if status in (200, 202):
                return "cancelled" if attempt == 0 else "cancelled-after-retry"
            if status < 500:
                return f"refused-{status}"
            if self._decided(conversation, pause_id):
                return "cancelled-behind-an-error"
        return "gave-up"

    def end(self) -> str:
        if self.rng.random() < 0.5:  # ending is rare: most conversations should stay in play
            return "skipped"
        conversation = self._pick((S.READY, S.AWAITING_HUMAN, S.ERROR, S.EXECUTION_INTERRUPTED))
        if conversation is None:
            return "none"
        for attempt in range(MAX_ATTEMPTS):
            status, _ = self.owner.request("post", f"/agents/{conversation}/endConversation", {})
            if status == 200:
                return "ended" if attempt == 0 else "ended-after-retry"
            if status < 500:
                return f"refused-{status}"
            if self._state(conversation).get("state") == S.ENDED:
                return "ended-behind-an-error"
        return "gave-up"

    def timer(self) -> str:
        """The timers service fires an overdue pause (its deadline moved into the past by the clock)."""
        due = list(
            Pause.objects.filter(
                subject_id__in=list(self.conversations), status=PauseStatus.PENDING, due_at__isnull=False
            ).order_by("paused_at", "id")
        )
        if not due:
            return "none"
        pause = self.rng.choice(due)
        now = pause.due_at + timedelta(seconds=1)
        for attempt in range(MAX_ATTEMPTS):
            try:
                with self.faults.injected():
                    fired = fire_timeout(str(pause.pk), now=now)
            except Exception:  # the drainer logs and tries again on its next pass
                continue
            return f"fired-{fired}" if attempt == 0 else f"fired-{fired}-after-retry"
        return "gave-up"

    def worker(self) -> str:
        """A q-cluster worker takes each queued task (a continuation a timer queued); one that fails is
        delivered again later (django-q2's at-least-once delivery), so its row stays."""
        ran = failed = 0
        for row in OrmQ.objects.order_by("id"):
            task = SignedPackage.loads(row.payload)
            try:
                with self.faults.injected():
                    locate(task["func"])(*task.get("args", ()), **task.get("kwargs", {}))
            except Exception:
                failed += 1
                continue
            row.delete()
            ran += 1
        return f"ran-{ran}-failed-{failed}" if ran or failed else "nothing"

    def recovery(self) -> str:
        """The drainer's lease sweep: what a lost commit or a failed turn left claimed is recovered once its
        lease (``HITL_CONTINUATION_LEASE_SECONDS``, one second in this harness) ran out."""
        try:
            with self.faults.injected():
                report = recover_expired_leases()
        except Exception:
            return "failed"
        return "recovered" if any(report.values()) else "nothing"


def _steps_with_input(conversation: str, text: str) -> int:
    return ConversationStep.objects.filter(conversation_id=conversation, input=text).count()


def _pending_pause(conversation: str) -> Pause:
    return Pause.objects.get(subject_id=conversation, status=PauseStatus.PENDING)


@contextmanager
def transfer_server() -> Iterator[tuple[str, list[str]]]:
    """A real HTTP server on loopback for the gated tool: its URL, and the paths it received."""
    received: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # the http.server hook
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            received.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "11")
            self.end_headers()
            self.wfile.write(b'{"ok":true}')

        do_GET = do_POST

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def run_fault_load(
    *, ops: int, seed: int, tool_server: str, before_rate: float = 0.05, after_rate: float = 0.05
) -> FaultLoadResult:
    """The load, then the q-cluster's and the drainer's work once the faults stop. Leases last one second
    here, so what a fault left claimed is recovered within the run, as it would be within a lease."""
    problems_log = logging.getLogger("common.problems")
    problems_log.addHandler(_UNHANDLED)
    try:
        return _run_fault_load(
            ops=ops, seed=seed, tool_server=tool_server, before_rate=before_rate, after_rate=after_rate
        )
    finally:
        problems_log.removeHandler(_UNHANDLED)


def _run_fault_load(
    *, ops: int, seed: int, tool_server: str, before_rate: float, after_rate: float
) -> FaultLoadResult:
    with override_settings(HITL_CONTINUATION_LEASE_SECONDS=1, HITL_LEASE_RENEW_SECONDS=0.3):
        load = _Load(
            ops=ops, seed=seed, before_rate=before_rate, after_rate=after_rate, tool_server=tool_server
        )
        started = time.monotonic()
        load.run()
        try:
            run_queued_tasks()
        except ContinuationStillClaimed:
            # a fault left its claim alive: django-q2 delivers the task again after its retry time, by when
            # the lease has run out and the recovery below has put the pause back for a reviewer
            pass
        time.sleep(lease_seconds() + 0.2)
        recover_expired_leases()
        run_queued_tasks()
    load.result.seconds = time.monotonic() - started
    return load.result


def check_invariants(result: FaultLoadResult, *, transfers: int) -> list[str]:
    """Every violated rule, as a sentence; an empty list means the service held up under the faults.
    ``transfers``: how many requests the gated tool's server received."""
    return [failure for failures in invariants(result, transfers=transfers).values() for failure in failures]


def invariants(result: FaultLoadResult, *, transfers: int) -> dict[str, list[str]]:
    """Each invariant by name, with the sentences that violate it (empty: it holds)."""
    return {
        "every 5xx is problem JSON, a database error a 503": list(result.bad_answers),
        "one decision per pause, in a terminal state that matches its conversation": _pause_failures(),
        "no conversation stuck, none ERROR because of the database": _conversation_failures(),
        "no input consumed behind a refusal, none stored twice": _say_failures(result),
        "a gated tool call sent at most once": _tool_failures(transfers),
        "the ledger verifies and every chain is gap-free": _ledger_failures(),
    }


def _tool_failures(transfers: int) -> list[str]:
    """Each gated call (one per tool pause here) reaches its server at most once, however many times its
    pause was approved, restored and approved again (the execution journal's claim)."""
    approved = (
        AuditEntry.objects.filter(
            verb="hitl.approval",
            verdict="APPROVED",
            pause_id__in=Pause.objects.filter(kind="TOOL_CALL").values("id"),
        )
        .values("pause_id")
        .distinct()
        .count()
    )
    if transfers > approved:
        return [f"{transfers} gated tool requests reached the server for {approved} approved gated calls"]
    return []


def _ledger_failures() -> list[str]:
    failures = [f"verify_ledger: {problem}" for problem in verify_ledger().problems[:10]]
    code, output = run_verify_command()
    if code != 0:
        failures.append(f"hitl_audit_verify exited {code}: {output.strip().splitlines()[-1]}")
    per_subject = (
        AuditEntry.objects.values("subject_id")
        .annotate(
            n=Count("id"),
            distinct=Count("sequence", distinct=True),
            low=Min("sequence"),
            high=Max("sequence"),
        )
        .order_by()
    )
    for row in per_subject:
        if not (row["low"] == 1 and row["high"] == row["n"] == row["distinct"]):
            failures.append(
                f"subject {row['subject_id']}: sequences {row['low']}..{row['high']}, {row['n']} entries"
            )
    return failures


def summary(result: FaultLoadResult, *, transfers: int) -> list[str]:
    """What the run did and each invariant's result, as lines to print."""
    faults = result.faults
    retried = sum(n for outcome, n in result.counts.items() if "after-retry" in outcome)
    behind = sum(n for outcome, n in result.counts.items() if "behind-an-error" in outcome)
    lines = [
        f"load: {result.ops} operations (seed {result.seed}) in {result.seconds:.1f} s; "
        f"{faults['statements']} statements, {faults['commits']} commits",
        f"faults: {faults['before']} before a statement, {faults['after']} after a commit landed",
        f"client: {retried} operations succeeded on a retry, {behind} had landed behind an error "
        f"(found by re-reading, not retried); answers {dict(sorted(result.statuses.items()))}",
        "operations: " + ", ".join(f"{name} {n}" for name, n in sorted(result.counts.items())),
        "pauses: "
        + ", ".join(
            f"{kind} {status} {n}"
            for (kind, status), n in sorted(Counter(Pause.objects.values_list("kind", "status")).items())
        )
        + f"; gated tool requests received {transfers}",
        "conversations: "
        + ", ".join(
            f"{state} {n}"
            for state, n in sorted(Counter(Conversation.objects.values_list("state", flat=True)).items())
        ),
    ]
    for name, failures in invariants(result, transfers=transfers).items():
        lines.append(f"invariant {name}: {'holds' if not failures else f'{len(failures)} VIOLATIONS'}")
        lines += [f"  FAIL {failure}" for failure in failures[:10]]
    return lines


def _pause_failures() -> list[str]:
    failures = []
    entries = Counter(AuditEntry.objects.values_list("pause_id", "verb").order_by())
    states = dict(Conversation.objects.values_list("pk", "state"))
    for pause_id, status, subject in Pause.objects.values_list("id", "status", "subject_id"):
        decisions, restores = entries[(pause_id, "hitl.approval")], entries[(pause_id, "hitl.restored")]
        wanted = restores + (0 if status == PauseStatus.PENDING else 1)
        if decisions != wanted:
            failures.append(
                f"pause {pause_id} ({status}, restored {restores}x) has {decisions} decision entries, not {wanted}"
            )
        if entries[(pause_id, "hitl.pause")] != 1:
            failures.append(f"pause {pause_id} has {entries[(pause_id, 'hitl.pause')]} hitl.pause entries")
        if status == PauseStatus.RESOLVING:
            stuck = Pause.objects.filter(pk=pause_id).values(
                "kind", "lease_until", "decided_by", "cancel_requested_at"
            )[0]
            failures.append(
                f"pause {pause_id} still RESOLVING after recovery (conversation {states[subject]}): {stuck}"
            )
        if status == PauseStatus.PENDING and states[subject] != S.AWAITING_HUMAN:
            failures.append(f"pause {pause_id} PENDING but its conversation is {states[subject]}")
    return failures


def _conversation_failures() -> list[str]:
    failures = []
    pending = Counter(Pause.objects.filter(status=PauseStatus.PENDING).values_list("subject_id", flat=True))
    for pk, state in Conversation.objects.values_list("pk", "state"):
        if state == S.IN_PROGRESS:
            stuck = Conversation.objects.filter(pk=pk).values(
                "turn_alive_until", "turn_started_at", "cancel_requested_at"
            )[0]
            failures.append(f"conversation {pk} stuck IN_PROGRESS after recovery: {stuck}")
        if state == S.AWAITING_HUMAN and pending[pk] != 1:
            failures.append(f"conversation {pk} AWAITING_HUMAN with {pending[pk]} pending pauses")
    for conversation, index, error in ConversationStep.objects.filter(data__has_key="error").values_list(
        "conversation_id", "index", "data__error"
    ):
        if "OperationalError" in str(error) or "InjectedFault" in str(error) or "InternalError" in str(error):
            failures.append(
                f"conversation {conversation} step {index}: a database fault recorded as a failed turn: {error}"
            )
    return failures


def _say_failures(result: FaultLoadResult) -> list[str]:
    failures = []
    for say in result.says:
        where = f"say {say['input']!r} to {say['conversation']}"
        if say["status"] == 200 and say["consumed"] != 1:
            failures.append(f"{where}: answered 200 but {say['consumed']} steps hold its input")
        if 400 <= say["status"] < 500 and say["consumed"] != 0:
            failures.append(f"{where}: answered {say['status']} (not consumed) but its input was stored")
        if say["status"] >= 500 and say["consumed"] > 1:
            failures.append(f"{where}: answered {say['status']} and stored {say['consumed']} times")
        if say["status"] == 200 and say["state"] == S.ERROR:
            failures.append(f"{where}: answered 200 with state ERROR (a database fault made a failed turn)")
    stored = Counter(
        ConversationStep.objects.exclude(input="").values_list("conversation_id", "input").order_by()
    )
    for (conversation, text), n in stored.items():
        if n > 1:
            failures.append(f"input {text!r} stored {n} times in {conversation}")
    return failures
