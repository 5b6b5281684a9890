"""Timers at least once, decisions exactly once (docs/reliability.md, R2).

Two timer q-clusters (``Q_CLUSTER_NAME=hitl-timers manage.py qcluster``) and a work cluster run as real
processes, each in its own process group, on the test database with the ORM broker. N pauses (1:1
conversations and, every fifth, a group discussion's; the three finite policies in turn) are opened
while the clusters start, then given deadlines 40 ms apart (the deadline is data: ``Pause.due_at``).
Each pause's fire task (``approvals.timers.fire_timeout``) is queued three times on the timer queue of the
ORM broker, each copy becoming deliverable at a random moment in the 0.25 s after the deadline (its
``lock``, as when django-q2 redelivers a task whose lease ran out), so the copies are taken by both
clusters and race each other and the drainer, which fires the pause anyway, while reviewer threads
approve, reject or cancel a random subset over REST (in this process) from 0.5 s before to 0.3 s after
the deadline.

Then, from the database: every pause has exactly one terminal decision and exactly one ``hitl.approval``
entry; a pause a reviewer's request won (200) is decided by that reviewer, and every other pause by
``system:timeout`` with its policy's verdict, at or after its deadline and within ``LATENESS_LIMIT`` of
it (none is left pending); at most one of its fires decided it and every other fire was a no-op; each
reviewer request that lost got 409 (or, cancelling a running turn, 202); no continuation failed (a
decision's continuation is not lost to the race); the ledger verifies.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest
from django.conf import settings
from django.db import connections, transaction
from django.utils import timezone
from django_q.models import OrmQ, Task
from django_q.tasks import async_task

from approvals.audit import verify_ledger
from approvals.models import AuditEntry, Pause, PauseStatus
from harnesses.clusters import Clusters, process_group_of
from harnesses.factories import account_bot, deployed_agent, paused_conversation
from harnesses.live_stack import LiveStack, ServerProcess, database_url, eventually
from harnesses.members import answering, discuss, group
from harnesses.users import client_for, make_user

pytestmark = pytest.mark.django_db(transaction=True)

FIRE_FUNC = "harnesses.timer_race_tasks.fire_and_report"
FIRE_GROUP = "timer-race-fire"
POLICY_VERDICT = {"AUTO_APPROVE": "APPROVED", "AUTO_REJECT": "REJECTED", "ABORT": "CANCELLED"}
GROUP_EVERY = 5  # every fifth pause is a group discussion's
PHASES = [
    {"name": "Opinions", "type": "OPINION", "requiresApproval": True},
    {"name": "Decision", "type": "SYNTHESIS"},
]
LEAD_SECONDS = 1.5  # the first deadline, counted from when the clusters run
SPACING_SECONDS = 0.04  # between two deadlines
HUMAN_SHARE = 0.6  # of the pauses get a reviewer's request ...
SECOND_HUMAN_SHARE = 0.2  # ... and of those, a second one by the other reviewer
HUMAN_WINDOW = (-0.5, 0.3)  # seconds around the deadline
REVIEWER_THREADS = 6
FIRE_SPREAD = 0.25  # seconds after the deadline over which a pause's fire copies become deliverable
LATENESS_LIMIT = 10.0  # seconds; the drainer polls 4 times a second, the rest is a loaded machine
CLUSTER_ENV = {"HITL_TIMER_DRAIN_SECONDS": "3"}  # the drainer hands over (to either cluster) every 3 s


@dataclass
class Racer:
    """One paused subject and what the test set up for it."""

    index: int
    kind: str  # "conversation" or "discussion"
    policy: str
    subject_id: str
    group_id: str | None
    pause_id: str = ""
    deadline: datetime | None = None
    requests: list[Request] = field(default_factory=list)
    fire_results: list[str] = field(default_factory=list)  # what each fire task returned

    @property
    def where(self) -> str:
        return f"{self.kind} pause {self.pause_id} ({self.policy})"


@dataclass
class Request:
    """A reviewer's request racing the timer, and how it ended."""

    racer: Racer
    at: float  # wall-clock time.time()
    who: str  # "approver" (approve or reject) or "alice" (the owner: cancel)
    action: str  # APPROVED, REJECTED or CANCEL
    status: int | None = None
    won: bool = False
    answer: str = ""
    sent_at: float = 0.0

    @property
    def verdict(self) -> str:
        return "CANCELLED" if self.action == "CANCEL" else self.action


