"""What the decision page of a pause that no longer waits shows: the outcome, not the question.

Who decided what and when (a timeout says that nobody did, and which policy decided: never the stored
reference note "Automatic rejected due to timeout"), the note, what the kind says became of its subject,
and for a tool pause each call as decided: its verdict, its arguments as asked beside the arguments as
approved when the reviewer edited them, and what it returned or why it did not run
(approvals.pause_kinds.CallOutcome, redacted by the kind).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.utils import timezone
from django.utils.dateformat import format as date_format

from approvals.admin.review import ReviewCall
from approvals.decision_notices import TIMEOUT_DECIDER, is_guidance
from approvals.models import Pause, PauseStatus, Verdict
from approvals.pause_kinds import CallOutcome, decision_page_for

VERDICT_WORDS = {Verdict.APPROVED: "Approved", Verdict.REJECTED: "Rejected", Verdict.CANCELLED: "Cancelled"}
TIMEOUT_OUTCOME = {Verdict.APPROVED: "approved", Verdict.REJECTED: "rejected", Verdict.CANCELLED: "cancelled"}


@dataclass(frozen=True)
class DecidedPause:
    """The outcome box at the top of a decided pause's page."""

    headline: str  # e.g. "Approved by rita at 2026-12-04 10:02:03 UTC."
    note_label: str  # "Note", "Guidance", "Reason" (an automated decider's), or "" for none
    note: str
    automated: bool
    progress: str  # where the decision's continuation stands
    subject: str  # what the kind says of its subject now ("The discussion is now COMPLETED …")


def _when(pause: Pause) -> str:
    when = pause.decided_at or pause.resolved_at
    return f" at {date_format(timezone.localtime(when), 'Y-m-d H:i:s T')}" if when else ""


def decided_pause(pause: Pause) -> DecidedPause:
    verdict = pause.verdict or (Verdict.CANCELLED if pause.status == PauseStatus.CANCELLED else "")
    who = pause.decided_by or "someone"
    if pause.decided_by == TIMEOUT_DECIDER:
        headline = (
            f"Nobody decided before the deadline: its timeout policy ({pause.timeout_policy}) "
            f"{TIMEOUT_OUTCOME.get(verdict, 'ended')} it{_when(pause)}."
        )
        note_label, note = "", ""  # the stored note is the reference's fixed text: the headline says it
    else:
        word = VERDICT_WORDS.get(verdict, "Decided")
        if verdict == Verdict.REJECTED and is_guidance(pause):
            word = "Rejected with guidance"
        elif verdict == Verdict.APPROVED and _edited(pause):
            word = "Approved with an edit"
        headline = f"{word} by {who}{_when(pause)}."
        note_label = "Reason" if pause.automated else ("Guidance" if is_guidance(pause) else "Note")
        note = pause.note
    page = decision_page_for(pause.kind)
    return DecidedPause(
        headline=headline,
        note_label=note_label if note else "",
        note=note,
        automated=pause.automated,
        progress=_progress(pause),
        subject=page.outcome(pause) if page is not None else "",
    )


def shown_note(pause: Pause) -> str:
    """A decision's note as a reviewer reads it in a list: a timeout's is what happened (its stored note is
    the reference's fixed text), any other note as written."""
    if pause.decided_by == TIMEOUT_DECIDER:
        verdict = pause.verdict or Verdict.CANCELLED
        return f"Nobody decided in time: {TIMEOUT_OUTCOME.get(verdict, 'ended')} by its policy ({pause.timeout_policy})."
    return pause.note


def _edited(pause: Pause) -> bool:
    """The reviewer approved with amended arguments (a call's, or the kind's own amendments)."""
    details = pause.decision_details or {}
    calls = details.get("toolDecisions") or {}
    edited_call = any(isinstance(e, dict) and e.get("amendedArguments") is not None for e in calls.values())
    return edited_call or "amendedArguments" in details or "amendedRequest" in details


def _progress(pause: Pause) -> str:
    if pause.status == PauseStatus.RESOLVING:
        return "Its continuation has not finished yet."
    if pause.status == PauseStatus.CANCELLED:
        return "Nothing of it ran."
    return ""


@dataclass(frozen=True)
class ArgumentChange:
    """One argument of an edited call: as the model asked it and as the reviewer approved it (JSON;
    "" where one side has no such argument)."""

    key: str
    asked: str
    approved: str

    @property
    def changed(self) -> bool:
        return self.asked != self.approved


@dataclass(frozen=True)
class DecidedCall:
    verdict: str  # "Approved", "Approved with an edit", "Rejected", "Cancelled"
    note: str
    state: str
    ran: bool
    result: str
    amended: str  # the arguments as approved when the reviewer edited them, else ""
    changes: tuple[ArgumentChange, ...] | None  # beside the asked ones; None: not edited, or not objects


def _object(text: str) -> dict | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def argument_changes(call: ReviewCall, amended: str) -> tuple[ArgumentChange, ...] | None:
    """Each argument as asked beside as approved, in the model's order, then any the reviewer added."""
    asked, approved = _object(call.arguments), _object(amended)
    if asked is None or approved is None:
        return None
    keys = list(asked) + [key for key in approved if key not in asked]
    return tuple(ArgumentChange(str(key), _value(asked, key), _value(approved, key)) for key in keys)


def _value(arguments: dict, key: str) -> str:
    return json.dumps(arguments[key], ensure_ascii=False) if key in arguments else ""


def decided_call(call: ReviewCall, outcome: CallOutcome | None, *, automated: bool) -> DecidedCall | None:
    if outcome is None:
        return None
    word = VERDICT_WORDS.get(outcome.verdict, outcome.verdict)
    changes = argument_changes(call, outcome.amended) if outcome.amended is not None else None
    if outcome.amended is not None:
        word = "Approved with an edit"
    return DecidedCall(
        verdict=word,
        note="" if automated else outcome.note,  # an automated decision's note is the headline's
        state=outcome.state,
        ran=outcome.ran,
        result=outcome.result,
        amended=outcome.amended or "",
        changes=changes,
    )
