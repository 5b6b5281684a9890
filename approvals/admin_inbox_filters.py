"""The inbox's sidebar filters: pause type, overdue, agent and owner (the last two list their choices
with one query each)."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone

from approvals.admin_scope import scoped_pauses
from approvals.models import Pause, PauseKind, PauseStatus

CHOICES_SHOWN = 50  # a sidebar is no place for thousands of entries: search finds the rest


def _visible_pending(request: HttpRequest) -> QuerySet[Pause]:
    return scoped_pauses(request.user, Pause.objects.filter(status=PauseStatus.PENDING))


class PauseTypeFilter(admin.SimpleListFilter):
    title = "pause type"
    parameter_name = "type"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(kind.value, kind.value) for kind in PauseKind]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Pause]) -> QuerySet[Pause]:
        return queryset.filter(kind=self.value()) if self.value() else queryset


class OverdueFilter(admin.SimpleListFilter):
    title = "overdue"
    parameter_name = "overdue"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Overdue"), ("no", "Not overdue")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Pause]) -> QuerySet[Pause]:
        now = timezone.now()
        if self.value() == "yes":
            return queryset.filter(due_at__lt=now)
        if self.value() == "no":
            return queryset.filter(Q(due_at__isnull=True) | Q(due_at__gte=now))
        return queryset


class AgentFilter(admin.SimpleListFilter):
    title = "agent"
    parameter_name = "agent"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        agent_ids = (
            _visible_pending(request).exclude(agent_id=None).order_by("agent_id")
            .values_list("agent_id", flat=True).distinct()[:CHOICES_SHOWN]
        )
        return [(str(agent_id), str(agent_id)) for agent_id in agent_ids]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Pause]) -> QuerySet[Pause]:
        if not self.value():
            return queryset
        try:
            return queryset.filter(agent_id=uuid.UUID(self.value()))
        except ValueError:
            return queryset.none()


class OwnerFilter(admin.SimpleListFilter):
    title = "owner"
    parameter_name = "owner"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        owners = (
            get_user_model().objects.filter(pk__in=_visible_pending(request).values("owner_id"))
            .order_by("username").values_list("pk", "username")[:CHOICES_SHOWN]
        )
        return [(str(pk), username) for pk, username in owners]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Pause]) -> QuerySet[Pause]:
        if not self.value():
            return queryset
        try:
            return queryset.filter(owner_id=int(self.value()))
        except ValueError:
            return queryset.none()
