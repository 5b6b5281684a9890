"""Arming and disarming a pause's timer: a django-q2 one-shot Schedule, created in the transaction
that opens the pause and deleted (by primary key) in the one that ends it.

Below the decisions that call it; approvals.timers, which fires timers and decides overdue pauses, is
above them. ``TIMER_FUNC`` is stored in every armed schedule: the dotted path must keep resolving.
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from django_q.models import Schedule

from approvals.models import Pause, PauseStatus
from common import rows

TIMER_FUNC = "approvals.timers.fire_timeout"
TIMER_PREFIX = "hitl-timeout-"
# How long an overdue pause whose fire did not decide it (the fire failed, or the decision's continuation
# could not start and restored it) waits before the drainer fires it again.
FAILED_FIRE_RETRY = timedelta(seconds=30)


def timer_name(pause_id: uuid.UUID | str) -> str:
    return f"{TIMER_PREFIX}{pause_id}"


def arm_timer(pause: Pause, *, unsaved: bool = False) -> Schedule | None:
    """Create the pause's one-shot schedule (``timer_schedule``); caller's transaction. ``unsaved``: the
    pause is about to be inserted, so only its ``schedule_id`` is set (no UPDATE)."""
    schedule = timer_schedule(pause)
    if schedule is None:
        return None
    rows.insert(schedule)  # Schedule.save() adds nothing to a ONCE schedule, and no signal listens
    if not unsaved:
        Pause.objects.filter(pk=pause.pk).update(schedule_id=schedule.pk)
    pause.schedule_id = schedule.pk
    return schedule


def timer_schedule(pause: Pause) -> Schedule | None:
    """The pause's one-shot schedule, not yet written: a backstop ``HITL_TIMER_BACKSTOP_SECONDS`` after its
    deadline (or after now if overdue); None for a pause with no deadline.

    The drainer fires pauses at their deadline and deletes the schedule with the decision; a schedule
    due at the same instant would make django-q2's scheduler lock and enqueue thousands of rows during
    a mass drain. The backstop only fires when no drainer ran.
    """
    if pause.due_at is None or pause.status != PauseStatus.PENDING:
        return None
    return Schedule(
        name=timer_name(pause.id),
        func=TIMER_FUNC,
        args=repr(str(pause.id)),
        schedule_type=Schedule.ONCE,
        repeats=1,
        next_run=max(pause.due_at, timezone.now()) + timedelta(seconds=settings.HITL_TIMER_BACKSTOP_SECONDS),
        cluster=settings.HITL_TIMER_CLUSTER,
    )


def fire_retry_after(pause: Pause, now: datetime) -> datetime | None:
    """The drainer's hold on a pause put back to PENDING (``fire_claimed_until``): an overdue one is fired
    again only after ``FAILED_FIRE_RETRY``, so a decision that cannot continue (a group whose member was
    undeployed) is not decided and restored again at every poll; one not yet due fires at its deadline."""
    if pause.due_at is None or pause.due_at > now:
        return None
    return now + FAILED_FIRE_RETRY


def disarm_timer(pause: Pause) -> None:
    """Delete the pause's schedule by key (Schedule.name has no index); caller's transaction."""
    if pause.schedule_id:
        rows.delete(Schedule, where={"id": pause.schedule_id})  # nothing references a schedule row


@dataclass(frozen=True)
class DecisionWrite:
    """A decision's compare-and-set on the pause (``rows.update(Pause, where=, values=)``) and, when it won,
    the delete of its timer's schedule, not yet run: on PostgreSQL ``parts``, the ``decided AS (...),
    disarmed AS (...)`` parts of a data-modifying WITH (``decided`` answers a row when the compare-and-set
    won), and their ``params``, for a caller that joins them to a statement of its own; or ``run()``."""

    pause: Pause
    where: dict[str, Any]
    values: dict[str, Any]
    parts: str = ""
    params: tuple[Any, ...] = ()

    def run(self) -> bool:
        """The writes as one statement of their own (PostgreSQL), in the caller's transaction: whether the
        compare-and-set won (nothing written when it lost)."""
        if not self.parts:
            if not rows.update(Pause, where=self.where, values=self.values):
                return False
            disarm_timer(self.pause)
            return True
        found = rows.fetch_one(_decided_count_sql(self.parts), list(self.params))
        return bool(found and found[0])


def decision_write(pause: Pause, *, where: dict[str, Any], values: dict[str, Any]) -> DecisionWrite:
    """The decision's writes, to run or to join to another statement."""
    if not rows.on_postgresql():
        return DecisionWrite(pause, where, values)
    update, params = rows.update_statement(Pause, where=where, values=values)
    return DecisionWrite(pause, where, values, _decide_and_disarm_parts(update), tuple(params))


@functools.cache
def _decided_count_sql(parts: str) -> str:
    return f"WITH {parts} SELECT count(*) FROM decided"  # nosec B608  # parts built from model metadata, values are parameters


@functools.cache
def _decide_and_disarm_parts(update: str) -> str:
    return (
        f'decided AS ({update} RETURNING "schedule_id"), '  # nosec B608  # identifiers from model metadata, values are parameters
        f"disarmed AS (DELETE FROM {rows.table(Schedule)} WHERE id = (SELECT schedule_id FROM decided))"
    )
