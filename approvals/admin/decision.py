"""The decision page of one pause: what the reviewer is asked to approve, and Approve / Reject.

A thin adapter over the one decision service: the form becomes the same body the REST API accepts,
``parse_decision_body`` validates it and ``decide_and_continue`` decides exactly the pause the page showed
(``expected_pause_id``) and runs its continuation in this process. A page left open while someone else decided says so and changes nothing.

A kind of pause may add its own part to the page (approvals.pause_kinds.DecisionPage, e.g. a group
discussion's phase, transcript and a verdict per awaiting task): the per-item verdicts enter the same
decision, and the kind's validator checks them inside the decision service, as it does for REST.

A kind whose section has inputs to edit (``PageSection.edits``: an approval request's arguments and pinned
request) gets a third button, "Edit and approve" (approvals.admin.edit_form): the inputs the reviewer
changed become the kind's amendments through its ``DecisionEdit``, and only that button sends them.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.admin import ModelAdmin
from django.core.exceptions import NON_FIELD_ERRORS
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from approvals.access import require_decider, sees_what_runs
from approvals.actors import actor_for_user
from approvals.admin import outlook as admin_outlook
from approvals.admin import responses as admin_responses
from approvals.admin.amend_errors import contradiction_message, page_errors
from approvals.admin.amend_form import add_amend_fields, amend_box, amended_arguments, call_amendment
from approvals.admin.decided import decided_call, decided_pause
from approvals.admin.edit_form import (
    EDIT_AND_APPROVE,
    add_edit_fields,
    edit_field_for,
    edit_rows,
    edited_inputs,
)
from approvals.admin.review import (
    PauseReview,
    ReviewCall,
    describe_deadline,
    ended_text,
    on_timeout_text,
    pause_review,
)
from approvals.admin.scope import decided_it, may_read_turns
from approvals.agent_names import agent_names
from approvals.continuation_runs import Continued, decide_and_continue
from approvals.decision_input import NOTE_MAX, parse_decision_body
from approvals.engines import handler_for
from approvals.models import Pause, PauseStatus, SubjectType, Verdict
from approvals.pause_kinds import (
    DecisionPage,
    PageEdit,
    PageItem,
    PageSection,
    call_outcomes,
    decision_edit_for,
    decision_page_for,
)
from approvals.routing import routed_to_text, routes_user, why_not_routed
from approvals.selectors import reviewable_pauses
from approvals.self_approval import SELF_APPROVAL_DETAIL, is_self_approval, refuse_self_approval
from approvals.votes import Tally, tally_of
from common.errors import ApplicationError, BadRequest, Forbidden, NotFound, WrongState

REVIEW_TURNS = 5
CALL_NOTE_MAX = 1024
TEMPLATE = "admin/approvals/pendingapproval/decision.html"
NOT_FOUND_TEMPLATE = "admin/approvals/pendingapproval/not_found.html"
SUBJECT_WORD = {
    SubjectType.CONVERSATION: "Conversation",
    SubjectType.DISCUSSION: "Discussion",
    SubjectType.APPROVAL_REQUEST: "Approval request",
}
SAME_AS_DECISION = ""
NO_SUCH_PAUSE = "No such pending approval."
VERDICT_CHOICES = [
    (SAME_AS_DECISION, "Same as the decision"),
    (Verdict.APPROVED, "Approve"),
    (Verdict.REJECTED, "Reject"),
]


class DecisionForm(forms.Form):
    """Approve or reject with a note; for tool-call pauses a verdict, note and amendment per call."""

    expected_pause_id = forms.UUIDField(widget=forms.HiddenInput)
    verdict = forms.ChoiceField(
        choices=[(Verdict.APPROVED, "Approve"), (Verdict.REJECTED, "Reject")],
        error_messages={"required": "Choose Approve or Reject."},
    )  # not rendered: the Approve and Reject buttons submit it
    # Checked by parse_decision_body (UTF-16 length, as the REST API counts it); maxlength helps browsers.
    note = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 80, "maxlength": NOTE_MAX}),
    )

    def __init__(
        self,
        *args: Any,
        calls: list[ReviewCall] = (),
        items: Sequence[PageItem] = (),
        edits: Sequence[PageEdit] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.calls = [call for call in calls if call.decidable]
        self.items = [item for item in items if item.decidable]
        # "Edit and approve" (approvals.admin.edit_form): its inputs, and what the reviewer changed in them
        self.edits = tuple(edits)
        self.editing = False
        self.edited: dict[str, str] = {}
        add_edit_fields(self, self.edits)
        for call in self.calls:
            self.fields[f"call_{call.index}_verdict"] = forms.ChoiceField(
                required=False, label="Verdict for this call", choices=VERDICT_CHOICES
            )
            self.fields[f"call_{call.index}_note"] = forms.CharField(
                required=False,
                max_length=CALL_NOTE_MAX,
                label="Note for this call",
                widget=forms.TextInput(attrs={"size": 60}),
            )
        # the amend box of each call (approvals.admin.amend_form): an input per argument, and the JSON
        self.amendments = {call.index: call_amendment(call) for call in self.calls}
        self.amended: dict[int, str | None] = {}
        for amendment in self.amendments.values():
            add_amend_fields(self, amendment)
        for index, item in enumerate(self.items):
            # Not a ChoiceField: whatever is posted goes to the kind's validator, which refuses a bad
            # value in the words REST uses, with nothing consumed.
            self.fields[f"item_{index}_verdict"] = forms.CharField(
                required=False,
                strip=False,
                label=f"Verdict for {item.title}",
                widget=forms.Select(choices=VERDICT_CHOICES),
            )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if self.edits:
            self.editing = cleaned.get("verdict") == EDIT_AND_APPROVE
            if self.editing:
                cleaned["verdict"] = Verdict.APPROVED  # an edit approves
            self.edited = edited_inputs(self, self.edits, editing=self.editing)
        approved_alone = []
        for call in self.calls:
            approved = self.call_verdict(call) == Verdict.APPROVED
            self.amended[call.index] = amended_arguments(self, self.amendments[call.index], approved=approved)
            if cleaned.get("verdict") == Verdict.REJECTED and cleaned.get(f"call_{call.index}_verdict") == (
                Verdict.APPROVED
            ):
                approved_alone.append(call)
        for call in approved_alone:  # the service refuses it too; here it is said by the call
            self.add_error(f"call_{call.index}_verdict", contradiction_message([call.tool_name]))
        return cleaned

    def call_verdict(self, call: ReviewCall) -> str:
        return self.cleaned_data.get(f"call_{call.index}_verdict") or self.cleaned_data.get("verdict") or ""

    def decision_body(self) -> dict[str, Any]:
        """The body the REST API's resume endpoint takes, built from the cleaned form."""
        body: dict[str, Any] = {"verdict": self.cleaned_data["verdict"], "note": self.cleaned_data["note"]}
        if self.calls:
            decisions: dict[str, Any] = {}
            for call in self.calls:
                entry: dict[str, Any] = {"verdict": self.call_verdict(call)}
                if note := self.cleaned_data.get(f"call_{call.index}_note"):
                    entry["note"] = note
                if (amended := self.amended.get(call.index)) is not None:
                    entry["amendedArguments"] = amended
                decisions[call.call_id] = entry
            body["toolDecisions"] = decisions
        return body

    def item_field(self, key: str) -> str | None:
        """The name of the verdict field of the item ``key``, or None when it has none."""
        for index, item in enumerate(self.items):
            if item.key == key:
                return f"item_{index}_verdict"
        return None

    def item_verdicts(self) -> dict[str, str]:
        """Each item's verdict as posted; one left at "Same as the decision" takes the decision's."""
        return {
            item.key: self.cleaned_data.get(f"item_{index}_verdict") or self.cleaned_data.get("verdict") or ""
            for index, item in enumerate(self.items)
        }

    def add_service_errors(self, exc: BadRequest) -> None:
        """Put the service's field errors next to the fields they name; the rest above the form. Errors
        about tool calls are said in reviewer language (approvals.admin.amend_errors)."""
        errors = exc.extra.get("errors") or [{"field": "", "message": exc.detail}]
        approved = [c.tool_name for c in self.calls if self.call_verdict(c) == Verdict.APPROVED]
        placed = (
            page_errors(errors, list(self.amendments.values()), approved, self.fields) if self.calls else None
        )
        if placed is not None:
            for error in placed:
                self.add_error(error.field, error.message)
            return
        for error in errors:
            field, message = str(error.get("field") or ""), str(error.get("message") or exc.detail)
            target = self._form_field_for(field)
            self.add_error(target, message if target or not field else f"{field}: {message}")

    def _form_field_for(self, service_field: str) -> str | None:
        if service_field == "note":
            return "note"
        if field := edit_field_for(self.edits, service_field):
            return field
        for item in self.items:
            if item.error_field and item.error_field == service_field:
                return self.item_field(item.key)
        if service_field.startswith("toolDecisions."):
            call_id, _, key = service_field.removeprefix("toolDecisions.").rpartition(".")
            suffix = {"amendedArguments": "amended", "note": "note", "verdict": "verdict"}.get(key)
            for call in self.calls:
                if call.call_id == call_id and suffix and f"call_{call.index}_{suffix}" in self.fields:
                    return f"call_{call.index}_{suffix}"
        return None


