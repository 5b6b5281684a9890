#!/usr/bin/env python
"""Timeout precision: how late after its deadline does a real q-cluster decide a pause?

1. recreates the database ``hitl_bench_timers`` (``--reuse-db`` keeps it), migrates, creates the
   user alice and one AUTO_REJECT agent per whole second of timeout (PT5S ... PT60S), deployed;
2. starts the two q-clusters of the deployed topology (docs/operations.md): the default one
   (continuations) and ``hitl-timers`` (timers, recovery), ``--q-workers`` each (default 2), and
   waits until the timer drainer runs;
3. creates N paused conversations (default 1,000) with the real services, in-process (start, then
   "please delete my account"), each on an agent picked uniformly at random, so the timeouts are
   spread uniformly over 5-60 s (and the deadlines over 5 s .. 60 s + the creation time);
4. waits until every pause is decided and prints the lateness ``decided_at - due_at`` of each pause
   (p50/p95/p99/max; the target is p99 <= 2 s), any pause not decided, any decided early, and
   checks the audit ledger: exactly one decision entry per pause.

``due_at`` is cleared when a pause is resolved, so the deadline is read from the pause's audit entry
(``hitl.pause``, detail ``dueAt``) and checked against ``paused_at + approvalTimeout``.

    .venv/bin/python bench/timeout_precision.py
    .venv/bin/python bench/timeout_precision.py -n 200 --max 20     # a quick run
"""

from __future__ import annotations

import argparse
import atexit
import multiprocessing
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timedelta
from typing import Any

from _figures import machine_line, summarize
from _stack import LOG_DIR, PYTHON, ROOT, UNTHROTTLED, database_url, ensure_database, stop_group

DEFAULT_DB = "hitl_bench_timers"
CONTINUATION = "approvals.continuation_runs.run_continuation"
FIRE_FUNC = "approvals.timers.fire_timeout"


# --- Django in this process and in the creating processes ---------------------------------------