@dataclass
class Outcome:
    figure: str
    problems: list[str] = field(default_factory=list)


def _cluster_env() -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "hitl_project.settings.test",
        "DATABASE_URL": database_url(),
        "HITL_Q_SYNC": "false",
        "HITL_Q_SAVE_LIMIT": "0",  # keep every task's result: the fires' results are counted
        "PYTHONUNBUFFERED": "1",
        **CLUSTER_ENV,
    }


def _spawn(stack: LiveStack, name: str, cluster: str | None, **extra: str) -> ServerProcess:
    return ServerProcess.spawn(
        name,
        [sys.executable, "manage.py", "qcluster"],
        env={**stack.env, **extra},
        log_dir=stack.log_dir,
        cluster=cluster,
    )


def _open_pauses(count: int, owner) -> list[Racer]:
    """``count`` pending pauses of alice's, with a deadline far away (moved close once the clusters run)."""
    far = {"approvalTimeout": "PT10M"}
    agents = {
        policy: deployed_agent(account_bot(hitlConfig={"timeoutPolicy": policy, **far}))
        for policy in POLICY_VERDICT
    }
    member = answering("pat", "Ship it.")
    groups = {
        policy: group([(member, "Optimist")], PHASES, hitlConfig={"timeoutPolicy": policy, **far})
        for policy in POLICY_VERDICT
    }
    policies = list(POLICY_VERDICT)
    racers = []
    for index in range(count):
        policy = policies[index % len(policies)]
        if index % GROUP_EVERY == GROUP_EVERY - 1:
            body = discuss(owner, groups[policy])
            assert body["state"] == "AWAITING_APPROVAL", body
            racers.append(Racer(index, "discussion", policy, body["discussionId"], groups[policy]))
        else:
            racers.append(
                Racer(index, "conversation", policy, paused_conversation(owner, agents[policy]), None)
            )
    pauses = dict(
        Pause.objects.filter(subject_id__in=[r.subject_id for r in racers]).values_list("subject_id", "id")
    )
    for racer in racers:
        racer.pause_id = str(pauses[uuid.UUID(racer.subject_id)])
    return racers


def _set_deadlines(racers: list[Racer]) -> None:
    first = timezone.now() + timedelta(seconds=LEAD_SECONDS)
    with transaction.atomic():
        for racer in racers:
            racer.deadline = first + timedelta(seconds=racer.index * SPACING_SECONDS)
            assert Pause.objects.filter(pk=racer.pause_id, status=PauseStatus.PENDING).update(
                due_at=racer.deadline
            )


def _plan_requests(racers: list[Racer], rng: random.Random) -> list[Request]:
    requests = []
    for racer in racers:
        if rng.random() >= HUMAN_SHARE:
            continue
        kinds = [("approver", rng.choice(["APPROVED", "REJECTED"])), ("alice", "CANCEL")]
        rng.shuffle(kinds)
        chosen = kinds if rng.random() < SECOND_HUMAN_SHARE else kinds[:1]
        for who, action in chosen:
            at = racer.deadline.timestamp() + rng.uniform(*HUMAN_WINDOW)
            requests.append(Request(racer=racer, at=at, who=who, action=action))
    return sorted(requests, key=lambda r: r.at)


def _send(request: Request, client) -> None:
    racer = request.racer
    request.sent_at = time.time()
    if racer.kind == "conversation":
        if request.action == "CANCEL":
            response = client.post(f"/agents/{racer.subject_id}/cancel")
            request.won, allowed = response.status_code == 200, {200, 202, 409}
        else:
            response = client.post(
                f"/agents/{racer.subject_id}/resume", {"verdict": request.action}, format="json"
            )
            request.won, allowed = response.status_code == 200, {200, 409}
    else:
        base = f"/groups/{racer.group_id}/conversations/{racer.subject_id}"
        if request.action == "CANCEL":
            response = client.post(f"{base}/cancel")
            # 200 also answers a cancel of a discussion already running (the timer's continuation)
            request.won = response.status_code == 200 and not response.json()["cancelRequested"]
            allowed = {200, 409}
        else:
            response = client.post(
                f"{base}/approve?wait=60", {"decision": {"verdict": request.action}}, format="json"
            )
            request.won, allowed = response.status_code in (200, 202), {200, 202, 409}
    request.status = response.status_code
    if response.status_code not in allowed:
        request.answer = response.content.decode(errors="replace")[:300]


