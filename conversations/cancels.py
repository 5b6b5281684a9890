"""Cancelling and ending a conversation, and how a running turn honours a cancel.

A pending approval is cancelled at once (the audited cancel path). A running turn cannot be stopped
from outside, so a cancel of it is cooperative and visible:

- The request (who, when) is committed on its own, on the conversation and, when the turn is the
  continuation of a decision, on that pause; the canceller's entry goes to the ledger with it.
- The running turn asks before every task, before every further http call of a task and before every
  model call and tool run (``cancel_check``); it stops there, so nothing after that point runs.
- It then ends cancelled (``finish_cancelled_turn``): what ran so far stays on its step, marked
  ``hitl:cancelled``; the conversation becomes EXECUTION_INTERRUPTED (ENDED after endConversation);
  a continuation's pause is RESOLVED with ``hitl.continuation.cancelled``, keeping its verdict and
  the canceller, so approval-status and the approver's ``?wait`` answer show both.
- A continuation no worker has claimed yet is cancelled before it starts: nothing of it ever runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from approvals.actors import Actor
from approvals.audit import append_audit_entry
from approvals.continuation_runs import claim_for_cancel, record_cancel_request
from approvals.decisions import cancel_pending_pause, finish_pause, open_pause_of
from approvals.models import Pause, PauseStatus, SubjectType
from approvals.pause_summaries import iso
from common.errors import WrongState
from conversations.lifecycle import TurnCancelled
from conversations.models import Conversation, ConversationState
from conversations.pipeline.conversation_memory import ConversationMemory
from conversations.step_store import save_step

S = ConversationState
CANCELLED = "CANCELLED"  # done: nothing (more) of the turn runs
REQUESTED = "REQUESTED"  # the running turn stops before its next task


@dataclass
class CancelResult:
    conversation: Conversation
    outcome: str  # CANCELLED | REQUESTED | ENDED
    requested_by: str = ""
    requested_at: datetime | None = None

    def cancel_request(self) -> dict[str, Any] | None:
        """What the canceller is told about a turn that is still stopping (None when nothing runs)."""
        if self.outcome != REQUESTED:
            return None
        return {"by": self.requested_by, "at": iso(self.requested_at)}


def cancel_check(conversation_id: Any) -> Callable[[], None]:
    """The check a running turn makes: it raises TurnCancelled once a cancel was recorded, or once the
    conversation is no longer running at all (ended, or interrupted by recovery)."""

    def check() -> None:
        row = (
            Conversation.objects.filter(pk=conversation_id)
            .values_list("state", "cancel_requested_at", "cancel_requested_by")
            .first()
        )
        if row is None:
            raise TurnCancelled("")
        state, requested_at, requested_by = row
        if requested_at is not None:
            raise TurnCancelled(requested_by)
        if state != S.IN_PROGRESS:
            raise TurnCancelled("")

    return check


def _resolving_pause(conversation_id: Any) -> Pause | None:
    return Pause.objects.filter(
        subject_type=SubjectType.CONVERSATION, subject_id=conversation_id, status=PauseStatus.RESOLVING
    ).first()


def _audit_cancel_of_turn(
    conversation: Conversation, actor: Actor, pause: Pause | None, *, mode: str, running: bool
) -> None:
    """The canceller's entry; for a continuation it names the decided pause it belongs to."""
    append_audit_entry(
        subject_type=SubjectType.CONVERSATION,
        subject_id=conversation.pk,
        verb="hitl.turn.interrupted",
        actor=actor.name,
        automated=actor.automated,
        conversation_id=conversation.pk,
        pause_id=pause.id if pause else None,
        epoch=pause.epoch if pause else None,
        detail={"mode": mode, "running": running},
    )


def _cancel_running_turn(
    conversation: Conversation, actor: Actor, *, mode: str, end: bool
) -> CancelResult | None:
    """Cancel the conversation's running turn (in the caller's transaction); None when nothing runs."""
    now = timezone.now()
    pause = _resolving_pause(conversation.pk)
    stopped_state = S.ENDED if end else S.EXECUTION_INTERRUPTED
    if pause is not None and claim_for_cancel(pause_id=pause.id, by=actor.name, at=now) is not None:
        Conversation.objects.filter(pk=conversation.pk, state=S.IN_PROGRESS).update(
            state=stopped_state, cancel_requested_at=now, cancel_requested_by=actor.name
        )
        _audit_cancel_of_turn(conversation, actor, pause, mode=mode, running=False)
        finish_pause(
            pause=pause,
            outcome="cancelled",
            detail={"cancelledBy": actor.name, "started": False, "stoppedBefore": None},
        )
        return CancelResult(conversation, CANCELLED, actor.name, now)
    request = {"cancel_requested_at": now, "cancel_requested_by": actor.name}
    if Conversation.objects.filter(
        pk=conversation.pk, state=S.IN_PROGRESS, cancel_requested_at__isnull=True
    ).update(**request, **({"state": S.ENDED} if end else {})):
        if pause is not None:
            record_cancel_request(pause_id=pause.id, by=actor.name, at=now)
        _audit_cancel_of_turn(conversation, actor, pause, mode=mode, running=True)
        return CancelResult(conversation, REQUESTED, actor.name, now)
    # Someone asked already: the turn is stopping for them (an end still ends the conversation).
    asked = Conversation.objects.filter(
        pk=conversation.pk, state=S.IN_PROGRESS, cancel_requested_at__isnull=False
    )
    first = asked.values_list("cancel_requested_by", "cancel_requested_at").first()
    if first is None:
        return None
    if end:
        asked.update(state=S.ENDED)
    return CancelResult(conversation, REQUESTED, first[0], first[1])


