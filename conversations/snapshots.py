"""What a conversation looks like to its owner: the snapshot, and its approval status."""

from __future__ import annotations

from typing import Any

from approvals.models import PauseStatus, SubjectType
from approvals.presenters import NO_PAUSE_FIELDS, decision_summary, pause_details, pause_fields
from approvals.selectors import current_pause_of, latest_pause_of
from conversations.memory_store import live_steps
from conversations.models import Conversation, ConversationState


def snapshot(conversation: Conversation) -> dict[str, Any]:
    steps = live_steps(conversation)
    latest = steps[-1] if steps else None
    return {
        "conversationId": str(conversation.id),
        "agentId": str(conversation.agent_id),
        "agentVersion": conversation.agent_version,
        "environment": conversation.environment,
        "state": conversation.state,
        "output": list(latest.output) if latest else [],
        "actions": list(latest.actions) if latest else [],
        "quickReplies": list(latest.quick_replies) if latest else [],
        "properties": conversation.properties,
        "steps": [{"input": s.input, "actions": s.actions, "output": s.output} for s in steps],
    }


def approval_status(conversation: Conversation) -> dict[str, Any]:
    """The pause summary; unless awaiting a human, every pause field and pauseDetails are null."""
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
        steps = live_steps(conversation)
        summary["pauseDetails"] = pause_details(pause, step_actions=steps[-1].actions if steps else [])
    return summary
