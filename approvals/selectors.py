"""Reads of pauses: the inbox (owner-scoped inside the query, before the limit) and a subject's pause."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import QuerySet

from approvals.access import sees_every_pause
from approvals.models import Pause, PauseStatus

LIMIT_MIN, LIMIT_MAX = 1, 1000


def clamp_limit(value: Any, default: int = 200) -> int:
    """Limits are clamped, not refused; something that is not a number means the default."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        return default
    return max(LIMIT_MIN, min(LIMIT_MAX, number))


def decidable_by(user: Any, pauses: QuerySet[Pause]) -> QuerySet[Pause]:
    """``pauses`` narrowed, inside SQL, to those ``user`` may decide: every pause for admins and approvers,
    their own for anyone else (the scope is part of the query, never a filter on fetched rows)."""
    return pauses if sees_every_pause(user) else pauses.filter(owner_id=user.pk)


def pending_pauses_for(user: Any, *, limit: int, surface: str | None = None) -> QuerySet[Pause]:
    """PENDING pauses the user may decide, oldest first. Admins and approvers see all, others their own;
    the owner filter is part of the query, so a personal inbox is never starved by other users' backlog."""
    if not user or not user.is_authenticated:
        return Pause.objects.none()
    pauses = Pause.objects.filter(status=PauseStatus.PENDING)
    if surface is not None:
        pauses = pauses.filter(surface=surface)
    return (
        decidable_by(user, pauses).select_related("owner").order_by("paused_at", "id")[: clamp_limit(limit)]
    )


INBOX_COLUMNS = (
    "id",
    "surface",
    "subject_id",
    "agent_id",
    "group_id",
    "owner__username",
    "paused_at",
    "due_at",
    "reason",
    "kind",
    "timeout_policy",
    "approval_timeout",
    "tool_names",
)


def pending_inbox_rows(user: Any, *, limit: Any, surface: str | None = None) -> list[dict[str, Any]]:
    """The inbox as plain column values: the same query as pending_pauses_for, without building models."""
    return list(pending_pauses_for(user, limit=limit, surface=surface).values(*INBOX_COLUMNS))


def current_pause_of(subject_type: str, subject_id: uuid.UUID) -> Pause | None:
    """The subject's open pause (PENDING or RESOLVING), if any."""
    return (
        Pause.objects.filter(
            subject_type=subject_type,
            subject_id=subject_id,
            status__in=[PauseStatus.PENDING, PauseStatus.RESOLVING],
        )
        .order_by("-paused_at")
        .first()
    )


def latest_pause_of(subject_type: str, subject_id: uuid.UUID) -> Pause | None:
    return (
        Pause.objects.filter(subject_type=subject_type, subject_id=subject_id).order_by("-paused_at").first()
    )