def _cancel_pending(conversation: Conversation, actor: Actor, *, mode: str) -> CancelResult | None:
    pause = open_pause_of(SubjectType.CONVERSATION, conversation.pk)
    if pause is not None and cancel_pending_pause(pause=pause, actor=actor, mode=mode):
        return CancelResult(conversation, CANCELLED, actor.name, timezone.now())
    return None


def _cancel_pending_or_running(
    conversation: Conversation, actor: Actor, *, mode: str, end: bool
) -> CancelResult | None:
    """The pending approval, else the running turn, else the pause that turn opened between the two looks."""
    return (
        _cancel_pending(conversation, actor, mode=mode)
        or _cancel_running_turn(conversation, actor, mode=mode, end=end)
        or _cancel_pending(conversation, actor, mode=mode)
    )


def cancel_conversation(*, conversation: Conversation, actor: Actor) -> CancelResult:
    """Cancel a pending approval, or the running turn (REQUESTED while it is still stopping); 409 when
    neither exists."""
    mode = "CANCEL_GRACEFUL"
    with transaction.atomic():
        result = _cancel_pending_or_running(conversation, actor, mode=mode, end=False)
        if result is None:
            state = Conversation.objects.filter(pk=conversation.pk).values_list("state", flat=True).first()
            raise WrongState(
                "Nothing to cancel: conversation is neither awaiting approval nor executing "
                f"(current state: {state}). Use endConversation to close it.",
                current_state=state,
            )
    conversation.refresh_from_db()
    return result


def end_conversation(*, conversation: Conversation, actor: Actor) -> CancelResult:
    """End the conversation; a pending approval ends through the audited cancel path, a running turn is
    told to stop (REQUESTED) and the conversation is ENDED at once either way."""
    mode = "END_CONVERSATION"
    with transaction.atomic():
        result = _cancel_pending_or_running(conversation, actor, mode=mode, end=True)
        if result is None:
            Conversation.objects.filter(pk=conversation.pk).exclude(state=S.ENDED).update(state=S.ENDED)
            result = CancelResult(conversation, "ENDED")
    conversation.refresh_from_db()
    return result


def finish_cancelled_turn(
    conversation: Conversation,
    memory: ConversationMemory,
    *,
    stopped_before: dict[str, Any] | None,
    row: Any = None,
    resolving: Pause | None = None,
) -> str:
    """End a turn that found the conversation no longer its own; returns the conversation's state.

    With a recorded cancel, what ran so far is kept on the step (marked ``hitl:cancelled`` with who,
    when, and the task it stopped before; null when every task had run) and no pause is opened. Without
    one (ended or interrupted by recovery before any request was recorded) nothing is written.
    """
    with transaction.atomic():
        current = (
            Conversation.objects.select_for_update()
            .filter(pk=conversation.pk)
            .values("state", "cancel_requested_at", "cancel_requested_by")
            .first()
        )
        if (
            current is None
            or current["cancel_requested_at"] is None
            or current["state"] not in (S.IN_PROGRESS, S.ENDED)
        ):
            if resolving is not None:
                finish_pause(
                    pause=resolving, outcome="discarded", detail={"state": current and current["state"]}
                )
            return current["state"] if current else S.ENDED
        state = S.EXECUTION_INTERRUPTED if current["state"] == S.IN_PROGRESS else S.ENDED
        Conversation.objects.filter(pk=conversation.pk).update(state=state, properties=memory.properties)
        by = current["cancel_requested_by"]
        memory.current.data["hitl:cancelled"] = {
            "by": by,
            "at": iso(current["cancel_requested_at"]),
            "stoppedBefore": stopped_before,
        }
        save_step(conversation, memory.current, memory.properties, row=row)
        if resolving is not None:
            finish_pause(
                pause=resolving,
                outcome="cancelled",
                detail={"cancelledBy": by, "started": True, "stoppedBefore": stopped_before},
            )
    return state


def finish_unstarted_continuation(conversation: Conversation, pause: Pause) -> None:
    """A continuation that finds its conversation no longer running before it starts writes nothing:
    cancelled when a cancel (or end) was recorded for it, discarded otherwise."""
    with transaction.atomic():
        if conversation.cancel_requested_at is not None:
            finish_pause(
                pause=pause,
                outcome="cancelled",
                detail={
                    "cancelledBy": conversation.cancel_requested_by,
                    "started": False,
                    "stoppedBefore": None,
                },
            )
        else:
            finish_pause(pause=pause, outcome="discarded", detail={"state": conversation.state})