def _run_reviewers(requests: list[Request], users: dict, errors: list[str]) -> list[threading.Thread]:
    """``REVIEWER_THREADS`` threads sending the requests in time order, each at its time."""
    lock = threading.Lock()
    queue = list(requests)

    def reviewer() -> None:
        clients = {who: client_for(user) for who, user in users.items()}
        try:
            while True:
                with lock:
                    if not queue:
                        return
                    request = queue.pop(0)
                time.sleep(max(0.0, request.at - time.time()))
                try:
                    _send(request, clients[request.who])
                except Exception as exc:  # reported with the problems
                    errors.append(f"{request.who} {request.action} {request.racer.subject_id}: {exc!r}")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=reviewer, name=f"reviewer-{i}") for i in range(REVIEWER_THREADS)]
    for thread in threads:
        thread.start()
    return threads


def _queue_fires(racers: list[Racer], fires: int, rng: random.Random) -> None:
    """Queue each pause's fire ``fires`` times on the timer queue, each copy deliverable from a moment in
    the ``FIRE_SPREAD`` after the deadline: a row of the ORM broker is taken once its ``lock`` has passed,
    which is how django-q2 delivers a task again after a lease ran out."""
    timers = settings.HITL_TIMER_CLUSTER
    due: dict[str, datetime] = {}
    with transaction.atomic():  # the clusters see the copies only with their delivery times
        for racer in racers:
            for copy in range(fires):
                task_id = async_task(
                    FIRE_FUNC,
                    racer.pause_id,
                    task_name=f"race-fire-{racer.pause_id}-{copy}",
                    group=FIRE_GROUP,
                    cluster=timers,
                )
                due[task_id] = racer.deadline + timedelta(seconds=rng.uniform(0, FIRE_SPREAD))
        rows = [row for row in OrmQ.objects.filter(key=timers) if row.task_id() in due]
        assert len(rows) == len(due)
        for row in rows:
            OrmQ.objects.filter(pk=row.pk).update(lock=due[row.task_id()])


def race_timers(pauses: int, fires: int, db_blocker, log_dir, *, seed: int | None = None) -> Outcome:
    """The harness: returns the figure and every broken rule (empty: the guarantee held)."""
    started = time.monotonic()
    seed = random.randrange(1 << 30) if seed is None else seed
    rng = random.Random(seed)
    stack = LiveStack(env=_cluster_env(), log_dir=log_dir, db_blocker=db_blocker)
    clusters = Clusters(stack=stack)
    timers = settings.HITL_TIMER_CLUSTER
    errors: list[str] = []
    try:
        # started first: their start overlaps opening the pauses
        first = _spawn(stack, "qcluster-timers-a", timers)
        second = _spawn(stack, "qcluster-timers-b", timers)
        work = _spawn(stack, "qcluster-work", None, HITL_Q_WORKERS="1")
        clusters.started += [first, second, work]
        users = {"alice": make_user("alice"), "approver": make_user("approver", "approver")}
        racers = _open_pauses(pauses, client_for(users["alice"]))
        for process in clusters.started:
            clusters.wait_working(process)
        ready = time.monotonic()

        _set_deadlines(racers)
        _queue_fires(racers, fires, rng)
        requests = _plan_requests(racers, rng)
        threads = _run_reviewers(requests, users, errors)
        for thread in threads:
            thread.join(timeout=120)
        ids = [r.pause_id for r in racers]

        def settled() -> bool:
            open_ = Pause.objects.filter(pk__in=ids, status__in=[PauseStatus.PENDING, PauseStatus.RESOLVING])
            return not open_.exists() and Task.objects.filter(group=FIRE_GROUP).count() == pauses * fires

        eventually(
            settled, timeout=60 + pauses * 0.2, interval=0.2, what="every pause decided, every fire run"
        )
        raced = time.monotonic()
        fired = list(Task.objects.filter(group=FIRE_GROUP).values_list("name", "success", "result"))
        cluster_of = {process.popen.pid: process.name for process in (first, second)}
        ran_on = Counter(
            cluster_of.get(process_group_of(result["pid"]) or -1, "?") if success else "failed"
            for _, success, result in fired
        )
        errors += [
            f"{process.name} ran none of the {len(fired)} fires: the duplicates did not reach both clusters"
            for process in (first, second)
            if not ran_on[process.name]
        ]
    except BaseException:
        print(clusters.output())  # what the q-clusters wrote, beside the failure
        raise
    finally:
        clusters.stop_all()
    outcome = _judge(racers, requests, fired, errors)
    _figure(outcome, racers, requests, fired, ran_on, seed, fires, ready - started, raced - ready)
    return outcome


