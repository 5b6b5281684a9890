"""What a conversation looks like to its owner: the snapshot, and its approval status."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from approvals.access import require_full_status, sees_what_runs
from approvals.models import PauseStatus, SubjectType
from approvals.pause_summaries import NO_PAUSE_FIELDS, decision_summary, pause_details, pause_fields
from approvals.selectors import current_pause_of, latest_pause_of
from conversations.eddi_fields import eddi_snapshot
from conversations.models import Conversation, ConversationState
from conversations.pipeline.conversation_memory import ConversationMemory
from conversations.step_store import newest_live

SNAPSHOT_STEP_FIELDS = ("index", "input", "actions", "output", "quick_replies")


def snapshot_steps_in(memory: ConversationMemory) -> list[dict[str, Any]] | None:
    """The newest live steps a snapshot shows, from the memory of a turn that just committed its step
    (``memory.current``, the conversation's newest): None when the memory does not hold all of them
    (its window is shorter than the snapshot's and the conversation longer), and they must be read."""
    held = [*memory.previous, memory.current]
    first = memory.first_index
    wanted = min(first + len(held), max(1, int(settings.HITL_SNAPSHOT_STEPS)))
    if len(held) < wanted:
        return None
    return [
        {
            "index": first + position,
            "input": step.input,
            "actions": list(step.actions),
            "output": list(step.output),
            "quick_replies": list(step.quick_replies),
        }
        for position, step in enumerate(held)
    ][len(held) - wanted :]


def _newest_live_steps(conversation: Conversation, count: int) -> list[dict[str, Any]]:
    """The newest ``count`` live steps, oldest first (an index range, one query)."""
    return list(newest_live(conversation.pk, count).values(*SNAPSHOT_STEP_FIELDS))[::-1]


def snapshot(conversation: Conversation, *, steps: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The conversation with its newest ``HITL_SNAPSHOT_STEPS`` live steps (oldest first) and
    ``stepCount``, the number of live steps: what a say answers does not grow with the conversation.

    Live steps are the indexes 0..step_count-1 (conversations.step_store), so the count is the
    newest step's index + 1, read with the steps in one query; or not read at all when the caller
    holds them (``steps``, from ``snapshot_steps_in`` of the turn that just committed).
    """
    wanted = max(0, int(settings.HITL_SNAPSHOT_STEPS))
    if steps is None:
        steps = _newest_live_steps(conversation, max(1, wanted))
    latest = steps[-1] if steps else None
    shown = steps[max(0, len(steps) - wanted) :] if wanted else []
    return {
        "conversationId": str(conversation.id),
        "agentId": str(conversation.agent_id),
        "agentVersion": conversation.agent_version,
        "environment": conversation.environment,
        "state": conversation.state,
        "conversationState": conversation.state,  # EDDI's name: its chat UIs watch it for AWAITING_HUMAN
        "output": list(latest["output"]) if latest else [],
        "actions": list(latest["actions"]) if latest else [],
        "quickReplies": list(latest["quick_replies"]) if latest else [],
        "properties": conversation.properties,
        "steps": [{"input": s["input"], "actions": s["actions"], "output": s["output"]} for s in shown],
        "stepCount": latest["index"] + 1 if latest else 0,
    }


def approval_status(conversation: Conversation, *, user: Any = None) -> dict[str, Any]:
    """The pause summary; unless awaiting a human, every pause field and pauseDetails are null. ``user``:
    who asks; a reviewer deciding the pause gets its reviewer view (approvals.access.sees_what_runs)."""
    pause = current_pause_of(SubjectType.CONVERSATION, conversation.id)
    awaiting = (
        conversation.state == ConversationState.AWAITING_HUMAN
        and pause is not None
        and pause.status == PauseStatus.PENDING
    )
    last = latest_pause_of(SubjectType.CONVERSATION, conversation.id)
    summary: dict[str, Any] = {
        "conversationId": str(conversation.id),
        "state": conversation.state,
        **(pause_fields(pause) if awaiting else NO_PAUSE_FIELDS),
        "pauseDetails": None,
        "lastDecision": decision_summary(last) if last is not None and not awaiting else None,
    }
    if awaiting:
        steps = _newest_live_steps(conversation, 1)
        summary["pauseDetails"] = pause_details(
            pause,
            step_actions=steps[-1]["actions"] if steps else [],
            reviewer=sees_what_runs(user, pause),
        )
    return summary


def approval_status_in_detail(conversation: Conversation, *, user: Any, detail: str | None) -> dict[str, Any]:
    """``approval_status``; ``detail="full"`` adds the snapshot (the redacted view: no tool arguments
    beyond pauseDetails' redacted ones, no frozen transcript, no fingerprint) as ``conversation`` and,
    beside the summary's fields, EDDI's (conversations.eddi_fields), for whom
    ``approvals.access.require_full_status`` allows it."""
    summary = approval_status(conversation, user=user)
    if detail == "full":
        require_full_status(
            user,
            owner_id=conversation.owner_id,
            awaiting=conversation.state == ConversationState.AWAITING_HUMAN,
            subject="conversation",
        )
        shown = snapshot(conversation)
        summary["conversation"] = shown
        pending = (
            current_pause_of(SubjectType.CONVERSATION, conversation.id)
            if summary["pauseId"] is not None
            else None
        )
        owner = conversation.owner.get_username() if conversation.owner_id is not None else None
        summary |= eddi_snapshot(shown, owner=owner, pending=pending)
    return summary
