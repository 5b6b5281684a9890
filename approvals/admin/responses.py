"""The decision page's two other answers: reply with guidance, and cancel the request.

Both are POSTs to the decision page carrying ``hitl_action`` and the ``expected_pause_id`` of the page,
like Approve and Reject: a page left open while the pause was decided or cancelled changes nothing.

- **Reply with guidance** is a rejection of the whole request whose note is required and reaches the
  model (or the conversation, or an approval request's agent) labelled as the reviewer's instruction
  (approvals.decision_input.guidance_decision); the same decision service decides it, and its
  ``hitl.approval`` audit entry says ``reviewerAction: reply_with_guidance``.
- **Cancel the request** is the REST cancel of a pending pause (``cancel_pending_pause``, the audited
  path ``POST /agents/{id}/cancel``, the group discussion cancel and an approval request's cancel take;
  the engine moves its subject, e.g. an approval request to CANCELLED), behind a confirmation step
  (a second POST with ``confirm=yes``). Whoever may open the page may cancel, as REST allows owner, admin
  and approver, including a requester who may not approve her own request (allowSelfApproval=false).
  Its ``hitl.approval`` entry (verdict CANCELLED) says ``reviewerAction: cancel_request``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.http import HttpRequest

from approvals.actors import actor_for_user
from approvals.admin.outlook import takes_guidance
from approvals.continuation_runs import Continued, decide_and_continue
from approvals.decision_input import guidance_decision
from approvals.decisions import cancel_pending_pause
from approvals.models import Pause, PauseStatus, SubjectType
from approvals.pause_kinds import PageSection
from approvals.self_approval import refuse_self_approval
from common.errors import ApplicationError, BadRequest, WrongState

ACTION_FIELD = "hitl_action"
RESPOND, CANCEL = "respond", "cancel"
CANCEL_REQUEST = "cancel_request"  # the audit detail's reviewerAction of a cancel from the decision page
OTHER_PAUSE = "This page was for another pause of this subject: nothing was changed. Read it again below."
NO_GUIDANCE_HERE = (
    "Reply with guidance is for a conversation's pauses and for approval requests that allow a reply; "
    "decide this one with its own verdicts."
)
SUBJECT_WORD = {
    SubjectType.CONVERSATION: "conversation",
    SubjectType.DISCUSSION: "discussion",
    SubjectType.APPROVAL_REQUEST: "approval request",
}


@dataclass(frozen=True)
class ResponseOutcome:
    """What became of a posted response. ``done``: it was carried out (``message`` says what); else the
    page is shown again with ``status`` and, where set, the guidance kept and its error beside it, or
    the cancel confirmation."""

    done: bool
    message: str = ""
    status: int = 200
    guidance: str = ""
    guidance_error: str = ""
    confirm_cancel: bool = False
    stale: bool = False
    continued: Continued | None = None  # the decision's continuation, for the success message


def posted_action(request: HttpRequest) -> str | None:
    action = request.POST.get(ACTION_FIELD)
    return action if action in (RESPOND, CANCEL) else None


def _expected_pause(request: HttpRequest) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(request.POST.get("expected_pause_id") or ""))
    except ValueError:
        return None


def _stale(pause: Pause) -> ResponseOutcome:
    pause.refresh_from_db()  # the template says who decided or cancelled it, and when
    return ResponseOutcome(done=False, status=409, stale=True)


def reply_with_guidance(
    request: HttpRequest, pause: Pause, guidance: str, section: PageSection | None = None
) -> ResponseOutcome:
    """Reject with the reviewer's instruction as the note; an empty one decides nothing."""
    kept = {"guidance": guidance}
    if not takes_guidance(pause, section):
        return ResponseOutcome(done=False, status=400, message=NO_GUIDANCE_HERE, **kept)
    actor = actor_for_user(request.user)
    try:
        refuse_self_approval(pause=pause, actor=actor)  # as for Approve/Reject: before the input is read
        decision = guidance_decision(guidance)  # bad input never consumes a pause
        decided = decide_and_continue(
            surface=pause.surface,
            subject_type=pause.subject_type,
            subject_id=pause.subject_id,
            decision=decision,
            actor=actor,
            expected_pause_id=pause.id,
            what=SUBJECT_WORD.get(pause.subject_type, "subject").capitalize(),
        )
    except BadRequest as exc:
        messages = [str(e.get("message") or exc.detail) for e in exc.extra.get("errors") or []]
        return ResponseOutcome(
            done=False, status=400, guidance_error="; ".join(messages) or exc.detail, **kept
        )
    except WrongState as exc:
        outcome = _stale(pause)
        if pause.status == PauseStatus.PENDING:
            return ResponseOutcome(done=False, status=409, message=exc.detail, **kept)
        return outcome
    except ApplicationError as exc:  # Forbidden (self-approval), not deployed, …
        return ResponseOutcome(done=False, status=exc.status, message=exc.detail, **kept)
    word = SUBJECT_WORD.get(pause.subject_type, "subject")
    return ResponseOutcome(
        done=True,
        message=f"Replied with guidance: {word} {pause.subject_id} was told no, with your guidance as "
        "its instruction.",
        continued=decided,
    )


def cancel_request(request: HttpRequest, pause: Pause, *, confirmed: bool) -> ResponseOutcome:
    """The REST cancel of the pending pause, once the reviewer confirmed it on a second POST."""
    if not confirmed:
        return ResponseOutcome(done=False, confirm_cancel=True)
    actor = actor_for_user(request.user)
    with transaction.atomic():
        cancelled = cancel_pending_pause(pause=pause, actor=actor, detail={"reviewerAction": CANCEL_REQUEST})
    if not cancelled:  # decided or cancelled meanwhile: the compare-and-set on PENDING lost
        return _stale(pause)
    word = SUBJECT_WORD.get(pause.subject_type, "subject")
    return ResponseOutcome(
        done=True, message=f"Cancelled the request: {word} {pause.subject_id}; nothing of it runs."
    )


def respond(
    request: HttpRequest, pause: Pause, action: str, section: PageSection | None = None
) -> ResponseOutcome:
    """Carry out ``action`` on exactly the pause the page showed, if it still waits; ``section``: the
    kind's page part, which says whether it takes a reply with guidance."""
    if _expected_pause(request) != pause.id:
        return ResponseOutcome(done=False, status=409, message=OTHER_PAUSE)
    if pause.status != PauseStatus.PENDING:
        return ResponseOutcome(done=False, status=409, stale=True)
    if action == RESPOND:
        return reply_with_guidance(request, pause, request.POST.get("guidance", ""), section)
    return cancel_request(request, pause, confirmed=request.POST.get("confirm") == "yes")


def response_context(
    outcome: ResponseOutcome | None, *, pending: bool, pause: Pause, section: PageSection | None = None
) -> dict[str, Any]:
    """What the page's response box shows: the kept guidance, its error, the cancel confirmation."""
    return {
        "response": outcome,
        "takes_guidance": pending and takes_guidance(pause, section),
        "action_field": ACTION_FIELD,
        "respond_action": RESPOND,
        "cancel_action": CANCEL,
    }