def decided_message(pause: Pause) -> str:
    when = timezone.localtime(pause.decided_at).strftime("%Y-%m-%d %H:%M:%S %Z") if pause.decided_at else "?"
    who = pause.decided_by or "someone"
    if pause.status == PauseStatus.CANCELLED:
        return f"This pause was already cancelled by {who} at {when}. Nothing was changed."
    verdict = pause.verdict or "decided"
    return f"This pause was already decided ({verdict}) by {who} at {when}. Nothing was changed."


def find_pause(request: HttpRequest, object_id: str) -> Pause:
    """The pause, if this reviewer may see it (any status, so a stale page can say who decided); else 404.

    No existence oracle: an unknown id, a malformed one and someone else's pause get the same 404.
    """
    try:
        key = uuid.UUID(str(object_id))
    except ValueError:
        raise Http404(NO_SUCH_PAUSE) from None
    pause = reviewable_pauses(user=request.user, ids=[key]).first()
    if pause is None:
        raise Http404(NO_SUCH_PAUSE)
    try:
        require_decider(request.user, exists=True, owner_id=pause.owner_id, what="pause")
    except (Forbidden, NotFound):
        raise Http404(NO_SUCH_PAUSE) from None
    return pause


def decide_from_form(
    request: HttpRequest, pause: Pause, form: DecisionForm, page: DecisionPage | None = None
) -> Continued:
    decision = parse_decision_body(form.decision_body())
    if page is not None:  # the kind's own body and parser (a group's REST approve body), items or not
        decision = page.with_item_verdicts(decision, form.item_verdicts())
    if form.editing:  # the kind's amendments, parsed by its own parser; never an edit dropped unsaid
        edit = decision_edit_for(pause.kind)
        if edit is None:
            raise BadRequest("This pause takes no edit: approve or reject it as it is.")
        decision = edit(pause, decision, form.edited)
    # the reviewer's process runs the continuation: the page shows its outcome
    return decide_and_continue(
        surface=pause.surface,
        subject_type=pause.subject_type,
        subject_id=pause.subject_id,
        decision=decision,
        actor=actor_for_user(request.user),
        expected_pause_id=form.cleaned_data["expected_pause_id"],
        what=SUBJECT_WORD.get(pause.subject_type, "Subject"),
    )