def configure_environment(db: str) -> None:
    """Environment for this process, the creating processes and the q-cluster (they inherit it)."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "hitl_project.settings.base"
    os.environ["DATABASE_URL"] = database_url(db)
    os.environ["HITL_DB_POOL"] = "false"
    os.environ["LOG_LEVEL"] = "WARNING"
    os.environ.update(UNTHROTTLED)
    if not os.environ.get("HITL_BENCH_METRICS_DIR"):
        # the metric files of this bench's processes, away from var/prometheus (other stacks use it)
        metrics_dir = tempfile.mkdtemp(prefix="hitl-bench-timers-metrics-")
        atexit.register(shutil.rmtree, metrics_dir, True)
        os.environ["HITL_BENCH_METRICS_DIR"] = metrics_dir
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = os.environ["HITL_BENCH_METRICS_DIR"]
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


def setup_django(db: str) -> None:
    configure_environment(db)
    import django

    django.setup()


def create_chunk(job: tuple[int, list[str]]) -> list[str]:
    """In a creating process: one paused conversation per agent id, through the real services."""
    from django.contrib.auth.models import User

    from conversations.turns import say, start_conversation

    user_id, agent_ids = job
    user = User.objects.get(pk=user_id)
    created = []
    for agent_id in agent_ids:
        conversation = start_conversation(user=user, agent_id=agent_id, environment="production").conversation
        conversation = say(
            conversation=conversation, user=user, user_input="please delete my account", context=None
        ).conversation
        if conversation.state != "AWAITING_HUMAN":
            raise RuntimeError(f"expected AWAITING_HUMAN, got {conversation.state}")
        created.append(str(conversation.pk))
    return created


# --- the bench stack: a database, Django here, the two q-clusters ---------------------------------


class TimerBench:
    def __init__(
        self, *, db: str, q_workers: int, extra_env: dict[str, str] | None = None, label: str = "timers"
    ) -> None:
        self.db = db
        self.q_workers = q_workers
        self.extra_env = extra_env or {}
        self.label = label
        self.qclusters: list[subprocess.Popen[Any]] = []
        self._logs: list[Any] = []
        self.user_id = 0

    def prepare(self, *, fresh: bool) -> None:
        t0 = time.monotonic()
        created = ensure_database(self.db, fresh=fresh)
        setup_django(self.db)
        from django.core.management import call_command

        from harnesses.users import make_user

        call_command("migrate", "--noinput", verbosity=0)
        from django.contrib.auth.models import User

        user = User.objects.filter(username="alice").first() or make_user("alice")
        self.user_id = user.pk
        print(
            f"database {self.db}: {'created' if created else 'reused'} and migrated "
            f"({time.monotonic() - t0:.1f} s)",
            flush=True,
        )

    def agents(self, policy: str, timeouts: Iterable[str]) -> dict[str, str]:
        """One deployed agent per timeout (the timeout is part of the agent's hitlConfig)."""
        from conversations.agents import create_agent, deploy_agent
        from harnesses.factories import account_bot

        agents = {}
        for timeout in timeouts:
            document = account_bot(
                hitlConfig={
                    "timeoutPolicy": policy,
                    "approvalTimeout": timeout,
                    "pauseReason": f"bench {policy} {timeout}",
                }
            )
            row = create_agent(document=document)
            deploy_agent(agent_id=row.agent_id, version=row.version, environment="production")
            agents[timeout] = str(row.agent_id)
        return agents

    def create_paused(self, agent_ids: Sequence[str], *, processes: int, chunk: int = 50) -> list[str]:
        """One paused conversation per entry of ``agent_ids``, created by ``processes`` processes."""
        from django.db import connections

        connections.close_all()
        jobs = [(self.user_id, list(agent_ids[i : i + chunk])) for i in range(0, len(agent_ids), chunk)]
        created: list[str] = []
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(
            max_workers=processes, mp_context=context, initializer=setup_django, initargs=(self.db,)
        ) as pool:
            last_report = time.monotonic()
            for ids in pool.map(create_chunk, jobs):
                created.extend(ids)
                if time.monotonic() - last_report >= 10:
                    print(f"  created {len(created)}/{len(agent_ids)}", flush=True)
                    last_report = time.monotonic()
        return created

    def start_qcluster(self, timeout: float = 60.0) -> float:
        """Start the default q-cluster and the timer cluster (``--q-workers`` workers each); returns once
        the timer drainer runs, i.e. holds its advisory lock (seconds it took)."""
        from django.conf import settings

        t0 = time.monotonic()
        env = dict(os.environ)
        env.update(
            {
                "HITL_Q_WORKERS": str(self.q_workers),
                "HITL_TIMER_Q_WORKERS": str(self.q_workers),
                **self.extra_env,
            }
        )
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        atexit.register(self.stop)
        for suffix, cluster in (("", None), ("-timers", settings.HITL_TIMER_CLUSTER)):
            log = open(LOG_DIR / f"bench-{self.label}-qcluster{suffix}.log", "w")  # closed in stop()
            self._logs.append(log)
            cluster_env = {**env, "Q_CLUSTER_NAME": cluster} if cluster else env
            self.qclusters.append(
                subprocess.Popen(
                    [PYTHON, "manage.py", "qcluster"],
                    cwd=ROOT,
                    env=cluster_env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        while not drainer_running():
            for proc, log in zip(self.qclusters, self._logs, strict=True):
                if proc.poll() is not None:
                    raise RuntimeError(f"a q-cluster exited ({proc.returncode}); see {log.name}")
            if time.monotonic() - t0 > timeout:
                raise RuntimeError(f"no timer drainer ran within {timeout:.0f} s; see {self._logs[-1].name}")
            time.sleep(0.1)
        return time.monotonic() - t0

    def stop(self) -> None:
        for proc in self.qclusters:
            stop_group(proc, grace=3.0)  # a drainer is always busy: do not wait 25 s for it
        self.qclusters.clear()
        for log in self._logs:
            log.close()
        self._logs.clear()


# --- measurements --------------------------------------------------------------------------------


def drainer_running() -> bool:
    """A timer drainer holds its advisory lock on this database (django-q2 keeps no successful task
    row to look at)."""
    from django.db import connection

    from approvals.timers import DRAIN_LOCK_KEY

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = 0"
            " AND objid = %s AND objsubid = 1"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))",
            [DRAIN_LOCK_KEY],
        )
        return bool(cursor.fetchone()[0])


