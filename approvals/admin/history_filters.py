"""Sidebar filters of the "Decided approvals" history (approvals.admin.history).

"Decided by" starts at the reviewer's own decisions (the question a reviewer asks most: "what did I
decide yesterday?"), with everything they may see one click away. The subject filter is what the
decision page links to: every pause of one conversation, discussion or approval request, the pending one
included.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest

from approvals.admin.filters import TypedInIdFilter
from approvals.models import DECIDED_STATUSES, Pause, SubjectType, Verdict

SUBJECT_PARAM = "subject"
DECIDED_BY_PARAM = "decided_by"
EVERYONE = "all"
SYSTEM_PREFIX = "system:"


def subject_id_in(request: HttpRequest) -> uuid.UUID | None:
    """The subject id the page was asked for; ``ValueError`` when one was given but is no id."""
    raw = (request.GET.get(SUBJECT_PARAM) or "").strip()
    return uuid.UUID(raw) if raw else None


def automated_decision() -> Q:
    """Decided by a system actor (``system:timeout``, …) rather than a person: the audit's rule."""
    return Q(automated=True) | Q(decided_by__startswith=SYSTEM_PREFIX)


class HistorySubjectFilter(TypedInIdFilter):
    """Without a subject the history is every decided or cancelled pause; with one, all of that
    conversation's (or discussion's, or approval request's) pauses, the one still pending included, so
    nothing of it is hidden."""

    title = "conversation, discussion or approval request id"
    parameter_name = SUBJECT_PARAM

    def queryset(self, request: HttpRequest, queryset: QuerySet[Pause]) -> QuerySet[Pause]:
        try:
            value = self.parsed_value(request)
        except ValueError:  # the page answers a malformed id with its 404 before filters run
            return queryset.none()
        if value is None:
            return queryset.filter(status__in=DECIDED_STATUSES)  # the partial indexes' own condition
        return self.matching(queryset, value)

    def matching(self, queryset: QuerySet[Pause], value: uuid.UUID) -> QuerySet[Pause]:
        # the subject type is named so the (subject_type, subject_id, paused_at) index serves it
        return queryset.filter(subject_type__in=SubjectType.values, subject_id=value)


class DecidedByFilter(admin.SimpleListFilter):
    """Default: decided by me. "Everyone I may see" widens to the reviewer's whole scope, never beyond it."""

    title = "decided by"
    parameter_name = DECIDED_BY_PARAM

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(EVERYONE, "Everyone I may see")]

    def choices(self, changelist: Any) -> Iterator[dict[str, Any]]:
        # Django's "All" (no parameter) is "me" here: it is the default, so it is named for what it shows.
        yield {
            "selected": self.value() is None,
            "query_string": changelist.get_query_string(remove=[self.parameter_name]),
            "display": "Me",
        }
        yield {
            "selected": self.value() == EVERYONE,
            "query_string": changelist.get_query_string({self.parameter_name: EVERYONE}),
            "display": "Everyone I may see",
        }

    def queryset(self, request: HttpRequest, queryset: QuerySet[Pause]) -> QuerySet[Pause]:
        if self.value() == EVERYONE:
            return queryset
        return queryset.filter(decided_by_user_id=request.user.pk)


class VerdictFilter(admin.SimpleListFilter):
    title = "verdict"
    parameter_name = "verdict"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(verdict.value, verdict.value) for verdict in Verdict]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Pause]) -> QuerySet[Pause]:
        return queryset.filter(verdict=self.value()) if self.value() in Verdict.values else queryset


class AutomatedFilter(admin.SimpleListFilter):
    title = "automated or person"
    parameter_name = "automated"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Automated (timeouts, system)"), ("no", "A person")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Pause]) -> QuerySet[Pause]:
        if self.value() == "yes":
            return queryset.filter(automated_decision())
        if self.value() == "no":
            return queryset.exclude(automated_decision())
        return queryset
