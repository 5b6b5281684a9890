"""The continuation of a decided group pause, run by the core like any other.

A top-level REJECTED fails the discussion at once, on the group version it runs on: nothing is left to
run, so nothing is checked. For an approval, before the resumed leg starts, the discussion's group is
read again (its latest version) and checked: the phase the pause bookmarked must still be at its index
with the same name (config drift), and every member must still be deployed. Either failure raises
``ContinuationNotStarted``: the core restores the pause (its deadline unchanged, its timer re-armed,
audited) and the discussion stays AWAITING_APPROVAL, with the reason in its transcript and a
``group_error`` event. Then, in one transaction, the decision is applied to the task list, the
discussion moves to the latest version and the pause is finished. The rest of the discussion runs
after that commit, so a process that dies part way leaves a discussion recovery interrupts, never a
pause approved twice.

A cancel that came after the decision but before its continuation started (``cancelRequested``) ends the
discussion CANCELLED before anything of the decision is applied, whatever the verdict: as on a 1:1
conversation, a continuation nobody started is cancelled before it starts (the last gate's approval has
no member turn left to stop before).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from approvals.audit import append_audit_entry
from approvals.decisions import finish_pause
from approvals.engines import ContinuationNotStarted
from approvals.models import Pause, PauseKind, SubjectType, Verdict
from common.errors import ApplicationError
from groups import events as ev
from groups import task_list
from groups.discussions import Run, finish, require_deployed_members, run_from
from groups.models import DiscussionState, GroupConversation
from groups.selectors import discussion_version, group_version
from groups.transcript import own_error

REJECTED_BY_REVIEWER = "Rejected by human reviewer"
RETRY, FAIL = "RETRY", "FAIL"


def drift_message(document: dict[str, Any], index: int, name: str) -> str | None:
    """Why the group's current document no longer fits the paused discussion, or None."""
    phases = document["phases"]
    if index >= len(phases):
        found = "no phase at that index"
    elif phases[index]["name"] != name:
        found = f"found '{phases[index]['name']}'"
    else:
        return None
    return (
        f"Resume aborted: group config changed while paused (expected phase '{name}' at index {index} but "
        f"{found}) — the discussion remains awaiting approval; fix the config and retry, or cancel"
    )


def _not_started(run: Run, message: str) -> ContinuationNotStarted:
    """Record why the resumed leg did not start; the core then restores the pause."""
    discussion, phases = run.discussion, run.document["phases"]
    phase = phases[min(discussion.phase_index, len(phases) - 1)] if phases else None
    discussion.transcript.append(own_error(phase, message))
    GroupConversation.objects.filter(pk=discussion.pk).update(transcript=discussion.transcript)
    run.emit(ev.GROUP_ERROR, state=DiscussionState.AWAITING_APPROVAL, message=message)
    return ContinuationNotStarted(message)


def apply_task_approvals(
    discussion: GroupConversation, pause: Pause, *, on_rejection: str, note: str
) -> list[dict[str, Any]]:
    """A TASK pause's per-task verdicts (validated with the decision), or approve every awaiting task
    when there are none; returns the tasks changed."""
    phase_name = pause.bookmark.get("phaseName")
    approvals = {
        key: str(value).strip().upper()
        for key, value in pause.decision_details.get("taskApprovals", {}).items()
    }
    changed = []
    for task in task_list.awaiting(task_list.of_phase(discussion.tasks, phase_name)):
        verdict = approvals.get(task["id"], Verdict.APPROVED if not approvals else None)
        if verdict == Verdict.APPROVED:
            task["status"] = task_list.COMPLETED
        elif verdict == Verdict.REJECTED and on_rejection == RETRY:
            task["status"], task["result"] = task_list.ASSIGNED, None
            task["feedback"] = note or REJECTED_BY_REVIEWER
        elif verdict == Verdict.REJECTED:
            task["status"], task["note"] = task_list.FAILED, note or REJECTED_BY_REVIEWER
        else:
            continue  # not named in the map: it stays awaiting approval, for the next gate
        changed.append(task)
    return changed


def resume_discussion(pause: Pause, events: ev.EventSink | None = None) -> GroupConversation:
    """Continue the discussion of a decided pause (see the module); ``events``: the sink, by default the
    one watching this context (``events.watched_by``)."""
    events = events or ev.current_sink()
    discussion = GroupConversation.objects.select_related("owner").get(pk=pause.subject_id)
    if discussion.cancel_requested_at is not None:
        return _cancel_unstarted(discussion, pause, events)
    if pause.verdict == Verdict.REJECTED:
        return _fail_rejected(discussion, pause, events)
    try:
        with transaction.atomic():  # the checks read in the transaction that applies the decision
            run, index, changed = _apply_approval(discussion, pause, events)
    except _Refused as refused:  # nothing was written: say why, and the core restores the pause
        if refused.run is None:
            events(
                ev.GROUP_ERROR,
                {
                    "discussionId": str(discussion.pk),
                    "state": DiscussionState.AWAITING_APPROVAL,
                    "message": refused.message,
                },
            )
            raise ContinuationNotStarted(refused.message) from None
        raise _not_started(refused.run, refused.message) from None
    run.emit(ev.HITL_RESUME, verdict=pause.verdict, note=pause.note, decidedBy=pause.decided_by)
    for task in changed:
        run.task_changed(task)
    run_from(run, index if pause.kind == PauseKind.TASK else index + 1)
    return discussion