CONTINUATION_OUTCOMES = {
    "queued": "Its continuation is queued.",
    "restored": "Its continuation could not start; the pause is pending again.",
    "continued": "It has continued.",
}


def continuation_outcome(decided: Continued) -> str:
    """What became of the decision's continuation, said as it is: run here, queued, or back to pending."""
    return CONTINUATION_OUTCOMES[decided.outcome]


def page_section(request: HttpRequest, pause: Pause) -> PageSection | None:
    """The pause kind's own part of the page (approvals.pause_kinds), or None for a kind without one."""
    page = decision_page_for(pause.kind)
    return page.section(pause, may_read=may_read_turns(request.user, pause)) if page else None


def vote_message(tally: Tally) -> str:
    more = f"{tally.missing} more {'person' if tally.missing == 1 else 'people'}"
    return f"Your approval is recorded: {tally.text()}. It waits for {more} to approve."


def success_message(pause: Pause, decided: Continued, *, edited: bool = False) -> str:
    if decided.tally is not None:  # one approval of several: the pause waits for more
        return vote_message(decided.tally)
    verb = "Approved" if decided.pause.verdict == Verdict.APPROVED else "Rejected"
    if edited and decided.pause.verdict == Verdict.APPROVED:
        verb = "Edited and approved"
    text = (
        f"{verb}: {SUBJECT_WORD.get(pause.subject_type, 'subject').lower()} "
        f"{pause.subject_id}. {continuation_outcome(decided)}"
    )
    page = decision_page_for(pause.kind)
    return f"{text} {page.outcome(pause)}" if page else text


