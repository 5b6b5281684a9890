"""The audit ledger in Django admin: read-only for everyone, with chain verification and export.

- Staff and HITL admins see the changelist and each entry (the admin site itself requires staff).
  Nobody adds, changes or deletes an entry here, superusers included: the ledger is append-only and
  only the services write it.
- Filters: verb, actor, automated, verdict, date (hierarchy), subject (a conversation or discussion
  id, as ``GET /audit/entries?conversation=``) and pause id; the search box takes any of those ids.
- "Verify chains" checks the chains of the subjects in the current selection (at most
  ``MAX_VERIFIED_SUBJECTS``), an entry's page shows its subject's chain, and the whole ledger is
  verified on request only, because it takes seconds per hundred thousand entries.
- "Export CSV" / "Export JSON Lines" stream the current selection through approvals.audit_export.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, StreamingHttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from approvals.access import is_admin, is_staff_member
from approvals.admin.filters import ActorFilter, PauseFilter, SubjectFilter, VerbFilter, VerdictFilter
from approvals.audit import ChainProblem, ChainReport, verify_ledger
from approvals.audit_export import FORMATS, export_response
from approvals.models import AuditEntry, SubjectType

MAX_VERIFIED_SUBJECTS = 50
MAX_SHOWN_PROBLEMS = 200
# Our own query parameters, removed before the admin reads the rest as filters.
FORMAT_PARAM = "format"
SCOPE_PARAM = "scope"
WHOLE_LEDGER = "ledger"


def may_read_ledger(user: Any) -> bool:
    """Staff and HITL admins read the ledger; the admin site lets in only active staff anyway."""
    if not user or not user.is_authenticated or not user.is_active:
        return False
    return is_staff_member(user) or is_admin(user)


@dataclass(frozen=True)
class Verification:
    """What one "Verify" run checked and found, for the template."""

    scope: str
    report: ChainReport
    seconds: float

    @property
    def shown_problems(self) -> list[ChainProblem]:
        return self.report.problems[:MAX_SHOWN_PROBLEMS]

    @property
    def hidden_problems(self) -> int:
        return max(0, len(self.report.problems) - MAX_SHOWN_PROBLEMS)


def verify_subjects(subjects: list[tuple[str, uuid.UUID]]) -> ChainReport:
    """One report over several subjects' chains, each read in its own snapshot."""
    combined = ChainReport()
    for subject_type, subject_id in subjects:
        report = verify_ledger(subject_type=subject_type, subject_id=subject_id)
        combined.entries_checked += report.entries_checked
        combined.subjects_checked += report.subjects_checked
        combined.problems.extend(report.problems)
    return combined


class SelectionOnly(ChangeList):
    """The changelist's filtered queryset without counting or fetching a page (export, verify)."""

    def get_results(self, request: HttpRequest) -> None:
        self.result_count = self.full_result_count = 0
        self.result_list = []
        self.can_show_all = self.multi_page = False


ACTOR_BADGE_STYLE = (
    "display:inline-block;padding:1px 8px;border-radius:10px;font-size:0.85em;"
    "border:1px solid var(--hairline-color,#ccc);color:var(--body-quiet-color,#555)"
)


class AuditEntryAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "created_at",
        "verb",
        "actor",
        "automated_badge",
        "verdict_shown",
        "subject_link",
        "sequence",
        "pause_link",
    )
    list_display_links = ("id", "created_at")
    list_filter = (VerbFilter, ActorFilter, "automated", VerdictFilter, SubjectFilter, PauseFilter)
    date_hierarchy = "created_at"
    search_fields = ("actor",)  # any term works: see get_search_results
    search_help_text = "A subject, conversation or pause id, an exact actor or an exact verb."
    ordering = ("-created_at", "-id")
    list_per_page = 100
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER  # counts per choice over millions of entries: too slow
    fields = (
        ("id", "sequence"),
        ("subject_type", "subject_id"),
        "conversation_id",
        ("pause_id", "epoch"),
        ("verb", "actor", "automated_badge"),
        "verdict",
        "note",
        "detail_json",
        "created_at",
        "prev_hash",
        "entry_hash",
        "chain_verification",
    )
    readonly_fields = tuple(name for row in fields for name in ((row,) if isinstance(row, str) else row))

    # --- read-only for everyone ---------------------------------------------------------------------

    def has_module_permission(self, request: HttpRequest) -> bool:
        return may_read_ledger(request.user)

    def has_view_permission(self, request: HttpRequest, obj: AuditEntry | None = None) -> bool:
        return may_read_ledger(request.user)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: AuditEntry | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: AuditEntry | None = None) -> bool:
        return False

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    # --- the list ---------------------------------------------------------------------------------

    @admin.display(description="automated", ordering="automated")
    def automated_badge(self, entry: AuditEntry) -> SafeString:
        """Who acted, as a neutral badge: Django's boolean icon is a red ✖ that reads as "failed"."""
        word = "automated" if entry.automated else "person"
        return format_html(
            '<span class="hitl-actor-kind hitl-actor-{}" style="{}">{}</span>', word, ACTOR_BADGE_STYLE, word
        )

    @admin.display(description="verdict", ordering="verdict")
    def verdict_shown(self, entry: AuditEntry) -> str:
        return entry.verdict or "—"

    @admin.display(description="subject")
    def subject_link(self, entry: AuditEntry) -> SafeString:
        return format_html(
            '<a href="{}" title="entries about this subject">{} {}</a>',
            self._url("changelist", {"subject": entry.subject_id}),
            entry.subject_type,
            str(entry.subject_id)[:8] + "…",
        )

    @admin.display(description="pause")
    def pause_link(self, entry: AuditEntry) -> SafeString | str:
        if entry.pause_id is None:
            return "—"
        return format_html(
            '<a href="{}" title="entries of this pause">{}</a>',
            self._url("changelist", {"pause": entry.pause_id}),
            str(entry.pause_id)[:8] + "…",
        )

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[AuditEntry], search_term: str
    ) -> tuple[QuerySet[AuditEntry], bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        try:
            value = uuid.UUID(term)
        except ValueError:
            return queryset.filter(Q(actor=term) | Q(verb=term)), False
        # Each alternative has an index (naming the subject types lets PostgreSQL use the chain's).
        about = (
            Q(subject_type__in=SubjectType.values, subject_id=value)
            | Q(conversation_id=value)
            | Q(pause_id=value)
        )
        return queryset.filter(about), False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        selection = request.GET.copy()
        selection.pop("p", None)
        selection.pop("e", None)
        # GET.dict() keeps the last value of a repeated parameter, as the changelist's filters do.
        current = selection.dict()
        links: dict[str, Any] = {
            f"export_{export_format}_url": self._url("export", {**current, FORMAT_PARAM: export_format})
            for export_format in FORMATS
        }
        links["verify_url"] = self._url("verify", current)
        links["verify_ledger_url"] = self._url("verify", {SCOPE_PARAM: WHOLE_LEDGER})
        links["has_selection"] = any(name != "o" and selection[name] for name in selection)
        return super().changelist_view(request, {**(extra_context or {}), **links})

    # --- one entry --------------------------------------------------------------------------------

    @admin.display(description="detail")
    def detail_json(self, entry: AuditEntry) -> SafeString:
        return format_html(
            "<pre>{}</pre>", json.dumps(entry.detail, indent=2, ensure_ascii=False, sort_keys=True)
        )

    @admin.display(description="chain of this subject")
    def chain_verification(self, entry: AuditEntry) -> SafeString:
        report = verify_ledger(subject_type=entry.subject_type, subject_id=entry.subject_id)
        if report.clean:
            return format_html(
                '<strong class="audit-chain-clean">Clean</strong>: {} entries checked, no problem found.',
                report.entries_checked,
            )
        return format_html(
            '<strong class="audit-chain-problems">{} problem(s)</strong> in {} entries checked:<ul>{}</ul>',
            len(report.problems),
            report.entries_checked,
            format_html_join("", "<li>{}</li>", ((str(problem),) for problem in report.problems)),
        )

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        entry = self.get_object(request, object_id)
        links: dict[str, Any] = {}
        if entry is not None:
            links = {
                "subject_entries_url": self._url("changelist", {"subject": entry.subject_id}),
                "verify_subject_url": self._url("verify", {"subject": entry.subject_id}),
                "export_subject_url": self._url("export", {"subject": entry.subject_id, FORMAT_PARAM: "csv"}),
            }
        return super().change_view(request, object_id, form_url, {**(extra_context or {}), **links})

    # --- export and verify ------------------------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        own = [
            path("export/", self.admin_site.admin_view(self.export_view), name="{}_{}_export".format(*info)),
            path("verify/", self.admin_site.admin_view(self.verify_view), name="{}_{}_verify".format(*info)),
        ]
        return [*own, *super().get_urls()]

    def export_view(self, request: HttpRequest) -> StreamingHttpResponse | HttpResponse:
        """The current selection of the changelist (its filters and search), oldest first."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        export_format = request.GET.get(FORMAT_PARAM) or "csv"
        if export_format not in FORMATS:
            return HttpResponseBadRequest(f"Unknown export format {export_format!r}: use csv or jsonl.")
        try:
            selection = self._selection(request, without=(FORMAT_PARAM,))
        except IncorrectLookupParameters as error:
            return HttpResponseBadRequest(f"Bad filter: {error}")
        return export_response(request, selection.order_by("created_at", "id"), export_format)

    def verify_view(self, request: HttpRequest) -> HttpResponse:
        """Verify the chains of the selection's subjects, or the whole ledger when asked for it."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        context: dict[str, Any] = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Verify audit chains",
            "changelist_url": self._url("changelist"),
            "verify_ledger_url": self._url("verify", {SCOPE_PARAM: WHOLE_LEDGER, "run": 1}),
        }
        scope = request.GET.get(SCOPE_PARAM)
        if scope == WHOLE_LEDGER:
            if request.GET.get("run"):
                started = time.monotonic()
                report = verify_ledger()
                context["verification"] = Verification("the whole ledger", report, time.monotonic() - started)
            return TemplateResponse(request, "admin/approvals/auditentry/verify.html", context)
        try:
            selection = self._selection(request, without=(SCOPE_PARAM,))
        except IncorrectLookupParameters as error:
            return HttpResponseBadRequest(f"Bad filter: {error}")
        subjects = list(
            selection.order_by("subject_type", "subject_id")
            .values_list("subject_type", "subject_id")
            .distinct()[: MAX_VERIFIED_SUBJECTS + 1]
        )
        context["selection_url"] = self._url("changelist", request.GET.dict())
        if len(subjects) > MAX_VERIFIED_SUBJECTS:
            context["too_many_subjects"] = MAX_VERIFIED_SUBJECTS
            return TemplateResponse(request, "admin/approvals/auditentry/verify.html", context)
        started = time.monotonic()
        report = verify_subjects(subjects)
        scope_text = (
            "the subject of the selection"
            if len(subjects) == 1
            else f"the {len(subjects)} subjects of the selection"
        )
        context["verification"] = Verification(scope_text, report, time.monotonic() - started)
        context["subjects"] = subjects
        return TemplateResponse(request, "admin/approvals/auditentry/verify.html", context)

    def _selection(self, request: HttpRequest, *, without: tuple[str, ...]) -> QuerySet[AuditEntry]:
        """The entries the changelist shows for the request's query string minus our own parameters."""
        request.GET = request.GET.copy()
        for name in without:
            request.GET.pop(name, None)
        return self.get_changelist_instance(request).queryset

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        if request.resolver_match and request.resolver_match.url_name in (
            f"{self.opts.app_label}_{self.opts.model_name}_export",
            f"{self.opts.app_label}_{self.opts.model_name}_verify",
        ):
            return SelectionOnly
        return super().get_changelist(request, **kwargs)

    def _url(self, view: str, params: Mapping[str, Any] | None = None) -> str:
        base = reverse(f"{self.admin_site.name}:{self.opts.app_label}_{self.opts.model_name}_{view}")
        return f"{base}?{urlencode(params)}" if params else base


admin.site.register(AuditEntry, AuditEntryAdmin)
