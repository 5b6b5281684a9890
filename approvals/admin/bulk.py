"""Approve or reject several RULE pauses at once, through a confirmation page, one decision each.

Each pause is decided by its own ``decide_pause`` call (its own transaction and audit entry), so one
that was decided meanwhile or cannot be continued does not stop the others. Tool-call (and phase and
task) pauses are never decided in bulk: the reviewer opens each one. A pause the reviewer may not
decide because they raised it (allowSelfApproval=false) is left out, and refused by the service if posted.

A selection or a confirmation naming a malformed id, or a pause this reviewer may not see, is answered
with the decision page's styled 404 and decides nothing: the same page for an unknown id and someone
else's pause (no existence oracle), where Django would fail on a malformed id with a server error.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import ModelAdmin
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from approvals.access import require_decider
from approvals.actors import actor_for_user
from approvals.admin.decision import SUBJECT_WORD, decided_message, not_found_page
from approvals.admin.outlook import latest_inputs, short_input
from approvals.admin.scope import may_read_turns
from approvals.agent_names import agent_name_expression
from approvals.decision_input import NOTE_MAX, DecisionInput, parse_decision_body, parse_verdict
from approvals.decisions import decide_pause
from approvals.models import Pause, PauseKind, PauseStatus, Verdict
from approvals.selectors import due_first, reviewable_pauses
from approvals.self_approval import SELF_APPROVAL_DETAIL, is_self_approval
from approvals.votes import tally_of
from common.errors import ApplicationError, BadRequest, Forbidden, NotFound, WrongState

BULK_MAX = 100
TEMPLATE = "admin/approvals/pendingapproval/bulk_confirm.html"
DECIDED, ALREADY_DECIDED, REFUSED, VOTED = "decided", "already decided", "refused", "voted"
TOO_MANY = f"pause_ids: select at most {BULK_MAX} pauses for one bulk decision; nothing was decided."


@dataclass(frozen=True)
class BulkOutcome:
    pause_id: uuid.UUID
    label: str
    result: str
    detail: str = ""


def _label(pause: Pause) -> str:
    return f"{SUBJECT_WORD.get(pause.subject_type, 'Subject').lower()} {pause.subject_id}"


def _changelist(model_admin: ModelAdmin) -> str:
    return reverse(f"admin:{model_admin.opts.app_label}_{model_admin.opts.model_name}_changelist")


def _may_decide(user: Any, pause: Pause) -> bool:
    try:
        require_decider(user, exists=True, owner_id=pause.owner_id, what="pause")
    except (Forbidden, NotFound):
        return False
    return True


def decide_each(*, user: Any, pause_ids: list[uuid.UUID], decision: DecisionInput) -> list[BulkOutcome]:
    """One ``decide_pause`` per RULE pause, in the order given; every pause gets an outcome."""
    found = {p.id: p for p in reviewable_pauses(user=user, ids=pause_ids)}
    actor = actor_for_user(user)
    outcomes = []
    for pause_id in pause_ids:
        pause = found.get(pause_id)
        if pause is None or not _may_decide(user, pause):  # someone else's pause looks like a missing one
            outcomes.append(BulkOutcome(pause_id, f"pause {pause_id}", REFUSED, "not found"))
            continue
        label = _label(pause)
        if pause.kind != PauseKind.RULE:
            outcomes.append(
                BulkOutcome(pause_id, label, REFUSED, "only rule pauses are decided in bulk; open it")
            )
            continue
        if pause.status != PauseStatus.PENDING:
            outcomes.append(BulkOutcome(pause_id, label, ALREADY_DECIDED, decided_message(pause)))
            continue
        try:
            decided = decide_pause(
                surface=pause.surface,
                subject_type=pause.subject_type,
                subject_id=pause.subject_id,
                decision=decision,
                actor=actor,
                expected_pause_id=pause.id,
                what=SUBJECT_WORD.get(pause.subject_type, "Subject"),
            )
        except WrongState as exc:
            pause.refresh_from_db()
            if pause.status != PauseStatus.PENDING:
                outcomes.append(BulkOutcome(pause_id, label, ALREADY_DECIDED, decided_message(pause)))
            else:
                outcomes.append(BulkOutcome(pause_id, label, REFUSED, exc.detail))
        except ApplicationError as exc:
            outcomes.append(BulkOutcome(pause_id, label, REFUSED, exc.detail))
        else:
            if decided.status == PauseStatus.PENDING:  # one approval of several: it waits for more
                outcomes.append(BulkOutcome(pause_id, label, VOTED, tally_of(decided).text()))
            else:
                outcomes.append(BulkOutcome(pause_id, label, DECIDED))
    return outcomes


def report(request: HttpRequest, verdict: str, outcomes: list[BulkOutcome]) -> None:
    decided = [o for o in outcomes if o.result == DECIDED]
    if decided:
        verb = "Approved" if verdict == Verdict.APPROVED else "Rejected"
        messages.success(
            request,
            f"{verb} {len(decided)} pause(s), each audited on its own: "
            + ", ".join(o.label for o in decided)
            + ".",
        )
    for outcome in outcomes:
        if outcome.result == VOTED:
            messages.success(request, f"{outcome.label}: your approval is recorded ({outcome.detail}).")
        elif outcome.result == ALREADY_DECIDED:
            messages.warning(request, f"{outcome.label}: {outcome.detail}")
        elif outcome.result == REFUSED:
            messages.error(request, f"{outcome.label}: not decided ({outcome.detail}).")


def render_confirmation(
    model_admin: ModelAdmin,
    request: HttpRequest,
    *,
    verdict: str,
    pauses: list[Pause],
    note: str = "",
    errors: list[str] = (),
) -> HttpResponse:
    rule = [p for p in pauses if p.kind == PauseKind.RULE]
    own = [p for p in rule if is_self_approval(p, request.user.pk)]
    rule = [p for p in rule if p not in own]
    context = {
        "rows": confirmation_rows(request.user, rule),
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "title": f"{'Approve' if verdict == Verdict.APPROVED else 'Reject'} {len(rule)} rule pause(s)?",
        "verdict": verdict,
        "verb": "approve" if verdict == Verdict.APPROVED else "reject",
        "to_decide": rule,
        "excluded": [p for p in pauses if p.kind != PauseKind.RULE],
        "only_cancel": own,
        "self_approval_detail": SELF_APPROVAL_DETAIL,
        "note": note,
        "note_max": NOTE_MAX,
        "errors": list(errors),
        "changelist_url": _changelist(model_admin),
        "bulk_url": reverse(f"admin:{model_admin.opts.app_label}_{model_admin.opts.model_name}_bulk"),
    }
    return TemplateResponse(request, TEMPLATE, context, status=400 if errors else 200)


@dataclass(frozen=True)
class ConfirmationRow:
    """One pause of the confirmation, told apart from the others: who asked, what, of which agent."""

    pause: Pause
    agent: str
    requester_input: str


def with_names(pauses: QuerySet) -> QuerySet:
    """The pauses with their owners and their agents' current names, in the page's one query (the
    inbox's own queryset carries the names already)."""
    pauses = pauses.select_related("owner")
    if "agent_name" in pauses.query.annotations:
        return pauses
    return pauses.annotate(agent_name=agent_name_expression())


def _agent_text(pause: Pause) -> str:
    """'account-bot v3'; the short id when the agent is gone (as the inbox shows it)."""
    if not pause.agent_id:
        return "-"
    name = getattr(pause, "agent_name", None) or f"{str(pause.agent_id)[:8]}…"
    return f"{name} v{pause.agent_version or '?'}"


def confirmation_rows(user: Any, pauses: list[Pause]) -> list[ConfirmationRow]:
    """Each pause with its agent's name and version and its requester's latest input (clamped), read for
    the whole page at once (one query per surface); the input only where the reviewer may read turns."""
    readable = [pause for pause in pauses if may_read_turns(user, pause)]
    inputs = latest_inputs(readable)
    return [
        ConfirmationRow(
            pause=pause,
            agent=_agent_text(pause),
            requester_input=short_input(inputs.get(pause.pk)) if pause in readable else "",
        )
        for pause in pauses
    ]


def _confirm(
    model_admin: ModelAdmin, request: HttpRequest, queryset: QuerySet, verdict: str
) -> HttpResponse | None:
    pauses = list(due_first(with_names(queryset))[: BULK_MAX + 1])
    if not pauses:  # decided meanwhile, or not this reviewer's: the queryset is scoped and PENDING only
        model_admin.message_user(
            request, "None of the selected pauses is pending for you: nothing to decide.", messages.WARNING
        )
        return None
    if len(pauses) > BULK_MAX:  # a 400 page saying so, nothing offered to confirm
        return render_confirmation(model_admin, request, verdict=verdict, pauses=[], errors=[TOO_MANY])
    return render_confirmation(model_admin, request, verdict=verdict, pauses=pauses)


@admin.action(description="Approve selected rule pauses…", permissions=["change"])
def approve_selected(
    model_admin: ModelAdmin, request: HttpRequest, queryset: QuerySet
) -> HttpResponse | None:
    return _confirm(model_admin, request, queryset, Verdict.APPROVED)


@admin.action(description="Reject selected rule pauses…", permissions=["change"])
def reject_selected(model_admin: ModelAdmin, request: HttpRequest, queryset: QuerySet) -> HttpResponse | None:
    return _confirm(model_admin, request, queryset, Verdict.REJECTED)


def names_hidden_pause(user: Any, values: list[str]) -> bool:
    """True when one of the posted ids is malformed or names no pause ``user`` may see (any status, so a
    pause decided meanwhile is still reported as such): one query."""
    values = values[: BULK_MAX + 1]  # a longer selection is refused for its size anyway
    try:
        ids = {uuid.UUID(str(value)) for value in values}
    except ValueError:
        return True
    return bool(ids) and reviewable_pauses(user=user, ids=list(ids)).count() != len(ids)


def refused_selection(model_admin: ModelAdmin, request: HttpRequest) -> HttpResponse | None:
    """The styled 404 for a list selection that names a malformed id or a pause this reviewer may not see;
    None when the selection is sound ("select all" selects the scoped list itself: nothing to check)."""
    if request.POST.get(ACTION_CHECKBOX_NAME) is None or request.POST.get("select_across") == "1":
        return None
    if names_hidden_pause(request.user, request.POST.getlist(ACTION_CHECKBOX_NAME)):
        return not_found_page(model_admin, request)
    return None


def _posted_ids(request: HttpRequest) -> list[uuid.UUID]:
    ids: list[uuid.UUID] = []
    for value in request.POST.getlist("pause_ids")[:BULK_MAX]:
        try:
            key = uuid.UUID(value)
        except ValueError:
            continue
        if key not in ids:
            ids.append(key)
    return ids


def bulk_decide_view(model_admin: ModelAdmin, request: HttpRequest) -> HttpResponse:
    """The confirmation page's POST: validate the note once, then decide each confirmed pause."""
    if request.method != "POST" or not model_admin.has_change_permission(request):
        return HttpResponseRedirect(_changelist(model_admin))
    if names_hidden_pause(request.user, request.POST.getlist("pause_ids")):
        return not_found_page(model_admin, request)  # before anything is read or decided
    verdict = parse_verdict(request.POST.get("verdict"))
    if len(set(request.POST.getlist("pause_ids"))) > BULK_MAX:  # refused whole, never cut to the first 100
        return render_confirmation(
            model_admin, request, verdict=verdict or Verdict.APPROVED, pauses=[], errors=[TOO_MANY]
        )
    pause_ids = _posted_ids(request)
    if verdict is None or not pause_ids:
        model_admin.message_user(request, "Nothing was decided: no verdict or no pauses.", messages.ERROR)
        return HttpResponseRedirect(_changelist(model_admin))
    note = request.POST.get("note", "")
    try:
        decision = parse_decision_body({"verdict": verdict, "note": note})
    except BadRequest as exc:
        shown = due_first(
            with_names(reviewable_pauses(user=request.user, status=PauseStatus.PENDING, ids=pause_ids))
        )
        errors = [f"{e.get('field')}: {e.get('message')}" for e in exc.extra.get("errors", [])] or [
            exc.detail
        ]
        return render_confirmation(
            model_admin, request, verdict=verdict, pauses=list(shown), note=note, errors=errors
        )
    report(request, verdict, decide_each(user=request.user, pause_ids=pause_ids, decision=decision))
    return HttpResponseRedirect(_changelist(model_admin))
