"""The "Decided approvals" history in Django admin: a reviewer's recent decisions, and every pause of one
conversation, discussion or approval request, so yesterday's decision is found without reading the raw
audit ledger.

A read-only changelist over Pause (the ``DecidedApproval`` proxy), scoped like the inbox inside SQL
(approvals.selectors.reviewable_pauses: an approver or admin sees every pause, other staff their own
conversations'). It lists every pause that no longer waits (RESOLVING, RESOLVED, CANCELLED), newest
decision first, starting at the reviewer's own decisions; ``?subject=<id>`` lists all of that subject's
pauses, the pending one included. A row opens the existing decision page, which shows a decided
pause's outcome. A subject the reviewer may not see, or a malformed id, is the inbox's styled 404.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import admin
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.forms import Media, Script
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.functional import cached_property
from django.utils.html import format_html
from django.utils.safestring import SafeString

from approvals.access import may_use_inbox
from approvals.admin import search as admin_search
from approvals.admin.audit import ACTOR_BADGE_STYLE
from approvals.admin.decided import shown_note
from approvals.admin.decision import SUBJECT_WORD, not_found_page
from approvals.admin.history_filters import (
    AutomatedFilter,
    DecidedByFilter,
    HistorySubjectFilter,
    VerdictFilter,
    subject_id_in,
)
from approvals.admin.inbox import SEARCH_HELP, agent_cell, subject_label
from approvals.admin.times import time_html
from approvals.agent_names import agent_name_expression
from approvals.models import DecidedApproval, PauseStatus, SubjectType
from approvals.pause_kinds import decision_page_for
from approvals.selectors import reviewable_pauses

DECISION_PAGE = "admin:approvals_pendingapproval_change"
NOT_FOUND_TEMPLATE = "admin/approvals/decidedapproval/not_found.html"
COUNT_CAP = 1_000  # rows counted for the pager: 20 pages of 50; filters and search find older ones
CLAMP_STYLE = "display:block;max-width:{};white-space:nowrap;overflow:hidden;text-overflow:ellipsis"
NARROWEST = 1280  # px: the row fits beside both admin sidebars from here; wider screens widen the text


def clamp_width(width_em: int, share: float = 0.0) -> str:
    """``width_em`` at 1280 px, plus ``share`` of every pixel the window has beyond that."""
    if not share:
        return f"{width_em}em"
    return f"max({width_em}em, calc({width_em}em + (100vw - {NARROWEST}px) * {share}))"


def clamped(text: str, width_em: int, share: float = 0.0) -> SafeString:
    """One line, cut with an ellipsis; the whole text on hover."""
    if not text:
        return format_html("{}", "-")
    return format_html(
        '<span class="hitl-clamp" title="{}" style="{}">{}</span>',
        text,
        CLAMP_STYLE.format(clamp_width(width_em, share)),
        text,
    )


class CappedCountPaginator(Paginator):
    """Counts at most ``COUNT_CAP`` rows (``COUNT(*)`` over a ``LIMIT`` subquery, which the index serves):
    decided pauses only ever grow, and a full count of them read every one (83 ms at 100,000, a scan; capped, 3 ms)."""

    @cached_property
    def counted(self) -> int:
        return self.object_list.order_by().values("pk")[: COUNT_CAP + 1].count()

    @property
    def capped(self) -> bool:
        """More rows than the pager counts: the page says "more than 10,000"."""
        return self.counted > COUNT_CAP

    @cached_property
    def count(self) -> int:
        return min(self.counted, COUNT_CAP)


def is_automated(pause: DecidedApproval) -> bool:
    """The audit's rule: a ``system:*`` decider (a timeout, the recovery) is not a person."""
    return bool(pause.automated or pause.decided_by.startswith("system:"))


def history_not_found(model_admin: admin.ModelAdmin, request: HttpRequest) -> HttpResponse:
    """The decision page's styled 404, worded for the history; the same page for unknown and hidden ids."""
    response = not_found_page(model_admin, request)
    if isinstance(response, TemplateResponse):  # lazy: the template can still be chosen
        response.template_name = NOT_FOUND_TEMPLATE
    return response


