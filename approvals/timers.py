"""Timeouts of pauses: the deadline is data (``Pause.due_at``); timers only act on it.

- ``arm_timer`` creates a django-q2 one-shot Schedule in the transaction that opens the pause, and
  ``disarm_timer`` deletes it (by primary key) in the transaction that ends the pause
  (approvals.timer_arming, below the decisions that call them; this module fires timers and decides).
- django-q2's scheduler wakes only every ~30 s, so a *drainer* task fires overdue pauses close to
  their deadline: it polls the partial index on ``due_at`` a few times a second, claims overdue
  pauses in batches with ``FOR UPDATE SKIP LOCKED`` and fires each in its own transaction. One
  drainer runs at a time across all clusters (an advisory lock); a periodic schedule restarts it.
- All of it runs on the timer cluster (``settings.HITL_TIMER_CLUSTER``): its schedules name that
  cluster and its tasks are enqueued on that queue, so a backlog of continuations on the default
  cluster never delays a deadline.
- The drainer is also the sweep: it fires any overdue PENDING pause, whether its schedule fired,
  was lost, was deleted by hand, or its fire failed (a failed fire may retry after a pause).
- A fire goes through the same compare-and-set as a human decision, so a late, repeated or racing
  fire never decides twice. A quick continuation (``continues_quickly``) commits with the timer's
  decision; any other is handed to the q-cluster, never run by the drainer, so a slow continuation
  never delays the next deadline.
- Every ``HITL_LEASE_SWEEP_SECONDS`` the drainer also runs the sweeps registered with
  ``sweep_while_draining`` (crash recovery of expired leases), so a dead continuation is back in the
  inbox within seconds, not at the next periodic recovery.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone
from django_q.models import Schedule
from django_q.tasks import async_task

from approvals import metrics
from approvals.actors import system_actor
from approvals.continuation_runs import decide_and_continue
from approvals.decision_input import DecisionInput
from approvals.decisions import cancel_pending_pause, pause_with_owner
from approvals.models import Pause, PauseStatus, TimeoutPolicy, Verdict
from approvals.timer_arming import FAILED_FIRE_RETRY, TIMER_FUNC
from common.errors import ApplicationError, WrongState

logger = logging.getLogger(__name__)

DRAIN_FUNC = "approvals.timers.drain_due_timers"
BURST_FUNC = "approvals.timers.fire_due_burst"
DRAIN_LOCK_KEY = 0x48495446  # "HITF": one drainer across every cluster
FIRE_CLAIM = timedelta(seconds=120)
TIMEOUT_ACTOR = system_actor("timeout")
POLICY_VERDICT = {TimeoutPolicy.AUTO_APPROVE: Verdict.APPROVED, TimeoutPolicy.AUTO_REJECT: Verdict.REJECTED}


def _timeout_note(policy: str, verdict: str) -> str:
    return f"Automatic {verdict.lower()} due to timeout (policy: {policy})"


def apply_timeout(pause: Pause) -> str:
    """Decide an overdue pause by its policy, through the same services as a human decision."""
    policy = pause.timeout_policy
    if policy in POLICY_VERDICT:
        verdict = POLICY_VERDICT[policy]
        # A continuation known to take milliseconds runs here, in the timer's process: cheaper than a
        # queue round trip, and it never competes with the drain for the machine. Any other is queued.
        decide_and_continue(
            surface=pause.surface,
            subject_type=pause.subject_type,
            subject_id=pause.subject_id,
            decision=DecisionInput(verdict=verdict, note=_timeout_note(policy, verdict)),
            actor=TIMEOUT_ACTOR,
            expected_pause_id=pause.id,
            only_if_quick=True,
            pending=pause,
        )
        return verdict
    if policy == TimeoutPolicy.ABORT:
        return (
            "CANCELLED"
            if cancel_pending_pause(pause=pause, actor=TIMEOUT_ACTOR, mode="TIMEOUT_ABORT")
            else "no-op"
        )
    return "no-op"


def fire_timeout(pause_id: str, now: datetime | None = None) -> str:
    """Fire one pause's timeout. Counts the timeout even when the fire is a no-op."""
    pause = pause_with_owner(uuid.UUID(str(pause_id)))
    metrics.count_timeout(pause.surface if pause else "unknown")
    now = now or timezone.now()
    if pause is None or pause.status != PauseStatus.PENDING or pause.due_at is None or pause.due_at > now:
        return "no-op"
    try:
        return apply_timeout(pause)
    except WrongState:
        return "no-op"  # decided meanwhile: the compare-and-set lost, nothing happened
    except ApplicationError as exc:
        # e.g. NOT_DEPLOYED: the pause stays PENDING with its deadline; the drainer retries later.
        Pause.objects.filter(pk=pause.pk, status=PauseStatus.PENDING).update(
            fire_claimed_until=now + FAILED_FIRE_RETRY
        )
        logger.warning("timeout of pause %s could not be applied: %s", pause.id, exc.detail)
        return "failed"


