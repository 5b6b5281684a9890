"""Talking to another deployed agent from a tool (sources a2a and dynamic), in a nested conversation.

The nested conversation belongs to the caller of the outer turn and runs in its environment. When it pauses for approval, the tool
gets a structured PAUSED_FOR_APPROVAL result naming the conversation and the reason, with
``"suggestNextTool": "resume_conversation"``; the nested approval stays pending for a reviewer.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

from django.contrib.auth import get_user_model

from approvals.models import SubjectType
from approvals.selectors import current_pause_of
from common.errors import ApplicationError
from conversations.models import ConversationState
from conversations.selectors import conversation_for_talk
from conversations.snapshots import snapshot

MAX_DEPTH = 3
_depth: contextvars.ContextVar[int] = contextvars.ContextVar("hitl_nested_depth", default=0)


def talk_result(conversation: Any, steps: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """What a caller that drives a conversation (a nested-agent tool, the MCP talk tools) is told: the
    output, or PAUSED_FOR_APPROVAL with the pause's redacted reason and tool names (never arguments)."""
    view = snapshot(conversation, steps=steps)
    if conversation.state == ConversationState.AWAITING_HUMAN:
        pause = current_pause_of(SubjectType.CONVERSATION, conversation.pk)
        return {
            "status": "PAUSED_FOR_APPROVAL",
            "conversationId": str(conversation.pk),
            "conversationState": ConversationState.AWAITING_HUMAN,
            "reason": pause.reason if pause else "",
            "pauseType": pause.kind if pause else "RULE",
            "tools": list(pause.tool_names) if pause else [],
            "suggestNextTool": "resume_conversation",
            "message": "The agent paused for human approval; a reviewer must decide before it continues.",
        }
    return {
        "status": "OK",
        "conversationId": str(conversation.pk),
        "conversationState": conversation.state,
        "output": view["output"],
    }


def talk_to_agent(
    *,
    say: Callable[..., Any],
    start_conversation: Callable[..., Any],
    caller_username: str,
    parent_conversation_id: str,
    message: str,
    agent_id: str | None = None,
    conversation_id: str | None = None,
    environment: str = "production",
) -> dict[str, Any]:
    """``say`` and ``start_conversation``: the turn services (conversations.turns, which passes them: it
    runs the outer turn, so this module cannot import it)."""
    if _depth.get() >= MAX_DEPTH:
        return {"status": "NOT_EXECUTED", "reason": f"agents may nest at most {MAX_DEPTH} conversations deep"}
    user = get_user_model().objects.filter(username=caller_username, is_active=True).first()
    if user is None:
        return {"status": "NOT_EXECUTED", "reason": "no acting user for a nested conversation"}
    if conversation_id and str(conversation_id) == str(parent_conversation_id):
        return {"status": "NOT_EXECUTED", "reason": "an agent may not send a request to its own conversation"}
    token = _depth.set(_depth.get() + 1)
    try:
        if conversation_id:
            conversation = conversation_for_talk(user, conversation_id)
        elif agent_id:
            started = start_conversation(user=user, agent_id=agent_id, environment=environment)
            conversation = started.conversation
            if conversation.state == ConversationState.AWAITING_HUMAN:
                return talk_result(conversation, started.steps)
        else:
            return {"status": "NOT_EXECUTED", "reason": "name an agentId or a conversationId"}
        if conversation.state == ConversationState.AWAITING_HUMAN:
            return talk_result(conversation)
        said = say(conversation=conversation, user=user, user_input=message, context={})
        return talk_result(said.conversation, said.steps)
    except ApplicationError as exc:
        return {"status": "NOT_EXECUTED", "reason": exc.detail}
    finally:
        _depth.reset(token)
