"""What each of the reviewer's buttons will do, in one sentence each, from what the pause really holds.

A selector for the decision page. Nothing is invented: a rule pause's next steps come
from its engine (``EngineHandler.approve_steps``: the agent version's remaining tasks, allow-listed and
redacted), a tool call's request from the already redacted ``requestPreview`` of pause_details(), a
group pause's and an approval request's from its kind's page (approvals.pause_kinds.PageSection labels). What a rejection tells
the subject is worded as the continuation words it (approvals.decision_notices, toolgate.runtime.tool_continuation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from approvals.admin.review import PauseReview, ReviewCall
from approvals.decision_notices import GUIDANCE_TEXT, HUMAN_REJECTION_TEXT
from approvals.engines import handler_for
from approvals.models import Engine, Pause, PauseKind
from approvals.pause_kinds import PageSection

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
    edit: str = ""  # empty: this pause has no "Edit and approve"


def engine_steps(pause: Pause) -> list[str] | None:
    """The engine's labels of what approving ``pause`` runs, or None when it cannot say."""
    try:
        steps = getattr(handler_for(pause.surface), "approve_steps", None)
    except LookupError:
        return None
    return steps(pause) if steps is not None else None


def request_line(call: ReviewCall) -> str:
    """The first line of the redacted preview: method and URL (headers and body are not repeated here)."""
    return call.request_preview.splitlines()[0].strip() if call.request_preview else ""


def call_outlook(call: ReviewCall) -> CallOutlook:
    """What approving and rejecting one gated call does (toolgate.runtime.tool_continuation.apply_verdicts)."""
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
    """``a``, ``a, then b``, ``a, then b, then c``: the steps in the order they run."""
    return ", then ".join(steps)


def rule_outlook(pause: Pause) -> Outlook:
    """A 1:1 rule pause: approve runs the rest of the turn; reject skips it and posts the rejection
    (conversations.turn_continuation._prepare_continuation)."""
    steps = engine_steps(pause)
    if steps is None:
        approve = "Approve: the conversation goes on with the rest of its turn."
    elif steps:
        approve = f"Approve: the turn goes on: it {_joined(steps)}."
    else:
        approve = "Approve: the turn goes on, but none of its remaining steps acts on this request."
    skipped = "none of that runs" if steps else "the turn ends here"
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


GROUP_CANCEL = (
    "Cancel the request: the pause ends without a decision (CANCELLED, audited) and the discussion is "
    "cancelled."
)


def section_outlook(section: PageSection) -> Outlook:
    """A pause whose kind has its own page part (a group PHASE or TASK pause, groups.admin_pages; an
    approval request, approval_requests.admin_pages), in the words that part uses."""
    note = f" Your note: {section.note_help}." if section.note_help else ""
    return Outlook(
        approve=f"{section.approve_label}.",
        reject=f"{section.reject_label}.{note}",
        guidance=section.guidance_label,
        cancel=section.cancel_label or GROUP_CANCEL,
        edit=section.edit_label if section.edits else "",
    )


def decision_outlook(pause: Pause, review: PauseReview, section: PageSection | None) -> Outlook:
    """The sentences for this pause's buttons."""
    if section is not None:
        return section_outlook(section)
    if pause.kind == PauseKind.TOOL_CALL:
        return tool_outlook(review)
    return rule_outlook(pause)


def takes_guidance(pause: Pause, section: PageSection | None = None) -> bool:
    """Reply with guidance is for a conversation's pauses (a model or a conversation reads the note) and
    for a kind whose page part offers it (``guidance_label``: an approval request that allows a reply,
    whose agent reads it). A group pause has its own per-task feedback (a rejected task's note goes back
    to its assignee)."""
    if section is not None and section.guidance_label:
        return True
    return pause.surface == Engine.REGULAR and pause.kind in (PauseKind.RULE, PauseKind.TOOL_CALL)


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
    """The latest input of each pause's subject, one query per engine (never one per row)."""
    found: dict[Any, str] = {}
    by_engine: dict[str, list[Any]] = {}
    for pause in pauses:
        by_engine.setdefault(pause.surface, []).append(pause.subject_id)
    for engine, subject_ids in by_engine.items():
        try:
            read = getattr(handler_for(engine), "latest_inputs", None)
        except LookupError:
            continue
        if read is not None:
            found.update(read(subject_ids))
    return {pause.pk: found[pause.subject_id] for pause in pauses if pause.subject_id in found}