def _judge(racers: list[Racer], requests: list[Request], fired: list, errors: list[str]) -> Outcome:
    outcome = Outcome(figure="", problems=list(errors))
    by_id = {racer.pause_id: racer for racer in racers}
    for name, success, result in fired:
        if not success:
            outcome.problems.append(f"fire {name} failed: {str(result)[:300]}")
        else:
            by_id[name.removeprefix("race-fire-").rsplit("-", 1)[0]].fire_results.append(result["result"])
    for request in requests:
        request.racer.requests.append(request)
        if request.answer:
            outcome.problems.append(
                f"{request.who} {request.action} on {request.racer.kind} {request.racer.subject_id}: "
                f"{request.status} {request.answer}"
            )
    pauses = {str(p.pk): p for p in Pause.objects.filter(pk__in=list(by_id))}
    entries: dict[str, list[AuditEntry]] = {pause_id: [] for pause_id in by_id}
    for entry in AuditEntry.objects.filter(pause_id__in=list(by_id), verb="hitl.approval"):
        entries[str(entry.pause_id)].append(entry)
    for racer in racers:
        pause = pauses[racer.pause_id]
        outcome.problems += _decision_problems(racer, pause, entries[racer.pause_id])
        outcome.problems += _winner_problems(racer, pause)
    restored = AuditEntry.objects.filter(pause_id__in=list(by_id), verb="hitl.restored").count()
    if restored:
        outcome.problems.append(f"{restored} pauses were restored (a decision undone): nothing here should")
    for failed in AuditEntry.objects.filter(pause_id__in=list(by_id), verb="hitl.continuation.failed"):
        outcome.problems.append(
            f"the continuation of pause {failed.pause_id} failed: {str(failed.detail)[:300]}"
        )
    outcome.problems += [f"ledger: {problem}" for problem in verify_ledger().problems[:10]]
    return outcome


def _decision_problems(racer: Racer, pause: Pause, decisions: list[AuditEntry]) -> list[str]:
    """Exactly one terminal decision and one decision entry, saying the same."""
    where = racer.where
    problems = []
    if pause.status not in (PauseStatus.RESOLVED, PauseStatus.CANCELLED):
        problems.append(f"{where}: left {pause.status}")
    if len(decisions) != 1:
        problems.append(
            f"{where}: {len(decisions)} decision entries "
            f"{[(e.actor, e.verdict, e.created_at.isoformat()) for e in decisions]}"
        )
    problems += [
        f"{where}: audited {e.actor} {e.verdict}, the pause says {pause.decided_by} {pause.verdict}"
        for e in decisions[:1]
        if (e.actor, e.verdict) != (pause.decided_by, pause.verdict)
    ]
    problems += [
        f"{where}: a fire returned {result!r}"
        for result in racer.fire_results
        if result not in ("no-op", POLICY_VERDICT[racer.policy])
    ]
    return problems


def _winner_problems(racer: Racer, pause: Pause) -> list[str]:
    """The reviewer whose request won decided it; without one, the timeout did, once, after the deadline."""
    where = racer.where
    won = [request for request in racer.requests if request.won]
    deciding_fires = [result for result in racer.fire_results if result != "no-op"]
    if len(won) > 1:
        return [f"{where}: {len(won)} reviewer requests won: {[(r.who, r.action) for r in won]}"]
    if won:
        request = won[0]
        problems = []
        if (pause.decided_by, pause.verdict) != (request.who, request.verdict):
            problems.append(
                f"{where}: {request.who}'s {request.action} got {request.status}, but the pause was "
                f"decided {pause.verdict} by {pause.decided_by}"
            )
        if deciding_fires:
            problems.append(f"{where}: a reviewer won and a fire decided too: {deciding_fires}")
        return problems
    if (pause.decided_by, pause.verdict) != ("system:timeout", POLICY_VERDICT[racer.policy]):
        return [f"{where}: no reviewer won, but it was decided {pause.verdict} by {pause.decided_by}"]
    if len(deciding_fires) > 1:
        return [f"{where}: {len(deciding_fires)} fires decided: {deciding_fires}"]
    late = (pause.decided_at - racer.deadline).total_seconds()
    if not 0 <= late <= LATENESS_LIMIT:
        return [f"{where}: the timeout decided {late:.3f} s after its deadline"]
    return []