@admin.register(DecidedApproval)
class DecidedApprovalAdmin(admin.ModelAdmin):
    # Five columns, two lines at most, so the whole row fits beside the admin's two sidebars at 1280 px:
    # when and who, what was decided (and by a person or not), which conversation (and agent), why, the note.
    list_display = ("decided", "verdict_shown", "subject", "reason_line", "note_line")
    list_display_links = None  # the subject links to the decision page, not to a change form
    list_filter = (
        DecidedByFilter,
        VerdictFilter,
        AutomatedFilter,
        ("decided_at", admin.DateFieldListFilter),
        HistorySubjectFilter,
    )
    search_fields = ("reason",)  # shows the box; what it matches is approvals.admin.search
    search_help_text = SEARCH_HELP
    # decided_at DESC puts a subject's pending pause (no decision yet) first: what still waits is on top
    ordering = ("-decided_at", "-id")
    list_per_page = 50
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    actions = None
    paginator = CappedCountPaginator

    @property
    def media(self) -> Media:
        return super().media + Media(js=[Script("approvals/hitl_times.js", defer=True)])

    # --- access: the inbox's scope; read-only -------------------------------------------------------

    def get_queryset(self, request: HttpRequest) -> QuerySet[DecidedApproval]:
        # every status: the subject filter narrows to decided ones unless one subject is asked for
        pauses = reviewable_pauses(user=request.user, model=DecidedApproval)
        return pauses.annotate(agent_name=agent_name_expression())

    def has_module_permission(self, request: HttpRequest) -> bool:
        return may_use_inbox(request.user)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return may_use_inbox(request.user)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    # --- pages ------------------------------------------------------------------------------------

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        try:
            subject_id = subject_id_in(request)
        except ValueError:
            return history_not_found(self, request)
        if subject_id is None:
            return super().changelist_view(request, {"title": "Decided approvals", **(extra_context or {})})
        subject_type = self.visible_subject_type(request, subject_id)
        if subject_type is None:
            return history_not_found(self, request)  # unknown and someone else's: the same page
        title = f"All pauses of {SUBJECT_WORD.get(subject_type, 'Subject').lower()} {subject_id}"
        return super().changelist_view(request, {**(extra_context or {}), "title": title})

    def visible_subject_type(self, request: HttpRequest, subject_id: uuid.UUID) -> str | None:
        """The subject's type if this reviewer may see one of its pauses, else None: one query."""
        pauses = reviewable_pauses(user=request.user, model=DecidedApproval)
        found = pauses.filter(subject_type__in=SubjectType.values, subject_id=subject_id)
        return found.values_list("subject_type", flat=True).first()

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict | None = None
    ) -> HttpResponse:
        """A decided pause is read on its decision page; a malformed or hidden id is the styled 404."""
        try:
            key = uuid.UUID(str(object_id))
        except ValueError:
            return history_not_found(self, request)
        if not reviewable_pauses(user=request.user, ids=[key]).exists():
            return history_not_found(self, request)
        return HttpResponseRedirect(reverse(DECISION_PAGE, args=[key]))

    def history_view(
        self, request: HttpRequest, object_id: str, extra_context: dict | None = None
    ) -> HttpResponse:
        return self.change_view(request, object_id)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[DecidedApproval], search_term: str
    ) -> tuple[QuerySet[DecidedApproval], bool]:
        """The inbox's search (approvals.admin.search): every word matches a reason, owner, agent or id."""
        return admin_search.search_pauses(queryset, search_term), False

    # --- columns ----------------------------------------------------------------------------------

    @admin.display(description="decided", ordering="decided_at")
    def decided(self, pause: DecidedApproval) -> SafeString:
        when = time_html(pause.decided_at, empty="not yet")
        if not pause.decided_by:
            return when
        by = pause.decided_by
        return format_html(
            '{}<br><span class="hitl-decided-by" title="{}" style="{}">by {}</span>',
            when,
            by,
            CLAMP_STYLE.format(clamp_width(9)),
            by,
        )

    @admin.display(description="verdict", ordering="verdict")
    def verdict_shown(self, pause: DecidedApproval) -> SafeString:
        if pause.status == PauseStatus.PENDING:
            return format_html('<span class="hitl-verdict">{}</span>', "waiting")
        return format_html(
            '<span class="hitl-verdict">{}</span><br>{}',
            pause.verdict or pause.status,
            automated_badge(pause),
        )

    @admin.display(description="conversation", ordering="subject_id")
    def subject(self, pause: DecidedApproval) -> SafeString:
        link = format_html(
            '<a href="{}" class="hitl-history-open">{}</a>',
            reverse(DECISION_PAGE, args=[pause.pk]),
            subject_label(pause),
        )
        agent = agent_cell(pause)
        if agent == "-":
            return link
        return format_html(
            '{}<br><span class="hitl-agent" style="{}">{}</span>',
            link,
            CLAMP_STYLE.format(clamp_width(9)),
            agent,
        )

    @admin.display(description="reason", ordering="reason")
    def reason_line(self, pause: DecidedApproval) -> SafeString:
        page = decision_page_for(pause.kind)  # a kind's headline: a group's names its phase
        return clamped(page.headline(pause) if page else pause.reason, 10, share=0.45)

    @admin.display(description="note")
    def note_line(self, pause: DecidedApproval) -> SafeString:
        return clamped(shown_note(pause), 8, share=0.3)


def automated_badge(pause: DecidedApproval) -> SafeString:
    """The audit ledger's neutral badge: Django's boolean icon is a red ✖ that reads as "failed"."""
    word = "automated" if is_automated(pause) else "person"
    return format_html(
        '<span class="hitl-actor-kind hitl-actor-{}" style="{}">{}</span>', word, ACTOR_BADGE_STYLE, word
    )
