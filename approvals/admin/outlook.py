"""What each of the reviewer's buttons will do, in one sentence each, from what the pause really holds.

A selector for the decision page. Nothing is invented: a rule pause's next steps come
from its surface (``SurfaceHandler.approve_steps``: the agent version's remaining tasks, allow-listed and
redacted), a tool call's request from the already redacted ``requestPreview`` of pause_details(), a
group pause's from its kind's page (approvals.pause_kinds.PageSection labels). What a rejection tells
the subject is worded as the continuation words it (approvals.decision_notices, toolgate.resume).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from approvals.admin.review import PauseReview, ReviewCall
from approvals.decision_notices import GUIDANCE_TEXT, HUMAN_REJECTION_TEXT
from approvals.models import Pause, PauseKind, Surface
from approvals.pause_kinds import PageSection
from approvals.surfaces import handler_for

INPUT_SHORT = 140  # characters of a requester's input on a bulk row


@dataclass(frozen=True)
class CallOutlook:
    index: int
    tool_name: str
    approve: str
    reject: str


@dataclass(frozen=True)
class Outlook:
    approve: str
    reject: str
    calls: tuple[CallOutlook, ...] = ()
    guidance: str = ""  # empty: this pause takes no reply with guidance
    cancel: str = ""


def surface_steps(pause: Pause) -> list[str] | None:
    """The surface's labels of what approving ``pause`` runs, or None when it cannot say."""
    try:
        steps = getattr(handler_for(pause.surface), "approve_steps", None)
    except LookupError:
        return None
    return steps(pause) if steps is not None else None


def request_line(call: ReviewCall) -> str:
    """The first line of the redacted preview: method and URL (headers and body are not repeated here)."""
    return call.request_preview.splitlines()[0].strip() if call.request_preview else ""


def call_outlook(call: ReviewCall) -> CallOutlook:
    """What approving and rejecting one gated call does (toolgate.resume.apply_verdicts)."""
    line = request_line(call)
    if call.args_truncated:
        approve = "does not run: its arguments were too large to keep (the model is told NOT_EXECUTED)"
    elif line:
        approve = f"sends {line}" + (
            " (pinned: it is sent only if the request is still exactly this one)"
            if call.pinned
            else " (resolved again when it runs, so it may differ from this preview)"
        )
    else:
        approve = f"runs the {call.source} tool {call.tool_name}" if call.source else f"runs {call.tool_name}"
    return CallOutlook(
        index=call.index,
        tool_name=call.tool_name,
        approve=f"Approve: {approve}.",
        reject="Reject: it does not run; the model gets a rejection for this call (REJECTED_BY_REVIEWER) "
        "with the note, and is told not to retry it.",
    )


def _joined(steps: list[str]) -> str:
    return " → ".join(steps)


def rule_outlook(pause: Pause) -> Outlook:
    """A 1:1 rule pause: approve runs the rest of the turn; reject skips it and posts the rejection
    (conversations.turns._prepare_continuation)."""
    steps = surface_steps(pause)
    if steps is None:
        approve = "Approve: the conversation goes on with the rest of its turn."
    elif steps:
        approve = f"Approve: the remaining steps run: {_joined(steps)}."
    else:
        approve = "Approve: the turn goes on, but none of its remaining steps acts on this request."
    skipped = "the remaining steps do not run" if steps != [] else "the turn ends here"
    told = f"“{HUMAN_REJECTION_TEXT} Reason: …” with your note"
    return Outlook(
        approve=approve,
        reject=f"Reject: {skipped}; the conversation is told {told} (without a note, only the first sentence).",
        guidance=f"Reply with guidance: {skipped}; the conversation is told “{HUMAN_REJECTION_TEXT} "
        f"{GUIDANCE_TEXT.format(note='…')}” with your guidance.",
        cancel="Cancel the request: the pause ends without a decision (CANCELLED, audited), nothing of it "
        "runs, and the conversation becomes EXECUTION_INTERRUPTED.",
    )


def tool_outlook(review: PauseReview) -> Outlook:
    calls = tuple(call_outlook(call) for call in review.calls)
    return Outlook(
        approve="Approve: each call below runs as its own line says (unless you give it another verdict), "
        "then the model continues with the results.",
        reject="Reject: no call runs; the model gets a rejection for each (REJECTED_BY_REVIEWER) with your "
        "note, and is told not to retry them.",
        calls=calls,
        guidance="Reply with guidance: no call runs; the model gets a rejection for each, labelled "
        f"“{GUIDANCE_TEXT.format(note='…')}”, and is told to follow your guidance as an instruction.",
        cancel="Cancel the request: the pause ends without a decision (CANCELLED, audited), no call runs "
        "and the model is not asked again; the conversation becomes EXECUTION_INTERRUPTED.",
    )


def group_outlook(section: PageSection) -> Outlook:
    """A group PHASE or TASK pause, in the words its own page part uses (groups.admin_pages)."""
    note = f" Your note: {section.note_help}." if section.note_help else ""
    return Outlook(
        approve=f"{section.approve_label}.",
        reject=f"{section.reject_label}.{note}",
        cancel="Cancel the request: the pause ends without a decision (CANCELLED, audited) and the "
        "discussion is cancelled.",
    )


def decision_outlook(pause: Pause, review: PauseReview, section: PageSection | None) -> Outlook:
    """The sentences for this pause's buttons."""
    if section is not None:
        return group_outlook(section)
    if pause.kind == PauseKind.TOOL_CALL:
        return tool_outlook(review)
    return rule_outlook(pause)


def takes_guidance(pause: Pause) -> bool:
    """Reply with guidance is for a conversation's pauses: a model or a conversation reads the note. A
    group pause has its own per-task feedback (a rejected task's note goes back to its assignee)."""
    return pause.surface == Surface.REGULAR and pause.kind in (PauseKind.RULE, PauseKind.TOOL_CALL)


def requester_input(turns: list[dict[str, Any]] | None, section: PageSection | None) -> str | None:
    """What the requester asked: the latest turn's input, or a discussion's question; None when the
    reviewer may not read it (``turns``/the section's facts already say so) or nothing was asked."""
    if turns:
        return str(turns[-1].get("input") or "") or None
    if section is not None:
        return next((text for label, text in section.facts if label == "Question"), None) or None
    return None


def short_input(text: str | None, limit: int = INPUT_SHORT) -> str:
    """One clamped line of a requester's input, for a row among many."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def latest_inputs(pauses: list[Pause]) -> dict[Any, str]:
    """The latest input of each pause's subject, one query per surface (never one per row)."""
    found: dict[Any, str] = {}
    by_surface: dict[str, list[Any]] = {}
    for pause in pauses:
        by_surface.setdefault(pause.surface, []).append(pause.subject_id)
    for surface, subject_ids in by_surface.items():
        try:
            read = getattr(handler_for(surface), "latest_inputs", None)
        except LookupError:
            continue
        if read is not None:
            found.update(read(subject_ids))
    return {pause.pk: found[pause.subject_id] for pause in pauses if pause.subject_id in found}
