"""The "Pending approvals" inbox in Django admin: a role-scoped, read-only list of PENDING pauses.

A thin adapter: the list is a query over Pause scoped inside SQL (approvals.selectors.reviewable_pauses); opening a row
shows the decision page (approvals.admin.decision) and the bulk actions decide through
approvals.admin.bulk. Nothing here changes a pause except through ``decide_pause``.

The list (templates/admin/approvals/pendingapproval/change_list.html) puts the deadline and timeout policy
first and keeps its times live (approvals.admin.times); its script polls ``updates/``
(approvals.admin.inbox_updates) to announce new pauses. Its query budget is 9 (approvals.admin.lookups,
approvals.admin.paging).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.contrib import admin
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.postgres.aggregates import StringAgg
from django.core.paginator import Paginator
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext

from approvals.access import may_use_inbox
from approvals.admin import bulk as admin_bulk
from approvals.admin import decision as admin_decision
from approvals.admin import search as admin_search
from approvals.admin.filters import AgentFilter, OverdueFilter, OwnerFilter, PauseTypeFilter, SurfaceFilter
from approvals.admin.inbox_updates import POLL_SECONDS, inbox_updates_view
from approvals.admin.paging import CappedCountPaginator
from approvals.admin.scope import may_decide
from approvals.admin.times import time_html
from approvals.agent_names import agent_name_expression
from approvals.models import Pause, PauseKind, PauseStatus, PendingApproval, SubjectType, Vote
from approvals.pause_kinds import decision_page_for
from approvals.selectors import INBOX_ORDER, reviewable_pauses


def agent_label(agent_id: Any, version: int | None, name: str | None) -> str:
    """Shows 'account-bot v3' with the full id on hover; the short id when the agent is gone."""
    shown = name or f"{str(agent_id)[:8]}…"
    return format_html('<span title="{}">{} v{}</span>', agent_id, shown, version or "?")


# What a row's subject id is preceded by: nothing for a conversation (the column's own word).
SUBJECT_PREFIX = {SubjectType.DISCUSSION: "discussion ", SubjectType.APPROVAL_REQUEST: "request "}


def subject_label(pause: Pause) -> str:
    """The subject's short id (the whole one on hover), after the word for its type."""
    return format_html(
        '{}<span title="{}">{}…</span>',
        SUBJECT_PREFIX.get(pause.subject_type, ""),
        pause.subject_id,
        str(pause.subject_id)[:8],
    )


def requesting_agent(pause: Pause) -> str | None:
    """The agent an approval request names: it runs elsewhere, so the pause has no agent id, and the
    name the agent filed under is kept in the pause's details (read with the row, no query)."""
    if pause.subject_type != SubjectType.APPROVAL_REQUEST:
        return None
    name = (pause.details or {}).get("agent")
    return str(name) if name else None


CALLS_SHOWN = 3  # calls named on a row; more are counted


def calls_line(pause: Pause) -> str:
    """A tool-call pause's calls on one line, each its tool and, for an HTTP call, its method and path
    (``transfer_funds → POST /v1/transfers``; never the host, query, headers or body); empty otherwise."""
    if pause.kind != PauseKind.TOOL_CALL:
        return ""
    calls = [call for call in (pause.details or {}).get("calls") or [] if isinstance(call, dict)]
    if not calls:  # a batch without its calls in the pause's details: the tool names alone
        calls = [{"toolName": name} for name in pause.tool_names or []]
    parts = []
    for call in calls[:CALLS_SHOWN]:
        name = str(call.get("toolName") or "(unnamed tool)")
        preview = call.get("requestPreview")
        target = (preview.get("url") or preview.get("uri")) if isinstance(preview, dict) else None
        if isinstance(preview, dict) and preview.get("method") and target:
            parts.append(f"{name} → {preview['method']} {urlsplit(str(target)).path or '/'}")
        else:
            parts.append(name)
    if len(calls) > CALLS_SHOWN:
        parts.append(f"and {len(calls) - CALLS_SHOWN} more")
    return ", ".join(parts)


def voters_expression() -> Subquery:
    """The names of a pause's voters so far, oldest first, in the page's own query (a correlated subquery:
    evaluated for the rows of the page only)."""
    names = (
        Vote.objects.filter(pause=OuterRef("pk"))
        .order_by()
        .values("pause")
        .annotate(names=StringAgg("voter", ", ", order_by="voted_at"))
        .values("names")
    )
    return Subquery(names)