def not_found_page(model_admin: ModelAdmin, request: HttpRequest) -> HttpResponse:
    """The 404 of a pause this reviewer may not see, inside the admin (its header, a way back), not a bare page.

    One page for an unknown id, a malformed one and someone else's pause: no existence oracle.
    """
    opts = model_admin.opts
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": opts,
        "title": NO_SUCH_PAUSE,
        "changelist_url": reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"),
    }
    return TemplateResponse(request, NOT_FOUND_TEMPLATE, context, status=404)


# --- reply with guidance / cancel the request (approvals.admin.responses) ---------------------------------
def answer_response(
    model_admin: ModelAdmin,
    request: HttpRequest,
    pause: Pause,
    review: PauseReview,
    section: PageSection | None,
    action: str,
) -> HttpResponse:
    """Carry out a posted response; on anything but success the page again, saying why."""
    answered = admin_responses.respond(request, pause, action, section)
    if answered.done:
        outcome = f" {continuation_outcome(answered.continued)}" if answered.continued else ""
        messages.success(request, answered.message + outcome)
        opts = model_admin.opts
        return HttpResponseRedirect(reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"))
    if answered.message:
        messages.error(request, answered.message)
    form = blank_form(pause, review, section)
    section = None if answered.stale else section  # read again: what the reviewer may read changed
    return render_decision_page(
        model_admin, request, pause, review, form, answered.status, section, response=answered
    )


# --- end of reply with guidance / cancel --------------------------------------------------------------


def form_parts(pause: Pause, review: PauseReview, section: PageSection | None) -> dict[str, Any]:
    """What the decision form is made of: the tool calls, the kind's items, and its edit inputs (only
    while the pause waits: a decided pause is edited by nobody)."""
    pending = pause.status == PauseStatus.PENDING
    return {
        "calls": review.calls,
        "items": section.items if section else (),
        "edits": section.edits if section and pending else (),
    }


def blank_form(pause: Pause, review: PauseReview, section: PageSection | None) -> DecisionForm:
    return DecisionForm(initial={"expected_pause_id": pause.id}, **form_parts(pause, review, section))


def decision_view(model_admin: ModelAdmin, request: HttpRequest, object_id: str) -> HttpResponse:
    try:
        pause = find_pause(request, object_id)
    except Http404:
        return not_found_page(model_admin, request)
    review = pause_review(pause, reviewer=sees_what_runs(request.user, pause))
    section = page_section(request, pause)
    status = 200
    if request.method != "POST":
        form = blank_form(pause, review, section)
        return render_decision_page(model_admin, request, pause, review, form, status, section)

    if action := admin_responses.posted_action(request):  # reply with guidance / cancel the request
        return answer_response(model_admin, request, pause, review, section, action)

    form = DecisionForm(request.POST, **form_parts(pause, review, section))
    if pause.status != PauseStatus.PENDING:  # a stale page: the template says who decided it, and when
        return render_decision_page(model_admin, request, pause, review, form, 409, section)
    try:  # before the form is read: whatever was posted, this reviewer may not decide this pause
        refuse_self_approval(pause=pause, actor=actor_for_user(request.user))
    except Forbidden as exc:
        messages.error(request, exc.detail)
        return render_decision_page(model_admin, request, pause, review, form, exc.status, section)
    if form.is_valid():
        try:
            decided = decide_from_form(request, pause, form, decision_page_for(pause.kind))
        except BadRequest as exc:
            form.add_service_errors(exc)
        except WrongState as exc:
            pause.refresh_from_db()  # lost a race: if someone else decided, the page now says who
            section, status = None, 409  # read again: what the reviewer may read changed with the state
            if pause.status == PauseStatus.PENDING:
                messages.error(request, exc.detail)
        except ApplicationError as exc:
            status = exc.status
            messages.error(request, exc.detail)
        else:
            messages.success(request, success_message(pause, decided, edited=form.editing))
            opts = model_admin.opts
            return HttpResponseRedirect(reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"))
    return render_decision_page(model_admin, request, pause, review, form, status, section)


@dataclass(frozen=True)
class ShownError:
    """One error of a refused submit, for the summary at the top of the page: the field's label, what is
    wrong, and the id of the field (the form itself for an error of the whole decision)."""

    label: str
    message: str
    anchor: str


def error_summary(form: DecisionForm) -> list[ShownError]:
    """Every error of ``form``, in the form's order, each with a link to its field: the page reloads at
    its top, and that is where the reviewer must read what went wrong (each error is also beside its
    field)."""
    if not form.is_bound:
        return []
    shown = []
    for name, errors in form.errors.items():
        if name == NON_FIELD_ERRORS or name not in form.fields:
            label, anchor = "Your decision", "hitl-decision-form"
        else:
            label = str(form.fields[name].label or name.replace("_", " "))
            anchor = form[name].id_for_label or "hitl-decision-form"
        shown.extend(ShownError(label=label, message=str(message), anchor=anchor) for message in errors)
    return shown


def render_decision_page(
    model_admin: ModelAdmin,
    request: HttpRequest,
    pause: Pause,
    review: PauseReview,
    form: DecisionForm,
    status: int,
    section: PageSection | None = None,
    response: admin_responses.ResponseOutcome | None = None,
) -> HttpResponse:
    section = section or page_section(request, pause)
    turns, turns_until = None, None
    reads_turns = section is None or (section.reads_turns and section.transcript is None)
    if may_read_turns(request.user, pause) and reads_turns:
        turns = handler_for(pause.surface).review_turns(pause, REVIEW_TURNS)
    elif reads_turns and decided_it(request.user, pause):
        turns_until = pause.decided_at
        turns = handler_for(pause.surface).review_turns(pause, REVIEW_TURNS, until=turns_until)
    opts = model_admin.opts
    deadline_text, deadline_overdue = describe_deadline(pause.due_at, timezone.now())
    pending = pause.status == PauseStatus.PENDING
    only_cancel = pending and is_self_approval(pause, request.user.pk)
    # routing (approvals.routing): a reviewer who may open the pause but not decide it now is told why
    routed_out = pending and not routes_user(request.user, pause)
    tally = tally_of(pause) if pause.required_approvals > 1 else None
    approved_already = bool(tally) and any(voter == request.user.get_username() for voter, _ in tally.votes)
    decided = None if pending else decided_pause(pause)
    page = decision_page_for(pause.kind)
    asked = page.headline(pause) if page is not None else pause.reason
    outcomes = {} if pending else call_outcomes(pause)
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": opts,
        "title": f"{'Decide' if pending else 'Decided'}: {asked}",
        "asked": asked,
        "pause": pause,
        "subject_word": SUBJECT_WORD.get(pause.subject_type, "Subject"),
        "agent_name": agent_names([pause.agent_id]).get(pause.agent_id) if pause.agent_id else None,
        "pending": pending,
        # a pause this reviewer raised (or owns) under allowSelfApproval=false: no Approve or Reject
        "only_cancel": only_cancel,
        "decidable": pending and not only_cancel and not routed_out,
        "routed_out": why_not_routed(pause) if routed_out else "",
        "routed_to": routed_to_text(pause) if pause.routed else "",
        "tally": tally,
        "approved_already": approved_already,
        "self_approval_detail": SELF_APPROVAL_DETAIL,
        "review": review,
        "form": form,
        "call_rows": [
            (
                call,
                form[f"call_{call.index}_verdict"],
                form[f"call_{call.index}_note"],
                amend_box(form, form.amendments[call.index]),
                None,
            )
            if call.decidable and pending
            else (
                call,
                None,
                None,
                None,
                decided and decided_call(call, outcomes.get(call.call_id), automated=decided.automated),
            )
            for call in review.calls
        ],
        "decided": decided,
        # a submit on a page left open after someone else decided: it says so, and that nothing changed
        "stale": not pending and request.method == "POST",
        "turns_until": turns_until,
        "section": section,
        # the section as it reads now, each item with its verdict field if the form has one for it
        "item_rows": [
            (item, form[name] if (name := form.item_field(item.key)) else None)
            for item in (section.items if section else ())
        ],
        "edit_rows": edit_rows(form),
        "error_summary": error_summary(form),
        "edit_action": EDIT_AND_APPROVE,
        "turns": turns,
        "deadline_text": deadline_text,
        "deadline_overdue": deadline_overdue,
        "ended_text": "" if pending else ended_text(pause),
        "on_timeout_text": on_timeout_text(pause),
        "review_turns": REVIEW_TURNS,
        "note_max": NOTE_MAX,
        "changelist_url": reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"),
    }
    # --- what each button does, the requester's input, the response box ---
    context["outlook"] = admin_outlook.decision_outlook(pause, review, section) if pending else None
    asked_turns = turns
    if turns and not pending and turns_until is None:  # every turn: what was asked is the paused one's
        asked_turns = handler_for(pause.surface).review_turns(pause, 1, until=pause.paused_at)
    context["requester_input"] = admin_outlook.requester_input(asked_turns, section)
    context.update(admin_responses.response_context(response, pending=pending, pause=pause, section=section))
    # --- end ---
    return TemplateResponse(request, TEMPLATE, context, status=status)
