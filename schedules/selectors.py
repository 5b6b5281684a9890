"""Reads of django-q2's schedules for the schedule store: what a user may see, and the rows its
operations change (who may change one is asked of schedules.protection after the read)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django_q.models import Schedule

from approvals.access import is_admin
from schedules.protection import hitl_schedules_filter, may_use_schedule_store


def visible_schedules(user: Any) -> QuerySet[Schedule]:
    """Admins see every schedule, other staff every non-HITL schedule, everyone else none."""
    if is_admin(user):
        return Schedule.objects.all()
    if may_use_schedule_store(user):
        return Schedule.objects.exclude(hitl_schedules_filter())
    return Schedule.objects.none()


def schedules_by_next_run(*, user: Any) -> QuerySet[Schedule]:
    return visible_schedules(user).order_by("next_run", "id")


def visible_schedule(*, user: Any, schedule_id: int) -> Schedule | None:
    """The schedule, or None when there is none or the user may not see it (the same answer: 404)."""
    return visible_schedules(user).filter(pk=schedule_id).first()


def schedule_by_id(schedule_id: int | None, *, for_update: bool = False) -> Schedule | None:
    """Any schedule, visible or not, for an operation that checks the change rule next; ``for_update``
    locks its row (inside a transaction)."""
    if schedule_id is None:
        return None
    rows = Schedule.objects.select_for_update() if for_update else Schedule.objects
    return rows.filter(pk=schedule_id).first()


def schedule_name_taken(name: str, *, other_than: Schedule | None = None) -> bool:
    """Another schedule than ``other_than`` already has this name."""
    others = Schedule.objects.filter(name=name)
    if other_than is not None:
        others = others.exclude(pk=other_than.pk)
    return others.exists()
