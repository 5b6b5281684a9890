#!/usr/bin/env python
"""Mass drain: N pauses (default 10,000) fall due at the same instant; how long until the q-clusters
have decided them all, and is every pause decided exactly once?

1. recreates the database ``hitl_bench_timers`` (``--reuse-db`` keeps it), migrates, creates alice
   and one deployed AUTO_REJECT agent with ``approvalTimeout`` PT1H;
2. makes ONE paused conversation with the real services (start, then "please delete my account"),
   then N-1 more in bulk, in-process, by ``--processes`` processes: each batch of 500 copies that
   conversation's row and its two step rows and opens each pause with the real ``open_pause`` (the
   Pause row, its one-shot django-q2 schedule and its ``hitl.pause`` audit entry), one transaction
   per batch. So every pause is exactly what the say turn would have made;
3. starts the two q-clusters (default and ``hitl-timers``, ``--q-workers`` each, default 2) and waits
   until the timer drainer runs;
4. moves every pause's deadline to one instant D a few seconds ahead (``--lead``, 5 s): ``due_at``
   of the pauses and ``next_run`` of their schedules (the backstop, D + ``HITL_TIMER_BACKSTOP_SECONDS``,
   as ``arm_timer`` arms it), in one transaction (the ``hitl.pause`` audit
   entries keep the PT1H deadline they were opened with: the ledger is append-only);
5. polls until no pause is PENDING and prints the time from D to the last decision (``decided_at``),
   decisions per second and per 5 s, the lateness distribution, every ``fire_timeout`` call
   (``hitl_timeouts_total``: more calls than decisions are the one-shot schedules' tasks that came
   after the drainer), how often a database session waited on a lock, and checks the audit ledger:
   exactly one decision entry per pause; then opens ``--probes`` PT2S pauses (one a second) while the continuations are still
   queued and prints how late they are decided, and waits (up to ``--timeout`` after D) for the
   continuations (REJECTED: the rest of the turn is skipped) to finish.

    .venv/bin/python bench/timeout_mass_drain.py                    # 10,000 pauses, 2 workers
    .venv/bin/python bench/timeout_mass_drain.py --q-workers 4
    .venv/bin/python bench/timeout_mass_drain.py -n 2000 --batch-size 50
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timedelta

from _figures import machine_line
from timeout_precision import (
    DEFAULT_DB,
    TimerBench,
    create_chunk,
    deadlines,
    ledger_report,
    print_seconds,
    setup_django,
    timeouts_fired,
)

CLONE_BATCH = 500


def _clone_paused(job: tuple[str, int]) -> list[str]:
    """In a creating process: ``count`` copies of the template paused conversation, each with its own
    pause opened by ``open_pause``; one transaction."""
    from django.db import transaction

    from approvals.models import Pause
    from approvals.pauses import open_pause
    from conversations.models import AgentVersion, Conversation, ConversationStep

    template_id, count = job
    template = Conversation.objects.get(pk=template_id, state="AWAITING_HUMAN")
    steps = list(ConversationStep.objects.filter(conversation=template).order_by("index"))
    pause = Pause.objects.get(subject_id=template_id, status="PENDING")
    document = AgentVersion.objects.get(agent_id=template.agent_id, version=template.agent_version).document
    bookmark = {key: value for key, value in pause.bookmark.items() if key != "pausedAt"}
    step_fields = (
        "index",
        "input",
        "context",
        "actions",
        "output",
        "outputs",
        "data",
        "quick_replies",
        "properties",
        "undone",
    )
    with transaction.atomic():
        conversations = Conversation.objects.bulk_create(
            [
                Conversation(
                    agent_id=template.agent_id,
                    agent_version=template.agent_version,
                    environment=template.environment,
                    owner_id=template.owner_id,
                    state=template.state,
                    properties=template.properties,
                    context=template.context,
                    turn_started_at=template.turn_started_at,
                    step_count=template.step_count,
                )
                for _ in range(count)
            ]
        )
        ConversationStep.objects.bulk_create(
            [
                ConversationStep(
                    conversation=conversation, **{name: getattr(step, name) for name in step_fields}
                )
                for conversation in conversations
                for step in steps
            ]
        )
        for conversation in conversations:
            open_pause(
                surface=pause.surface,
                kind=pause.kind,
                subject_type=pause.subject_type,
                subject_id=conversation.pk,
                owner_id=conversation.owner_id,
                reason=pause.reason,
                hitl_config=document.get("hitlConfig"),
                bookmark=bookmark,
                details=pause.details,
                tool_names=pause.tool_names,
                agent_id=conversation.agent_id,
                agent_version=conversation.agent_version,
            )
    return [str(conversation.pk) for conversation in conversations]


def clone(bench: TimerBench, template_id: str, count: int, processes: int) -> list[str]:
    from django.db import connections

    connections.close_all()
    jobs = [(template_id, min(CLONE_BATCH, count - i)) for i in range(0, count, CLONE_BATCH)]
    created: list[str] = []
    context = multiprocessing.get_context("spawn")
    last_report = time.monotonic()
    with ProcessPoolExecutor(
        max_workers=processes, mp_context=context, initializer=setup_django, initargs=(bench.db,)
    ) as pool:
        for ids in pool.map(_clone_paused, jobs):
            created.extend(ids)
            if time.monotonic() - last_report >= 10:
                print(f"  created {len(created)}/{count}", flush=True)
                last_report = time.monotonic()
    return created


def probe_lateness(bench: TimerBench, agent_id: str, count: int, give_up: datetime) -> None:
    """Timer precision right after the mass drain, while its continuations are still queued."""
    from django.utils import timezone
    from django_q.models import OrmQ

    from approvals.models import Pause

    conversation_ids, queued = [], []
    for _ in range(count):
        queued.append(OrmQ.objects.count())
        conversation_ids += create_chunk((bench.user_id, [agent_id]))
        time.sleep(1.0)
    probes = Pause.objects.filter(subject_id__in=conversation_ids)
    while probes.filter(status="PENDING").exists() and timezone.now() < give_up:
        time.sleep(0.2)
    due = deadlines(list(probes.values_list("id", flat=True)))
    late = [
        f"{(p.decided_at - due[p.id]).total_seconds():.1f}" if p.decided_at else "not decided"
        for p in probes.order_by("paused_at")
    ]
    print(
        f"  {count} PT2S probes opened after the drain, one a second, with {min(queued)}-{max(queued)} tasks "
        f"queued: decided late by {', '.join(late)} s",
        flush=True,
    )


def waiting_on_locks() -> int:
    """Sessions of this database waiting for a lock right now (e.g. a DELETE of a schedule row that
    django-q2's scheduler holds with SELECT ... FOR UPDATE)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", "--pauses", type=int, default=10_000, help="pauses falling due at once (10000)")
    parser.add_argument("--q-workers", type=int, default=2, help="workers of each q-cluster (default 2)")
    parser.add_argument(
        "--batch-size", type=int, default=0, help="HITL_TIMEOUT_BATCH_SIZE (default: the setting's)"
    )
    parser.add_argument(
        "--lead", type=float, default=5.0, help="seconds from the deadline move to D (default 5)"
    )
    parser.add_argument("--processes", type=int, default=2, help="processes creating the pauses (default 2)")
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="give up waiting after this many seconds"
    )
    parser.add_argument(
        "--keep-schedules",
        action="store_true",
        help="move only due_at, leave the one-shot schedules at PT1H (the drainer alone fires)",
    )
    parser.add_argument(
        "--no-continuations",
        dest="continuations",
        action="store_false",
        help="do not wait for the continuations after the last decision",
    )
    parser.add_argument(
        "--probes",
        type=int,
        default=5,
        help="after the drain, open this many PT2S pauses (one a second) while the "
        "continuations still queue, and print how late they are decided (default 5)",
    )
    parser.add_argument("--db", default=DEFAULT_DB, help=f"database (default {DEFAULT_DB}; recreated)")
    parser.add_argument("--reuse-db", action="store_true", help="keep the database instead of recreating it")
    args = parser.parse_args()

    print(machine_line(), f"load average {os.getloadavg()[0]:.1f}", flush=True)
    extra_env = {"HITL_TIMEOUT_BATCH_SIZE": str(args.batch_size)} if args.batch_size else {}
    bench = TimerBench(db=args.db, q_workers=args.q_workers, extra_env=extra_env, label="massdrain")
    bench.prepare(fresh=not args.reuse_db)
    from django.conf import settings
    from django.db import transaction
    from django.db.models import Max, Min
    from django.utils import timezone
    from django_q.models import OrmQ, Schedule

    from approvals.models import Pause

    batch = int(extra_env.get("HITL_TIMEOUT_BATCH_SIZE", settings.HITL_TIMEOUT_BATCH_SIZE))
    agents = bench.agents("AUTO_REJECT", ["PT1H", "PT2S"])
    agent_id = agents["PT1H"]
    try:
        t0 = time.monotonic()
        [template_id] = create_chunk((bench.user_id, [agent_id]))
        conversation_ids = [template_id, *clone(bench, template_id, args.pauses - 1, args.processes)]
        creation = time.monotonic() - t0
        pauses = Pause.objects.filter(subject_id__in=conversation_ids)
        pause_ids = list(pauses.values_list("id", flat=True))
        assert len(pause_ids) == args.pauses and not pauses.exclude(status="PENDING").exists()
        print(
            f"created {len(pause_ids)} paused conversations in {creation:.1f} s "
            f"({len(pause_ids) / creation:.0f}/s, {args.processes} processes)",
            flush=True,
        )

        ready = bench.start_qcluster()
        print(
            f"q-clusters (default, hitl-timers): {args.q_workers} workers each, batch size {batch}, "
            f"drainer up in {ready:.1f} s",
            flush=True,
        )

        fired_before = timeouts_fired()
        due = timezone.now() + timedelta(seconds=args.lead)
        with transaction.atomic():
            moved = Pause.objects.filter(pk__in=pause_ids).update(due_at=due)
            timers = (
                0
                if args.keep_schedules
                # as arm_timer arms them: the backstop, HITL_TIMER_BACKSTOP_SECONDS after the deadline
                else (
                    Schedule.objects.filter(pk__in=pauses.values("schedule_id")).update(
                        next_run=due + timedelta(seconds=settings.HITL_TIMER_BACKSTOP_SECONDS)
                    )
                )
            )
        print(
            f"deadline of {moved} pauses ({timers} schedules) moved to D = now + {args.lead:.0f} s; "
            f"load average {os.getloadavg()[0]:.1f}",
            flush=True,
        )

        give_up = due + timedelta(seconds=args.timeout)
        last_report = time.monotonic()
        lock_waits: list[int] = []
        while True:
            pending = pauses.filter(status="PENDING").count()
            now = timezone.now()
            if pending == 0 or now > give_up:
                break
            if now > due:
                lock_waits.append(waiting_on_locks())
            if time.monotonic() - last_report >= 5 and now > due:
                print(
                    f"  D+{(now - due).total_seconds():.0f} s: {pending} pending, "
                    f"{OrmQ.objects.count()} tasks queued, load average {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
                last_report = time.monotonic()
            time.sleep(0.1)
        all_decided_seen = timezone.now()
        load_after = os.getloadavg()[0]
        if pending:
            bench.stop()  # gave up: stop deciding, so the figures and the ledger describe one moment

        span = pauses.aggregate(first=Min("decided_at"), last=Max("decided_at"))
        rows = list(pauses.values_list("id", "status", "decided_at", "decided_by"))
        undecided = [r for r in rows if r[2] is None]
        lateness = [(r[2] - due).total_seconds() for r in rows if r[2] is not None]
        early = [x for x in lateness if x < 0]
        elapsed = (span["last"] - due).total_seconds() if span["last"] else float("nan")
        print(
            f"\nmass drain: {args.pauses} pauses due at D, two q-clusters, {args.q_workers} workers each, "
            f"batch size {batch}"
        )
        print(
            f"  first decision D+{(span['first'] - due).total_seconds():.3f} s, "
            f"last decision D+{elapsed:.3f} s (poll saw none pending at "
            f"D+{(all_decided_seen - due).total_seconds():.1f} s)"
        )
        print(
            f"  decisions/s: {len(lateness) / elapsed:.0f}   not decided: {len(undecided)}   "
            f"decided before D: {len(early)}"
        )
        print_seconds("  decided after D", lateness)
        print(
            "  decisions per 5 s after D: "
            + " ".join(str(n) for _, n in sorted(Counter(int(x // 5) for x in lateness).items()))
        )
        print(f"  decided by: {dict(Counter(r[3] for r in rows))}")
        fires = timeouts_fired() - fired_before
        print(
            f"  fire_timeout calls (hitl_timeouts_total): {fires:.0f}, of which no-ops "
            f"(the django-q2 scheduler's one-shot tasks arriving after the drainer): {fires - len(lateness):.0f}"
        )
        waiting = [n for n in lock_waits if n]
        print(
            f"  database sessions waiting on a lock: in {len(waiting)} of {len(lock_waits)} samples "
            f"(every ~0.1 s), at most {max(lock_waits, default=0)} at once"
        )
        print(f"  load average: {load_after:.1f} (machine: {os.cpu_count()} cores)", flush=True)
        missing, doubles = ledger_report(pause_ids, [r[0] for r in rows if r[2] is not None])

        if args.probes and not undecided:
            probe_lateness(bench, agents["PT2S"], args.probes, give_up)
        if args.continuations and not undecided:
            while pauses.filter(status="RESOLVING").exists() and timezone.now() < give_up:
                time.sleep(0.5)
            resolved = pauses.aggregate(last=Max("resolved_at"))["last"]
            left = pauses.exclude(status="RESOLVED").count()
            print(
                f"  continuations: last resolved D+{(resolved - due).total_seconds():.1f} s; "
                f"not resolved: {left}",
                flush=True,
            )
        ok = not early and not missing and not doubles
        met = elapsed <= 60 and not undecided
        print(
            f"\nRESULT: {len(lateness)} of {args.pauses} decided, the last {elapsed:.1f} s after the deadline "
            f"(target all within 60 s: {'met' if met else 'MISSED'}); {len(lateness) / elapsed:.0f} decisions/s; "
            f"double decisions: {doubles}; consistency {'ok' if ok else 'FAILED'}",
            flush=True,
        )
    finally:
        bench.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