class _Refused(Exception):
    """The resumed leg cannot start: ``message`` says why (``run``: None when the group is gone)."""

    def __init__(self, message: str, run: Run | None = None) -> None:
        super().__init__(message)
        self.message, self.run = message, run


def _apply_approval(
    discussion: GroupConversation, pause: Pause, events: ev.EventSink
) -> tuple[Run, int, list[dict[str, Any]]]:
    """Check the group still fits (see the module; else ``_Refused``), then apply the decision: the task
    verdicts, the latest version, the pause finished, audited. The caller's transaction holds it all."""
    try:
        version = group_version(group_id=discussion.group_id)
    except ApplicationError as exc:  # the group was deleted while the discussion waited
        raise _Refused(f"Resume failed — {exc.detail}") from None
    run = Run(discussion, version.document, events)
    index, name = int(pause.bookmark.get("phaseIndex", 0)), str(pause.bookmark.get("phaseName", ""))
    if (drift := drift_message(version.document, index, name)) is not None:
        raise _Refused(drift, run)
    try:
        require_deployed_members(version.document)
    except ApplicationError as exc:
        raise _Refused(
            f"Resume failed — the discussion remains awaiting approval; retry. ({exc.detail})", run
        ) from None
    on_rejection = (version.document.get("hitlConfig") or {}).get("onTaskRejection") or FAIL
    discussion.group_version = version.version
    changed = (
        apply_task_approvals(discussion, pause, on_rejection=on_rejection, note=pause.note)
        if pause.kind == PauseKind.TASK
        else []
    )
    if pause.kind == PauseKind.TASK and not pause.automated:
        discussion.budget_base = discussion.turn_count  # a human's approval grants a fresh turn budget
    run.save()
    finish_pause(pause=pause, outcome="completed")
    append_audit_entry(
        subject_type=SubjectType.DISCUSSION,
        subject_id=discussion.pk,
        verb="hitl.discussion.resumed",
        actor=pause.decided_by,
        automated=pause.automated,
        pause_id=pause.id,
        epoch=pause.epoch,
        detail={
            "phaseIndex": index,
            "phaseName": name,
            "groupVersion": version.version,
            "tasks": {task["id"]: task["status"] for task in changed},
        },
    )
    return run, index, changed


def _cancel_unstarted(discussion: GroupConversation, pause: Pause, events: ev.EventSink) -> GroupConversation:
    """The discussion was cancelled after the decision, before its continuation started: it ends
    CANCELLED by the canceller, the pause finished as cancelled (``hitl.continuation.cancelled``)."""
    run = Run(discussion, discussion_version(discussion).document, events)
    by = discussion.cancel_requested_by or None
    with transaction.atomic():  # the discussion, then the pause: the lock order of every continuation
        finish(run, DiscussionState.CANCELLED, by=by)
        finish_pause(
            pause=pause,
            outcome="cancelled",
            detail={"cancelledBy": discussion.cancel_requested_by, "started": False, "stoppedBefore": None},
        )
    run.emit(ev.CANCELLED, state=DiscussionState.CANCELLED, cancelledBy=by)
    return discussion


def _fail_rejected(discussion: GroupConversation, pause: Pause, events: ev.EventSink) -> GroupConversation:
    """A top-level rejection fails the discussion, on the group version it runs
    on: failing needs neither the group's latest version nor its members, so a group deleted or changed
    meanwhile, or a member undeployed, never keeps a rejected discussion (or a timer rejecting it)
    waiting."""
    document = discussion_version(discussion).document
    run = Run(discussion, document, events)
    index, name = int(pause.bookmark.get("phaseIndex", 0)), str(pause.bookmark.get("phaseName", ""))
    phases = document["phases"]
    with transaction.atomic():
        discussion.transcript.append(
            own_error(
                phases[index] if index < len(phases) else {"name": name},
                f"Discussion failed: the approval was rejected by {pause.decided_by}"
                + (f": {pause.note}" if pause.note else ""),
            )
        )
        # the discussion, then the pause: the order of every other continuation and of a cancel, which
        # deadlocked with this one when it took the pause first
        finish(run, DiscussionState.FAILED)
        finish_pause(pause=pause, outcome="completed")
    run.emit(ev.GROUP_COMPLETE, state=DiscussionState.FAILED, verdict=pause.verdict, note=pause.note)
    return discussion