def _claim_due(now: datetime, batch_size: int) -> list[uuid.UUID]:
    """Claim up to ``batch_size`` overdue pending pauses nobody else is firing."""
    with transaction.atomic():
        ids = list(
            Pause.objects.select_for_update(skip_locked=True)
            .filter(status=PauseStatus.PENDING, due_at__lte=now)
            .filter(Q(fire_claimed_until__isnull=True) | Q(fire_claimed_until__lt=now))
            .order_by("due_at")
            .values_list("id", flat=True)[:batch_size]
        )
        if ids:
            Pause.objects.filter(pk__in=ids).update(fire_claimed_until=now + FIRE_CLAIM)
    return ids


def fire_due_batch(now: datetime | None = None, batch_size: int | None = None) -> int:
    """Claim and fire one batch of overdue pauses, each in its own transaction; returns how many."""
    batch_size = batch_size or settings.HITL_TIMEOUT_BATCH_SIZE
    ids = _claim_due(now or timezone.now(), batch_size)
    for pause_id in ids:
        try:
            fire_timeout(str(pause_id), now=now)
        except Exception:  # one broken pause never stops the batch
            logger.exception("firing the timeout of pause %s failed", pause_id)
    return len(ids)


def fire_due_burst(now: datetime | None = None) -> int:
    """Fire batches until nothing is overdue; enqueued by the drainer when a backlog builds up."""
    fired = 0
    while True:
        count = fire_due_batch(now)
        fired += count
        if count == 0:
            return fired


def _try_drain_lock() -> bool:
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [DRAIN_LOCK_KEY])
        return bool(cursor.fetchone()[0])


def _release_drain_lock() -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [DRAIN_LOCK_KEY])


# Sweeps the drainer runs between batches. Registered by approvals.apps rather than imported here:
# recovery builds on this module (it re-arms timers).
_SWEEPS: list[Callable[[], object]] = []


def sweep_while_draining(sweep: Callable[[], object]) -> None:
    if sweep not in _SWEEPS:
        _SWEEPS.append(sweep)


def _run_sweeps() -> None:
    for sweep in _SWEEPS:
        try:
            sweep()
        except Exception:  # a failing sweep never stops the timers
            logger.exception("sweep %s failed", getattr(sweep, "__name__", sweep))


def drain_due_timers(run_seconds: float | None = None, poll_seconds: float = 0.25) -> dict[str, Any]:
    """Fire overdue pauses as they fall due for ``run_seconds``, then hand over to a fresh drainer.

    Only one drainer runs at a time (advisory lock); a second one exits at once. When a full batch was
    due, a burst task is enqueued so idle workers help with the backlog.
    """
    run_seconds = settings.HITL_TIMER_DRAIN_SECONDS if run_seconds is None else run_seconds
    if not _try_drain_lock():
        return {"status": "another drainer is running"}
    fired = 0
    batch_size = settings.HITL_TIMEOUT_BATCH_SIZE
    stop_at = time.monotonic() + run_seconds
    next_sweep = time.monotonic()
    try:
        while time.monotonic() < stop_at:
            if time.monotonic() >= next_sweep:
                _run_sweeps()
                next_sweep = time.monotonic() + settings.HITL_LEASE_SWEEP_SECONDS
            count = fire_due_batch(batch_size=batch_size)
            fired += count
            if count >= batch_size:
                async_task(
                    BURST_FUNC,
                    task_name="hitl-timer-burst",
                    group="hitl",
                    cluster=settings.HITL_TIMER_CLUSTER,
                )
                continue
            if count == 0:
                time.sleep(poll_seconds)
    finally:
        _release_drain_lock()
    if run_seconds > 0 and settings.HITL_TIMER_DRAIN_CHAIN:
        async_task(
            DRAIN_FUNC, task_name="hitl-timer-drain", group="hitl", cluster=settings.HITL_TIMER_CLUSTER
        )
    return {"status": "drained", "fired": fired}


def ensure_timer_schedules() -> None:
    """The periodic schedule that (re)starts the drainer, on the timer cluster; idempotent (run after
    migrate). Timers armed before timers had their own cluster are moved to it."""
    cluster = settings.HITL_TIMER_CLUSTER
    Schedule.objects.update_or_create(
        name="hitl-timer-drain",
        defaults={
            "func": DRAIN_FUNC,
            "schedule_type": Schedule.MINUTES,
            "minutes": 1,
            "repeats": -1,
            "cluster": cluster,
        },
    )
    Schedule.objects.filter(func=TIMER_FUNC).exclude(cluster=cluster).update(cluster=cluster)