def votes_line(pause: Pause) -> str:
    """A pause that needs several approvals: "1 of 2 approvals: alice" (the times are on its page)."""
    if pause.required_approvals <= 1:
        return ""
    voters = getattr(pause, "voters", None) or ""
    count = len(voters.split(", ")) if voters else 0
    text = f"{count} of {pause.required_approvals} approvals" + (f": {voters}" if voters else "")
    return format_html('<span class="hitl-reason-votes">{}</span>', text)


def agent_cell(pause: Pause) -> str:
    """The agent column of the inbox and the history: a conversation's agent by its current name and
    version, an approval request's by the name it filed under; "-" when the pause has none."""
    if pause.agent_id is not None:
        return agent_label(pause.agent_id, pause.agent_version, getattr(pause, "agent_name", None))
    if (name := requesting_agent(pause)) is not None:
        return format_html('<span title="{}">{}</span>', "the agent that filed this approval request", name)
    return "-"


SEARCH_HELP = (
    "Reason, owner's username or agent name (any part), or a conversation, discussion, approval request, "
    "group, agent or pause id: whole, or the 8-character short id shown in the list."
)


@admin.register(PendingApproval)
class PendingApprovalAdmin(admin.ModelAdmin):
    # The urgent columns first: what is due stays in view at 1280 px, and what is asked (the reason, a tool
    # call's calls, who asked, the agent) takes the rest; inbox_list.css drops the minor columns on narrow
    # screens.
    list_display = (
        "deadline",
        "on_timeout",
        "conversation",
        "reason_line",
        "agent",
        "owner_name",
        "pause_type",
        "group_phase",
        "tools",
        "paused",
    )
    list_display_links = ("conversation",)
    list_filter = (PauseTypeFilter, SurfaceFilter, AgentFilter, OwnerFilter, OverdueFilter)
    search_fields = ("reason",)  # shows the box; what it matches is approvals.admin.search
    search_help_text = SEARCH_HELP
    ordering = INBOX_ORDER  # what is due first, as every inbox (approvals.selectors.due_first)
    list_per_page = 50
    show_full_result_count = False
    # Django's "Show counts" would run a COUNT per filter choice (up to 50 agents and 50 owners) over every
    # pending pause: far past the page's query budget at 100,000 pending
    show_facets = admin.ShowFacets.NEVER
    actions = (admin_bulk.approve_selected, admin_bulk.reject_selected)

    # --- access: staff only, scoped per role; nobody adds, deletes or edits fields ----------------

    def get_queryset(self, request: HttpRequest) -> QuerySet[PendingApproval]:
        # the agents' current names ride on the page's own query (approvals.agent_names)
        pauses = reviewable_pauses(
            user=request.user, status=PauseStatus.PENDING, model=PendingApproval, decidable_now=True
        )
        return pauses.annotate(agent_name=agent_name_expression(), voters=voters_expression())

    def has_module_permission(self, request: HttpRequest) -> bool:
        return may_use_inbox(request.user)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return may_use_inbox(request.user) if obj is None else may_decide(request.user, obj)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_view_permission(request, obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    # --- pages ------------------------------------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        prefix = f"{self.opts.app_label}_{self.opts.model_name}"
        bulk = path("bulk-decide/", self.admin_site.admin_view(self.bulk_decide_view), name=f"{prefix}_bulk")
        updates = path("updates/", self.admin_site.admin_view(inbox_updates_view), name=f"{prefix}_updates")
        return [bulk, updates, *super().get_urls()]

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        # what the page script needs to ask for new work (approvals.admin.inbox_updates); no query
        context = {
            "title": "Pending approvals",  # not Django's "Select pending approval to change"
            "hitl_updates_url": reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_updates"),
            "hitl_shown_at": timezone.now().isoformat(),
            "hitl_poll_ms": POLL_SECONDS * 1000,
            **(extra_context or {}),
        }
        return super().changelist_view(request, extra_context=context)

    def get_paginator(
        self, request: HttpRequest, queryset: QuerySet, per_page: int, **kwargs: Any
    ) -> Paginator:
        return CappedCountPaginator(queryset, per_page, **kwargs)

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict | None = None
    ) -> HttpResponse:
        return admin_decision.decision_view(self, request, object_id)

    def bulk_decide_view(self, request: HttpRequest) -> HttpResponse:
        return admin_bulk.bulk_decide_view(self, request)

    def response_action(self, request: HttpRequest, queryset: QuerySet) -> HttpResponse | None:
        # a malformed or hidden id in the selection is the styled 404 (Django fails on a malformed one)
        return admin_bulk.refused_selection(self, request) or super().response_action(request, queryset)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[PendingApproval], search_term: str
    ) -> tuple[QuerySet[PendingApproval], bool]:
        """Every word matches a reason, owner, agent name or id (approvals.admin.search); no join, no duplicates."""
        return admin_search.search_pauses(queryset, search_term), False

    # --- columns ----------------------------------------------------------------------------------

    def action_checkbox(self, pause: PendingApproval) -> str:
        """Django's row checkbox, the same HTML, without a form widget rendered through the template engine
        per row (the list's largest Python cost at 50 rows)."""
        return format_html(
            '<input type="checkbox" name="{}" value="{}" class="action-select" aria-label="{}">',
            ACTION_CHECKBOX_NAME,
            pause.pk,
            format_html(gettext("Select this object for an action - {}"), str(pause)),
        )

    @admin.display(description="conversation", ordering="subject_id")
    def conversation(self, pause: PendingApproval) -> str:
        return subject_label(pause)

    @admin.display(description="group / phase / action", ordering="group_id")
    def group_phase(self, pause: PendingApproval) -> str:
        """A group pause's group and where its discussion stands, an approval request's action and its
        pinned request's line; the kind says how (no query per row)."""
        page = decision_page_for(pause.kind)
        where = page.inbox_label(pause) if page else ""
        if pause.group_id is None:
            return where or "-"
        name = page.inbox_where(pause) if page else ""
        group = format_html(
            '<span class="hitl-group" title="{}">{}</span>',
            pause.group_id,
            name or f"{str(pause.group_id)[:8]}…",
        )
        return format_html("{}<br>{}", group, where) if where else group

    @admin.display(description="agent", ordering="agent_id")
    def agent(self, pause: PendingApproval) -> str:
        return agent_cell(pause)

    @admin.display(description="owner", ordering="owner__username")
    def owner_name(self, pause: PendingApproval) -> str:
        return pause.owner.get_username() if pause.owner_id else "-"

    @admin.display(description="pause type", ordering="kind")
    def pause_type(self, pause: PendingApproval) -> str:
        return pause.kind  # the code, as the REST API and the docs name it

    @admin.display(description="timeout policy", ordering="timeout_policy")
    def on_timeout(self, pause: PendingApproval) -> str:
        return pause.timeout_policy

    @admin.display(description="paused", ordering="paused_at")
    def paused(self, pause: PendingApproval) -> str:
        return time_html(pause.paused_at)

    @admin.display(description="reason", ordering="reason")
    def reason_line(self, pause: PendingApproval) -> str:
        """One clamped line; the whole reason on hover, and expanded by a click or Enter (the page script).

        Under it, who asked and which agent (an approval request's agent and action): shown only where the
        owner, agent and action columns are dropped (narrower screens, inbox_list.css), so a reviewer at
        1280 px still reads names, not ids. An approval request's line may be cut: all of it on hover."""
        page = decision_page_for(pause.kind)
        headline = page.headline(pause) if page else pause.reason
        reason = format_html(
            '<span class="hitl-reason" title="{}" tabindex="0" role="button" aria-expanded="false">{}</span>',
            headline,
            headline,
        )
        if pause.subject_type == SubjectType.APPROVAL_REQUEST:
            label = self.group_phase(pause)
            return format_html(
                '{}<span class="hitl-reason-who" title="{}">{} · {}</span>',
                reason,
                f"{requesting_agent(pause) or '-'} · {label}",
                agent_cell(pause),
                label,
            )
        who = [self.owner_name(pause)]
        if pause.agent_id is not None:
            who.append(self.agent(pause))
        if pause.group_id is not None and page is not None and (group := page.inbox_where(pause)):
            who.append(group)
        asked = calls_line(pause)
        return format_html(
            '{}{}<span class="hitl-reason-who">{}</span>{}',
            reason,
            format_html('<span class="hitl-reason-calls" title="{}">{}</span>', asked, asked)
            if asked
            else "",
            format_html_join(" · ", "{}", ((part,) for part in who)),
            votes_line(pause),
        )

    @admin.display(description="tools")
    def tools(self, pause: PendingApproval) -> str:
        return ", ".join(str(name) for name in pause.tool_names or []) or "-"

    @admin.display(description="deadline", ordering="due_at")
    def deadline(self, pause: PendingApproval) -> str:
        """The time left in the shared format; the OVERDUE word is rendered for every deadline and shown by CSS
        when it has passed (server-side here, or later by the page script marking the row)."""
        if pause.due_at is None:
            return "no deadline"
        overdue = pause.due_at < timezone.now()
        return format_html(
            '<strong class="hitl-overdue-word{}">OVERDUE</strong> {}',
            " is-overdue" if overdue else "",
            time_html(pause.due_at, deadline=True),
        )
