"""The audit ledger under load: racing threads append to many chains, then the ledger is checked and tampered.

``run_load`` starts ``threads`` real threads on real PostgreSQL connections. Each does ``ops`` operations,
chosen at random: open a pause on a fresh conversation (``open_pause``: the ``hitl.pause`` entry), decide
a random open one (``decide_pause``), cancel one (``cancel_pending_pause``), or append a plain entry
(``append_audit_entry``: half of them to a few hot chains all threads share). Decides and cancels of one
pause race each other; the loser gets WrongState / False and writes nothing. ``check_ledger`` then
states what must hold: the chains verify (the service and ``manage.py hitl_audit_verify``), every
subject's sequences are 1..n with no gap or duplicate, every decision or cancel that won has exactly
one ``hitl.approval`` entry and every pause exactly one ``hitl.pause`` entry, and the plain appends are
all there. ``tamper_and_detect`` edits the ledger by raw SQL in five ways (as a superuser can, triggers
off) and checks that the command names the first bad sequence of each.

Shared by tests/approvals/test_audit_ledger_load.py (fast size) and bench/audit_ledger_load.py (full).
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from io import StringIO

from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, connections, transaction
from django.db.models import Count, Max, Min

from approvals.actors import Actor
from approvals.audit import GENESIS_HASH, append_audit_entry, verify_ledger
from approvals.decision_input import DecisionInput
from approvals.decisions import cancel_pending_pause, decide_pause
from approvals.models import AuditEntry, Engine, Pause, PauseKind, PauseStatus, SubjectType, Verdict
from approvals.pauses import open_pause
from common.errors import WrongState
from conversations.agents import create_agent, deploy_agent
from conversations.models import Conversation, ConversationState
from harnesses.factories import account_bot

LOAD_VERB = "hitl.load.note"
ENVIRONMENT = "production"


@dataclass
class LoadResult:
    threads: int
    ops_per_thread: int
    seconds: float = 0.0
    counts: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    subjects: list[uuid.UUID] = field(default_factory=list)

    @property
    def entries(self) -> int:
        return self.counts["pause"] + self.counts["decided"] + self.counts["cancelled"] + self.counts["note"]


def deployed_agent() -> tuple[uuid.UUID, int]:
    """The agent the conversations run on: a decision checks its version is still deployed."""
    row = create_agent(document=account_bot(), created_by=None)
    deploy_agent(agent_id=row.agent_id, version=row.version, environment=ENVIRONMENT)
    return row.agent_id, row.version


def run_load(*, threads: int, ops: int, seed_subjects: int = 8, seed: int = 16) -> LoadResult:
    """Run the racing threads; returns what they did (the ledger is checked by ``check_ledger``)."""
    load = _Load(threads=threads, ops=ops, seed_subjects=seed_subjects, seed=seed)
    started = time.monotonic()
    workers = [threading.Thread(target=load.worker, args=(n,)) for n in range(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(timeout=600)
    load.result.seconds = time.monotonic() - started
    if any(thread.is_alive() for thread in workers):
        load.result.errors.append("a worker thread did not finish within 600 s")
    load.result.subjects = load.opened + load.plain
    return load.result


class _Load:
    """What the threads share: the subjects opened so far, and the tally."""

    def __init__(self, *, threads: int, ops: int, seed_subjects: int, seed: int) -> None:
        self.agent_id, self.version = deployed_agent()
        self.result = LoadResult(threads=threads, ops_per_thread=ops)
        self.ops, self.seed = ops, seed
        self.opened: list[uuid.UUID] = []
        self.plain = [uuid.uuid4() for _ in range(seed_subjects)]  # subjects only plain appends reach
        self.guard = threading.Lock()
        self.barrier = threading.Barrier(threads)

    def worker(self, worker: int) -> None:
        rng = random.Random(self.seed * 1000 + worker)
        counts: Counter = Counter()
        try:
            self.barrier.wait(timeout=60)
            for index in range(self.ops):
                roll = rng.random()
                if roll < 0.25 or not self.opened:
                    counts[self.open_one()] += 1
                elif roll < 0.5:
                    counts[self.decide_one(rng, worker)] += 1
                elif roll < 0.65:
                    counts[self.cancel_one(rng, worker)] += 1
                else:
                    counts[self.note_one(rng, worker, index)] += 1
        except BaseException as error:  # reported by check_ledger, which fails
            with self.guard:
                self.result.errors.append(f"worker {worker}: {type(error).__name__}: {error}")
        finally:
            with self.guard:
                self.result.counts.update(counts)
            connections.close_all()

    def open_one(self) -> str:
        """A conversation awaiting a human and its pause, in one transaction, as the pipeline opens them."""
        with transaction.atomic():
            conversation = Conversation.objects.create(
                agent_id=self.agent_id,
                agent_version=self.version,
                environment=ENVIRONMENT,
                state=ConversationState.AWAITING_HUMAN,
            )
            open_pause(
                surface=Engine.REGULAR,
                kind=PauseKind.RULE,
                subject_type=SubjectType.CONVERSATION,
                subject_id=conversation.pk,
                owner_id=None,
                reason="ledger load",
                hitl_config=None,
                bookmark={"taskIndex": 0},
            )
        with self.guard:
            self.opened.append(conversation.pk)
        return "pause"

    def decide_one(self, rng: random.Random, worker: int) -> str:
        subject = rng.choice(self.opened)
        verdict = rng.choice([Verdict.APPROVED, Verdict.REJECTED])
        try:
            decide_pause(
                surface=Engine.REGULAR,
                subject_type=SubjectType.CONVERSATION,
                subject_id=subject,
                decision=DecisionInput(verdict=verdict, note=f"worker {worker} says {verdict}"),
                actor=Actor(name=f"load:approver-{worker}"),
            )
        except WrongState:
            return "lost"
        return "decided"

    def cancel_one(self, rng: random.Random, worker: int) -> str:
        subject = rng.choice(self.opened)
        pause = Pause.objects.filter(subject_id=subject, status=PauseStatus.PENDING).first()
        if pause is None:
            return "lost"
        won = cancel_pending_pause(pause=pause, actor=Actor(name=f"load:canceller-{worker}"))
        return "cancelled" if won else "lost"

    def note_one(self, rng: random.Random, worker: int, index: int) -> str:
        # Half to a few hot chains every thread appends to at once, half to the pauses' chains.
        subject = rng.choice(self.plain if rng.random() < 0.5 else self.opened)
        with transaction.atomic():
            append_audit_entry(
                subject_type=SubjectType.CONVERSATION,
                subject_id=subject,
                verb=LOAD_VERB,
                actor=f"load:worker-{worker}",
                note=f"note {index} of worker {worker}",
                detail={"worker": worker, "index": index, "ratio": rng.random()},
            )
        return "note"


def run_verify_command(*args: str) -> tuple[int, str]:
    """``manage.py hitl_audit_verify``: its exit code and everything it printed."""
    out = StringIO()
    try:
        call_command("hitl_audit_verify", *args, stdout=out)
    except CommandError as error:
        return error.returncode, out.getvalue() + str(error)
    return 0, out.getvalue()


def check_ledger(result: LoadResult) -> list[str]:
    """Every violated rule, as a sentence; an empty list means the ledger held up."""
    failures = list(result.errors)
    report = verify_ledger()
    failures += [f"verify_ledger: {problem}" for problem in report.problems[:10]]
    code, output = run_verify_command()
    if code != 0:
        failures.append(f"hitl_audit_verify exited {code}: {output.strip().splitlines()[-1]}")
    per_subject = (
        AuditEntry.objects.values("subject_type", "subject_id")
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
                f"subject {row['subject_id']}: {row['n']} entries, {row['distinct']} distinct sequences "
                f"{row['low']}..{row['high']} (not gap-free and unique)"
            )
    decisions = Counter(
        AuditEntry.objects.filter(verb="hitl.approval").values_list("pause_id", flat=True).order_by()
    )
    pauses_opened = Counter(
        AuditEntry.objects.filter(verb="hitl.pause").values_list("pause_id", flat=True).order_by()
    )
    for pause_id, status in Pause.objects.values_list("id", "status"):
        wanted = 0 if status == PauseStatus.PENDING else 1
        if decisions[pause_id] != wanted:
            failures.append(
                f"pause {pause_id} ({status}) has {decisions[pause_id]} decision entries, not {wanted}"
            )
        if pauses_opened[pause_id] != 1:
            failures.append(f"pause {pause_id} has {pauses_opened[pause_id]} hitl.pause entries, not 1")
    expected = {
        "hitl.pause": result.counts["pause"],
        "hitl.approval": result.counts["decided"] + result.counts["cancelled"],
        LOAD_VERB: result.counts["note"],
    }
    for verb, count in expected.items():
        stored = AuditEntry.objects.filter(verb=verb).count()
        if stored != count:
            failures.append(f"{stored} {verb} entries stored, but the threads' calls that won made {count}")
    return failures


def _tamper(sql: str, params: list) -> None:
    """Run SQL as a superuser can: triggers (and so the append-only guard) switched off."""
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        try:
            cursor.execute(sql, params)
        finally:
            cursor.execute("SET session_replication_role = DEFAULT")


def _row(subject: uuid.UUID, sequence: int) -> AuditEntry:
    return AuditEntry.objects.get(subject_id=subject, sequence=sequence)


def _update_note(subject: uuid.UUID, last: int) -> int:
    _tamper("UPDATE approvals_auditentry SET note = 'nothing to see' WHERE id = %s", [_row(subject, 2).id])
    return 2


def _delete_middle(subject: uuid.UUID, last: int) -> int:
    _tamper("DELETE FROM approvals_auditentry WHERE id = %s", [_row(subject, 2).id])
    return 3  # the gap shows at the entry after the deleted one


def _swap_sequences(subject: uuid.UUID, last: int) -> int:
    second, third = _row(subject, 2).id, _row(subject, 3).id
    _tamper("UPDATE approvals_auditentry SET sequence = 1000000 WHERE id = %s", [second])
    _tamper("UPDATE approvals_auditentry SET sequence = 2 WHERE id = %s", [third])
    _tamper("UPDATE approvals_auditentry SET sequence = 3 WHERE id = %s", [second])
    return 2


def _insert_forged(subject: uuid.UUID, last: int) -> int:
    """A forged entry appended after the last, linked to it and with the head moved to it, but hashed
    without the audit key (the forger does not have it)."""
    newest = _row(subject, last)
    forged_hash = "f" * 64
    _tamper(
        "INSERT INTO approvals_auditentry (subject_type, subject_id, sequence, conversation_id, pause_id, epoch, "
        "verb, actor, automated, verdict, note, detail, created_at, prev_hash, entry_hash) "
        "VALUES (%s, %s, %s, %s, NULL, NULL, 'hitl.approval', 'mallory', false, 'APPROVED', '', '{}', now(), %s, %s)",
        [newest.subject_type, subject, last + 1, subject, newest.entry_hash, forged_hash],
    )
    _tamper(
        "UPDATE approvals_audithead SET last_sequence = %s, last_hash = %s WHERE subject_id = %s",
        [last + 1, forged_hash, subject],
    )
    return last + 1


def _change_hash(subject: uuid.UUID, last: int) -> int:
    _tamper(
        "UPDATE approvals_auditentry SET entry_hash = %s WHERE id = %s", [GENESIS_HASH, _row(subject, 2).id]
    )
    return 2


TAMPERINGS = {
    "UPDATE a note": _update_note,
    "DELETE a middle row": _delete_middle,
    "swap two rows' sequence": _swap_sequences,
    "INSERT a forged row": _insert_forged,
    "change a hash": _change_hash,
}


def tamper_and_detect() -> list[tuple[str, bool, str]]:
    """Each tampering on its own chain (of three entries or more); per case: name, whether
    ``hitl_audit_verify`` exited non-zero naming that chain's first bad sequence first, and its first
    PROBLEM line."""
    chains = list(
        AuditEntry.objects.values("subject_id")
        .annotate(n=Count("id"))
        .filter(n__gte=3)
        .order_by("-n", "subject_id")
        .values_list("subject_id", "n")[: len(TAMPERINGS)]
    )
    if len(chains) < len(TAMPERINGS):
        raise AssertionError(
            f"only {len(chains)} chains of 3+ entries to tamper with; need {len(TAMPERINGS)}"
        )
    outcomes = []
    for (name, tampering), (subject, last) in zip(TAMPERINGS.items(), chains, strict=True):
        first_bad = tampering(subject, last)
        code, output = run_verify_command("--subject-id", str(subject))
        problems = [line for line in output.splitlines() if line.startswith("PROBLEM")]
        named = bool(problems) and f"{subject} #{first_bad}:" in problems[0]
        outcomes.append((name, code != 0 and named, problems[0] if problems else f"exit {code}, no problem"))
    return outcomes
