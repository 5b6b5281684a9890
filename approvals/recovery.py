"""Crash recovery and retention: repair what a dead process left behind, and never end a live pause.

Run by a periodic django-q2 schedule and when q-cluster workers start (both on the timer cluster,
``settings.HITL_TIMER_CLUSTER``), and by ``manage.py hitl_recover``:

- a finite pause whose timer is missing gets it back at its original deadline (overdue ones fire at once);
- a continuation whose worker died (RESOLVING, lease expired) goes back to PENDING with its deadline,
  audited; one that was never picked up for too long likewise; a live lease is never touched;
- a turn stuck IN_PROGRESS with no pause becomes EXECUTION_INTERRUPTED (``HITL_RECOVER_IN_PROGRESS``);
- WAIT_INDEFINITELY pauses are never touched.

Retention (``HITL_PENDING_MAX_AGE``, off by default) cancels pending pauses older than that, through
the normal audited cancel path, as ``system:retention``. No other maintenance ends a pending pause.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone
from django_q.models import Schedule

from approvals.actors import system_actor
from approvals.continuation_runs import INTERRUPTED
from approvals.decisions import cancel_pending_pause, restore_pause
from approvals.engines import registered_handlers
from approvals.models import Pause, PauseStatus
from approvals.timer_arming import arm_timer
from common.durations import positive_duration

logger = logging.getLogger(__name__)

NEVER_STARTED = "the continuation was never picked up by a worker"


def rearm_missing_timers() -> int:
    """Give every finite pending pause whose schedule is gone a timer at its original deadline."""
    schedule_exists = Exists(Schedule.objects.filter(pk=OuterRef("schedule_id")))
    missing = Pause.objects.filter(status=PauseStatus.PENDING, due_at__isnull=False).filter(
        Q(schedule_id__isnull=True) | ~schedule_exists
    )
    rearmed = 0
    for pause_id in missing.values_list("id", flat=True).iterator(chunk_size=1000):
        with transaction.atomic():
            pause = (
                Pause.objects.select_for_update(skip_locked=True)
                .filter(pk=pause_id, status=PauseStatus.PENDING)
                .first()
            )
            if pause is None:
                continue
            if pause.schedule_id and Schedule.objects.filter(pk=pause.schedule_id).exists():
                continue
            arm_timer(pause)
            rearmed += 1
    return rearmed


def restore_dead_continuations(now: datetime) -> int:
    """Decided pauses whose continuation died (lease expired) or never started go back to PENDING."""
    never_started_before = now - timedelta(seconds=settings.HITL_CONTINUATION_START_TIMEOUT_SECONDS)
    restored = 0
    dead = Pause.objects.filter(status=PauseStatus.RESOLVING, lease_until__lt=now)
    for pause_id in dead.values_list("id", flat=True):
        restored += restore_pause(pause_id=pause_id, reason=INTERRUPTED)
    stale = Pause.objects.filter(
        status=PauseStatus.RESOLVING, lease_until__isnull=True, decided_at__lt=never_started_before
    )
    for pause_id in stale.values_list("id", flat=True):
        # claim it first, so a worker picking it up right now and recovery cannot both act on it
        if Pause.objects.filter(pk=pause_id, status=PauseStatus.RESOLVING, lease_until__isnull=True).update(
            lease_until=now - timedelta(seconds=1)
        ):
            restored += restore_pause(pause_id=pause_id, reason=NEVER_STARTED)
    return restored


def interrupt_stale_turns(now: datetime) -> int:
    older_than = now - timedelta(seconds=settings.HITL_STALE_TURN_SECONDS)
    return sum(
        handler.interrupt_stale_turns(now=now, older_than=older_than) for handler in registered_handlers()
    )


def recover_expired_leases(now: datetime | None = None) -> dict[str, int]:
    """The fast part of recovery, swept every ``HITL_LEASE_SWEEP_SECONDS`` by the timer drainer: a dead
    continuation's pause is back in the inbox, and a dead turn interrupted, within one lease plus a sweep."""
    if not settings.HITL_CRASH_RECOVERY_ENABLED:
        return {}
    now = now or timezone.now()
    report = {
        "restoredContinuations": restore_dead_continuations(now),
        "interruptedTurns": interrupt_stale_turns(now) if settings.HITL_RECOVER_IN_PROGRESS else 0,
    }
    if any(report.values()):
        logger.warning("HITL crash recovery (expired leases): %s", report)
    return report


def run_recovery(now: datetime | None = None) -> dict[str, Any]:
    if not settings.HITL_CRASH_RECOVERY_ENABLED:
        return {"status": "disabled"}
    now = now or timezone.now()
    report = {
        "rearmedTimers": rearm_missing_timers(),
        "restoredContinuations": restore_dead_continuations(now),
        "interruptedTurns": interrupt_stale_turns(now) if settings.HITL_RECOVER_IN_PROGRESS else 0,
    }
    if any(report.values()):
        logger.warning("HITL crash recovery: %s", report)
    return report


def pending_max_age() -> timedelta | None:
    value = (settings.HITL_PENDING_MAX_AGE or "").strip()
    return positive_duration(value) if value else None


def run_retention(now: datetime | None = None) -> int:
    """Cancel pending pauses older than HITL_PENDING_MAX_AGE (off when unset), audited as system:retention."""
    max_age = pending_max_age()
    if max_age is None:
        return 0
    cutoff = (now or timezone.now()) - max_age
    actor = system_actor("retention")
    cancelled = 0
    expired = Pause.objects.filter(status=PauseStatus.PENDING, paused_at__lte=cutoff).order_by("paused_at")
    for pause in expired.iterator(chunk_size=500):
        try:
            cancelled += cancel_pending_pause(pause=pause, actor=actor, mode="RETENTION")
        except Exception:
            logger.exception("retention could not cancel pause %s", pause.id)
    return cancelled


def ensure_maintenance_schedules() -> None:
    """The periodic schedules of recovery and retention, on the timer cluster; idempotent."""
    Schedule.objects.update_or_create(
        name="hitl-recovery",
        defaults={
            "func": "approvals.recovery.run_recovery",
            "schedule_type": Schedule.MINUTES,
            "minutes": max(1, settings.HITL_RECOVERY_INTERVAL_SECONDS // 60),
            "repeats": -1,
            "cluster": settings.HITL_TIMER_CLUSTER,
        },
    )
    sweep_minutes = max(1, int(positive_duration(settings.HITL_PENDING_SWEEP_INTERVAL).total_seconds() // 60))
    Schedule.objects.update_or_create(
        name="hitl-retention",
        defaults={
            "func": "approvals.recovery.run_retention",
            "schedule_type": Schedule.MINUTES,
            "minutes": sweep_minutes,
            "repeats": -1,
            "cluster": settings.HITL_TIMER_CLUSTER,
        },
    )