def _figure(outcome, racers, requests, fired, ran_on, seed, fires, startup, race) -> None:
    pauses = Pause.objects.filter(pk__in=[r.pause_id for r in racers])
    decided = Counter(("timeout" if p.decided_by == "system:timeout" else "human", p.verdict) for p in pauses)
    humans = sum(n for (who, _), n in decided.items() if who == "human")
    timeouts = sum(n for (who, _), n in decided.items() if who == "timeout")
    results = Counter(result["result"] for _, success, result in fired if success)
    no_ops = results.pop("no-op", 0)
    deciding = sum(results.values())
    entries = AuditEntry.objects.filter(pause_id__in=[r.pause_id for r in racers], verb="hitl.approval")
    per_pause = Counter(entries.values_list("pause_id", flat=True))
    deadlines = {r.pause_id: r.deadline for r in racers}
    by_fire = {
        name.removeprefix("race-fire-").rsplit("-", 1)[0]
        for name, success, result in fired
        if success and result["result"] != "no-op"
    }
    lateness: dict[str, list[float]] = {"drainer": [], "fire task": []}
    for p in pauses:
        if p.decided_by == "system:timeout" and p.decided_at is not None:
            late = (p.decided_at - deadlines[str(p.pk)]).total_seconds()
            lateness["fire task" if str(p.pk) in by_fire else "drainer"].append(late)
    failed = AuditEntry.objects.filter(pause_id__in=deadlines, verb="hitl.continuation.failed").count()
    lost = Counter(r.status for r in requests if not r.won)
    kinds = Counter(r.kind for r in racers)
    outcome.figure = (
        f"timer races: {len(racers)} pauses ({kinds['conversation']} conversations, "
        f"{kinds['discussion']} discussions) x {fires} fires; seed {seed}\n"
        f"  decisions: {sum(per_pause.values())} entries for {len(racers)} pauses, "
        f"pauses with != 1 decision: {sum(1 for r in racers if per_pause[uuid.UUID(r.pause_id)] != 1)}\n"
        f"  by winner: reviewers {humans} ({_verdicts(decided, 'human')}), "
        f"timeout {timeouts} ({_verdicts(decided, 'timeout')})\n"
        f"  reviewer requests: {len(requests)}, won {sum(r.won for r in requests)}, lost {dict(sorted(lost.items()))}\n"
        f"  fire tasks: {len(fired)} run ({dict(sorted(ran_on.items()))}); decided {deciding}, duplicate "
        f"fires that were no-ops {no_ops}; the drainer decided {timeouts - deciding}\n"
        f"  timeout lateness: {_spread(lateness['drainer'])} (decided by the drainer), "
        f"{_spread(lateness['fire task'])} (by a fire task); continuations failed: {failed}"
        f"\n  elapsed: {startup:.1f} s to open the pauses and start the clusters, {race:.1f} s racing; "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )


def _spread(seconds: list[float]) -> str:
    if not seconds:
        return "-"
    return f"median {statistics.median(seconds):.3f} s, max {max(seconds):.3f} s"


def _verdicts(decided: Counter, who: str) -> str:
    return ", ".join(f"{verdict} {n}" for (w, verdict), n in sorted(decided.items()) if w == who) or "-"


def _race_and_check(pauses: int, fires: int, db_blocker, log_dir) -> None:
    seed = os.environ.get("HITL_TIMER_RACE_SEED")  # to replay a run: its figure names the seed
    outcome = race_timers(pauses, fires, db_blocker, log_dir, seed=int(seed) if seed else None)
    print("\n" + outcome.figure)
    assert not outcome.problems, "\n".join(outcome.problems[:30])


def test_timers_fire_at_least_once_and_each_pause_is_decided_exactly_once(django_db_blocker, tmp_path):
    """Fast size: 50 pauses, each fired 3 times by two timer clusters while reviewers race."""
    _race_and_check(50, 3, django_db_blocker, tmp_path)


@pytest.mark.fullsize
def test_timers_at_full_size_fire_at_least_once_and_each_pause_is_decided_exactly_once(
    django_db_blocker, tmp_path
):
    """Full size (bench/timer_races.py): ``HITL_TIMER_RACE_PAUSES`` (200) x ``HITL_TIMER_RACE_FIRES`` (3)."""
    pauses = int(os.environ.get("HITL_TIMER_RACE_PAUSES", "200"))
    fires = int(os.environ.get("HITL_TIMER_RACE_FIRES", "3"))
    _race_and_check(pauses, fires, django_db_blocker, tmp_path)
