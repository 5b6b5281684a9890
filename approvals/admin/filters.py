"""Sidebar filters of the admin.

The inbox's filters: pause type, surface (1:1, group or approval request), overdue, agent and owner (the last two list their choices with one
query for both: approvals.admin.lookups). The audit ledger's filters: typed-in ids and actors, and verdicts. A ledger of millions
of entries has too many subjects, pauses and actors to list as links, so those filters are a text
box; a malformed id matches nothing and says why instead of failing the page.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from django.contrib import admin, messages
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone

from approvals.admin.lookups import sidebar_choices
from approvals.audit_selectors import audit_entries, recorded_verbs
from approvals.models import AuditEntry, Engine, Pause, PauseKind, Verdict

CHOICES_SHOWN = 50  # a sidebar is no place for thousands of entries: search finds the rest


class PauseTypeFilter(admin.SimpleListFilter):
    title = "pause type"
    parameter_name = "type"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(kind.value, kind.value) for kind in PauseKind]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Pause]) -> QuerySet[Pause]:
        return queryset.filter(kind=self.value()) if self.value() else queryset


class SurfaceFilter(admin.SimpleListFilter):
    title = "surface"
    parameter_name = "surface"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            (Engine.REGULAR, "1:1 conversations"),
            (Engine.GROUP, "group discussions"),
            (Engine.REQUEST, "approval requests"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Pause]) -> QuerySet[Pause]:
        return queryset.filter(surface=self.value()) if self.value() else queryset


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
        # Read with the owner filter's choices in one query (approvals.admin.lookups), the pending pauses' agent
        # ids a subquery. An agent whose row is gone is not offered (its pauses still list, by short id, and
        # search finds them by id).
        agents = sidebar_choices(request, limit=CHOICES_SHOWN).agents
        by_name = sorted(agents, key=lambda item: (item[1].lower(), str(item[0])))
        return [(str(agent_id), agent_choice(agent_id, name)) for agent_id, name in by_name]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Pause]) -> QuerySet[Pause]:
        if not self.value():
            return queryset
        try:
            return queryset.filter(agent_id=uuid.UUID(self.value()))
        except ValueError:
            return queryset.none()


def agent_choice(agent_id: uuid.UUID, name: str | None) -> str:
    """The agent's name and short id (two agents may share a name); the short id alone when it is gone."""
    short = str(agent_id)[:8]
    return f"{name} ({short})" if name else f"{short}…"


class OwnerFilter(admin.SimpleListFilter):
    title = "owner"
    parameter_name = "owner"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        owners = sidebar_choices(request, limit=CHOICES_SHOWN).owners
        return [(str(pk), username) for pk, username in owners]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Pause]) -> QuerySet[Pause]:
        if not self.value():
            return queryset
        try:
            return queryset.filter(owner_id=int(self.value()))
        except ValueError:
            return queryset.none()


# The audit ledger's filters.

NO_VERDICT = "none"


class TypedInFilter(admin.SimpleListFilter):
    """A text box instead of a list of links; the value is kept in the query string like any filter."""

    template = "admin/approvals/auditentry/typed_in_filter.html"
    placeholder = ""

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return []

    def has_output(self) -> bool:
        return True

    def choices(self, changelist: Any) -> Iterator[dict[str, Any]]:
        # Every other active parameter travels along as a hidden field, so typing here narrows the
        # current selection instead of replacing it.
        others = [
            (name, value)
            for name, value in changelist.params.items()
            if name not in (self.parameter_name, "p")
        ]
        yield {
            "parameter_name": self.parameter_name,
            "value": self.value() or "",
            "placeholder": self.placeholder,
            "others": others,
            "clear_query_string": changelist.get_query_string(remove=[self.parameter_name]),
        }


class TypedInIdFilter(TypedInFilter):
    placeholder = "UUID"

    def parsed_value(self, request: HttpRequest) -> uuid.UUID | None:
        """The id typed in, or None; a malformed one is reported and matches nothing."""
        raw = (self.value() or "").strip()
        if not raw:
            return None
        try:
            return uuid.UUID(raw)
        except ValueError:
            messages.warning(
                request, f"{self.title.capitalize()}: '{raw}' is not a UUID; nothing matches it."
            )
            raise

    def queryset(self, request: HttpRequest, queryset: QuerySet[AuditEntry]) -> QuerySet[AuditEntry]:
        try:
            value = self.parsed_value(request)
        except ValueError:
            return queryset.none()
        return queryset if value is None else self.matching(queryset, value)

    def matching(self, queryset: QuerySet[AuditEntry], value: uuid.UUID) -> QuerySet[AuditEntry]:
        raise NotImplementedError


class SubjectFilter(TypedInIdFilter):
    """Entries about a conversation, discussion or approval request: its own chain, and entries that name it."""

    title = "subject (conversation, discussion or approval request id)"
    parameter_name = "subject"

    def matching(self, queryset: QuerySet[AuditEntry], value: uuid.UUID) -> QuerySet[AuditEntry]:
        # The same rule as GET /audit/entries?conversation=… (the selector's).
        return queryset & audit_entries(conversation=value).order_by()


class PauseFilter(TypedInIdFilter):
    title = "pause id"
    parameter_name = "pause"

    def matching(self, queryset: QuerySet[AuditEntry], value: uuid.UUID) -> QuerySet[AuditEntry]:
        return queryset.filter(pause_id=value)


class ActorFilter(TypedInFilter):
    title = "actor (exact)"
    parameter_name = "actor"
    placeholder = "alice, system:timeout, slack:U…"

    def queryset(self, request: HttpRequest, queryset: QuerySet[AuditEntry]) -> QuerySet[AuditEntry]:
        value = (self.value() or "").strip()
        return queryset.filter(actor=value) if value else queryset


class VerbFilter(admin.SimpleListFilter):
    title = "verb"
    parameter_name = "verb"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [(verb, verb) for verb in recorded_verbs()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[AuditEntry]) -> QuerySet[AuditEntry]:
        value = self.value()
        return queryset.filter(verb=value) if value else queryset


class VerdictFilter(admin.SimpleListFilter):
    title = "verdict"
    parameter_name = "verdict"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [*Verdict.choices, (NO_VERDICT, "No verdict")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[AuditEntry]) -> QuerySet[AuditEntry]:
        value = self.value()
        if not value:
            return queryset
        return queryset.filter(verdict="" if value == NO_VERDICT else value)
