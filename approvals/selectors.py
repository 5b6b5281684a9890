"""Reads of pauses: the inbox (owner-scoped inside the query, before the limit), the admin inbox's pauses
and its filters' choices, a subject's pause, and one pause by its id."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count, F, Max, Q, QuerySet

from approvals.access import may_use_inbox, sees_every_pause
from approvals.models import Pause, PauseStatus, Vote
from approvals.routing import routed_scope

LIMIT_MIN, LIMIT_MAX = 1, 1000


def clamp_limit(value: Any, default: int = 200) -> int:
    """Limits are clamped, not refused; something that is not a number means the default."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        return default
    return max(LIMIT_MIN, min(LIMIT_MAX, number))


def visible_to(user: Any, pauses: QuerySet[Pause]) -> QuerySet[Pause]:
    """``pauses`` narrowed, inside SQL, to those ``user`` may open: every pause for admins and approvers,
    their own for anyone else (the scope is part of the query, never a filter on fetched rows)."""
    return pauses if sees_every_pause(user) else pauses.filter(owner_id=user.pk)


def decidable_by(user: Any, pauses: QuerySet[Pause]) -> QuerySet[Pause]:
    """``visible_to``, narrowed to what ``user`` may decide now: a routed pause only for its approvers and
    the escalation steps already open (approvals.routing.routed_scope), inside the same query."""
    return routed_scope(user, visible_to(user, pauses))


# Every inbox's order (``due_first``); the admin inbox's default ``ordering`` too.
INBOX_ORDER = (F("due_at").asc(nulls_last=True), "paused_at", "id")


def due_first(pauses: QuerySet[Pause]) -> QuerySet[Pause]:
    """What is due comes first, in every inbox: by deadline, soonest first, every pause without a deadline
    after every pause with one; then oldest first (``paused_at``), then by id. So no number of pauses
    without a deadline ever pushes one with a deadline off the first page. The partial indexes on
    ``(due_at, paused_at, id)`` of pending pauses serve this order (PostgreSQL keeps NULLs last in an
    ascending index, as the order does)."""
    return pauses.order_by(*INBOX_ORDER)


def pending_pauses_for(
    user: Any, *, limit: int, surface: str | None = None, group_id: uuid.UUID | None = None
) -> QuerySet[Pause]:
    """PENDING pauses the user may decide, what is due first (``due_first``), of ``surface`` and of the
    group ``group_id`` when given. Admins and approvers see all, others their own; the owner filter is
    part of the query, so a personal inbox is never starved by other users' backlog."""
    if not user or not user.is_authenticated:
        return Pause.objects.none()
    pauses = Pause.objects.filter(status=PauseStatus.PENDING)
    if surface is not None:
        pauses = pauses.filter(surface=surface)
    if group_id is not None:
        pauses = pauses.filter(group_id=group_id)
    return due_first(decidable_by(user, pauses).select_related("owner"))[: clamp_limit(limit)]


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
    "required_approvals",
)


def pending_inbox_rows(
    user: Any, *, limit: Any, surface: str | None = None, group_id: uuid.UUID | None = None
) -> list[dict[str, Any]]:
    """The inbox as plain column values: the same query as pending_pauses_for, without building models;
    a row of a pause that needs several approvals carries its votes so far (``votes``: one more query for
    the page, only when it has such a row)."""
    found = list(
        pending_pauses_for(user, limit=limit, surface=surface, group_id=group_id).values(*INBOX_COLUMNS)
    )
    voting = [row["id"] for row in found if row["required_approvals"] > 1]
    if voting:
        votes: dict[Any, list[tuple[str, datetime]]] = {}
        for pause_id, voter, at in Vote.objects.filter(pause_id__in=voting).values_list(
            "pause_id", "voter", "voted_at"
        ):
            votes.setdefault(pause_id, []).append((voter, at))
        for row in found:
            if row["required_approvals"] > 1:
                row["votes"] = votes.get(row["id"], [])
    return found


def reviewable_pauses(
    *,
    user: Any,
    status: str | None = None,
    ids: list[uuid.UUID] | None = None,
    model: type[Pause] = Pause,
    decidable_now: bool = False,
) -> QuerySet[Pause]:
    """The pauses the admin shows ``user`` (of ``status`` and among ``ids`` when given), each with its
    owner: none unless ``user`` may use the inbox (staff), then ``visible_to``'s scope inside SQL, or with
    ``decidable_now`` (the inbox list, its count and filters) ``decidable_by``'s. A routed pause someone
    may open but not decide opens with why (approvals.routing.why_not_routed). ``model`` is ``Pause`` or
    one of its proxies (the inbox's ``PendingApproval``)."""
    pauses = model.objects.select_related("owner")
    if not may_use_inbox(user):
        return pauses.none()
    if status is not None:
        pauses = pauses.filter(status=status)
    if ids is not None:
        pauses = pauses.filter(pk__in=ids)
    return decidable_by(user, pauses) if decidable_now else visible_to(user, pauses)


def pending_agent_ids(*, user: Any) -> QuerySet:
    """The agent ids of the PENDING pauses the admin inbox shows ``user``, unevaluated: a subquery for the
    sidebar, which walks the (few) agents and probes the pauses' agent index for each, instead of reading
    every pending pause's agent id to find the distinct ones (28 ms at 100,000 pending with one agent)."""
    return (
        reviewable_pauses(user=user, status=PauseStatus.PENDING, decidable_now=True)
        .exclude(agent_id=None)
        .values("agent_id")
    )


def owners_with_pending_pauses(*, user: Any, limit: int) -> QuerySet:
    """The first ``limit`` owners (users, by username) of the PENDING pauses the admin inbox shows ``user``:
    unevaluated, the pauses a subquery, so the sidebar reads them in the same query as its agents."""
    pending = reviewable_pauses(user=user, status=PauseStatus.PENDING, decidable_now=True)
    return get_user_model().objects.filter(pk__in=pending.values("owner_id")).order_by("username")[:limit]


def pending_summary(*, user: Any, since: datetime) -> dict[str, Any]:
    """What the admin inbox polls for new work (``approvals.admin.inbox_updates``): how many PENDING pauses
    ``user`` may decide, how many of them paused after ``since``, and the newest one's time; one aggregate
    query inside the reviewer's scope, so no count ever covers a pause they may not see."""
    return (
        reviewable_pauses(user=user, status=PauseStatus.PENDING, decidable_now=True)
        .order_by()
        .aggregate(
            pending=Count("pk"), new=Count("pk", filter=Q(paused_at__gt=since)), newest=Max("paused_at")
        )
    )


def pause_status(*, pause_id: uuid.UUID | str) -> str | None:
    """The pause's status now, or None if there is no such pause."""
    return Pause.objects.filter(pk=pause_id).values_list("status", flat=True).first()


def pause_by_id(*, pause_id: uuid.UUID | str) -> Pause:
    """The pause, read again, for a caller already past its access rule; ``Pause.DoesNotExist`` if gone."""
    return Pause.objects.get(pk=pause_id)


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