def deadlines(pause_ids: Sequence[Any]) -> dict[Any, datetime]:
    """Each pause's deadline as it was opened (its ``hitl.pause`` audit entry)."""
    from approvals.models import AuditEntry

    rows = AuditEntry.objects.filter(pause_id__in=pause_ids, verb="hitl.pause").values_list(
        "pause_id", "detail"
    )
    return {pause_id: datetime.fromisoformat(detail["dueAt"]) for pause_id, detail in rows}


def decision_entries(pause_ids: Sequence[Any]) -> Counter:
    """How many ``hitl.approval`` (decision) entries the ledger holds for each pause."""
    from approvals.models import AuditEntry

    return Counter(
        AuditEntry.objects.filter(pause_id__in=pause_ids, verb="hitl.approval").values_list(
            "pause_id", flat=True
        )
    )


def queue_backlog(count: int) -> None:
    """``count`` trivial tasks in django-q2's queue, as a burst of decisions (continuations) leaves."""
    from django.db import transaction
    from django_q.tasks import async_task

    with transaction.atomic():
        for _ in range(count):
            async_task("math.floor", 1.5, group="bench-backlog")


def timeouts_fired() -> float:
    """``hitl_timeouts_total`` summed over this bench's processes (every fire_timeout call, no-ops
    included), read from the metric files of PROMETHEUS_MULTIPROC_DIR."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=os.environ["PROMETHEUS_MULTIPROC_DIR"])
    return sum(
        sample.value
        for metric in registry.collect()
        for sample in metric.samples
        if sample.name == "hitl_timeouts_total"
    )


def print_seconds(label: str, samples: Sequence[float]) -> None:
    s = summarize(samples)  # in milliseconds
    print(
        f"{label}: n={s['count']}  p50={s['p50'] / 1000:.3f} s  p95={s['p95'] / 1000:.3f} s  "
        f"p99={s['p99'] / 1000:.3f} s  max={s['max'] / 1000:.3f} s  min={s['min'] / 1000:.3f} s  "
        f"mean={s['mean'] / 1000:.3f} s",
        flush=True,
    )


def ledger_report(pause_ids: Sequence[Any], decided_ids: Sequence[Any]) -> tuple[int, int]:
    """Prints and returns (decided pauses without a decision entry, pauses with more than one)."""
    entries = decision_entries(pause_ids)
    decided = set(decided_ids)
    missing = sum(1 for pause_id in decided if entries[pause_id] == 0)
    stray = sum(1 for pause_id in pause_ids if pause_id not in decided and entries[pause_id])
    doubles = sum(1 for n in entries.values() if n > 1)
    print(
        f"audit ledger: {sum(entries.values())} decision entries for {len(decided)} decided pauses "
        f"(of {len(pause_ids)}); decided without one: {missing}; entry but not decided: {stray}; "
        f"more than one: {doubles}",
        flush=True,
    )
    return missing + stray, doubles


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", "--pauses", type=int, default=1000, help="paused conversations (default 1000)")
    parser.add_argument("--min", type=int, default=5, help="shortest timeout, seconds (default 5)")
    parser.add_argument("--max", type=int, default=60, help="longest timeout, seconds (default 60)")
    parser.add_argument("--q-workers", type=int, default=2, help="workers of each q-cluster (default 2)")
    parser.add_argument(
        "--batch-size", type=int, default=0, help="HITL_TIMEOUT_BATCH_SIZE (default: the setting's)"
    )
    parser.add_argument("--processes", type=int, default=2, help="processes creating the pauses (default 2)")
    parser.add_argument(
        "--backlog",
        type=int,
        default=0,
        help="queue this many trivial tasks (math.floor) on the default queue when the pauses "
        "are created, like a burst of continuations: timers must not wait behind them",
    )
    parser.add_argument("--seed", type=int, default=1, help="random seed of the timeouts")
    parser.add_argument("--db", default=DEFAULT_DB, help=f"database (default {DEFAULT_DB}; recreated)")
    parser.add_argument("--reuse-db", action="store_true", help="keep the database instead of recreating it")
    args = parser.parse_args()

    print(machine_line(), f"load average {os.getloadavg()[0]:.1f}", flush=True)
    extra_env = {"HITL_TIMEOUT_BATCH_SIZE": str(args.batch_size)} if args.batch_size else {}
    bench = TimerBench(db=args.db, q_workers=args.q_workers, extra_env=extra_env, label="precision")
    bench.prepare(fresh=not args.reuse_db)
    from django.conf import settings

    from approvals.models import Pause

    timeouts = [f"PT{s}S" for s in range(args.min, args.max + 1)]
    agents = bench.agents("AUTO_REJECT", timeouts)
    try:
        ready = bench.start_qcluster()
        batch = extra_env.get("HITL_TIMEOUT_BATCH_SIZE", settings.HITL_TIMEOUT_BATCH_SIZE)
        print(
            f"q-clusters (default, {settings.HITL_TIMER_CLUSTER}): {args.q_workers} workers each, "
            f"batch size {batch}, drainer up in {ready:.1f} s",
            flush=True,
        )

        if args.backlog:
            queue_backlog(args.backlog)
            print(f"queued {args.backlog} trivial tasks on the default queue", flush=True)
        rng = random.Random(args.seed)
        picks = [rng.choice(timeouts) for _ in range(args.pauses)]
        t0 = time.monotonic()
        conversation_ids = bench.create_paused([agents[t] for t in picks], processes=args.processes)
        creation = time.monotonic() - t0
        print(
            f"created {len(conversation_ids)} paused conversations in {creation:.1f} s "
            f"({len(conversation_ids) / creation:.0f}/s, {args.processes} processes), timeouts uniform over "
            f"{args.min}-{args.max} s",
            flush=True,
        )

        pauses = Pause.objects.filter(subject_id__in=conversation_ids)
        pause_ids = list(pauses.values_list("id", flat=True))
        due = deadlines(pause_ids)
        last_due = max(due.values())
        from django.utils import timezone

        give_up = last_due + timedelta(seconds=60)
        last_report = 0.0
        while True:
            pending = pauses.filter(status="PENDING").count()
            if pending == 0 or timezone.now() > give_up:
                break
            if time.monotonic() - last_report >= 10:
                left = (last_due - timezone.now()).total_seconds()
                print(f"  {pending} pending; last deadline in {max(0.0, left):.0f} s", flush=True)
                last_report = time.monotonic()
            time.sleep(0.5)

        if pending:
            bench.stop()  # gave up: stop deciding, so the figures and the ledger describe one moment
        rows = list(
            pauses.values_list("id", "status", "decided_at", "decided_by", "paused_at", "approval_timeout")
        )
        undecided = [r for r in rows if r[2] is None]
        lateness = [(r[2] - due[r[0]]).total_seconds() for r in rows if r[2] is not None]
        wrong_due = [r for r in rows if due[r[0]] != r[4] + timedelta(seconds=int(r[5][2:-1]))]
        early = [x for x in lateness if x < 0]
        print(
            f"\nlateness (decided_at - due_at), {args.pauses} pauses, two q-clusters with {args.q_workers} workers each:"
        )
        print_seconds("  lateness", lateness)
        print(
            f"  within 2 s: {sum(1 for x in lateness if x <= 2) / max(1, len(lateness)) * 100:.1f} %   "
            f"decided early: {len(early)}   not decided: {len(undecided)}   "
            f"deadline != paused_at + timeout: {len(wrong_due)}"
        )
        print(
            f"  decided by: {dict(Counter(r[3] for r in rows))}   status: {dict(Counter(r[1] for r in rows))}   "
            f"load average {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)"
        )
        for row in undecided[:10]:
            print(f"  NOT DECIDED: pause {row[0]} due {due[row[0]].isoformat()} status {row[1]}")
        missing, doubles = ledger_report(pause_ids, [r[0] for r in rows if r[2] is not None])
        ok = not early and not missing and not doubles and not wrong_due
        s = summarize(lateness)
        met = s["p99"] <= 2000 and not undecided
        print(
            f"\nRESULT: p99 lateness {s['p99'] / 1000:.3f} s, {len(undecided)} not decided (target p99 <= 2 s: "
            f"{'met' if met else 'MISSED'}); consistency {'ok' if ok else 'FAILED'}",
            flush=True,
        )
    finally:
        bench.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
