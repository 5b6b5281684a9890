"""The 1:1 conversation tools, each the REST operation's service call (conversations.api): the same
access functions, the same decision service and the same views. Sync: the server runs them off the
event loop (mcp_surface.server)."""

from __future__ import annotations

from typing import Any

from approvals.models import Engine
from approvals.pause_summaries import decision_summary, inbox_row_from_values
from approvals.selectors import pause_by_id, pending_inbox_rows
from approvals.votes import vote_answer
from common.errors import BadRequest
from common.throttles import TURNS, WRITES, count_request
from conversations import managed, turns
from conversations.conversation_decisions import decide_conversation
from conversations.models import ConversationState
from conversations.nested_agents import talk_result
from conversations.selectors import (
    conversation_for_decision,
    managed_conversation,
    reread_conversation,
    talk_on_version,
)
from conversations.snapshots import approval_status_in_detail, snapshot
from mcp_surface.answers import require_mutations_enabled
from mcp_surface.identity import mcp_actor
from mcp_surface.inbox_rows import what_is_asked

INBOX_DEFAULT = 200
ENVIRONMENTS = ("production", "test")
MESSAGE_MAX = 16_384  # as REST's say


def required_id(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BadRequest(f"'{name}' is required", errors=[{"field": name, "message": "required string"}])
    return value.strip()


def list_pending_approvals(user: Any, *, limit: Any = None) -> dict[str, Any]:
    rows = pending_inbox_rows(user, limit=INBOX_DEFAULT if limit is None else limit, surface=Engine.REGULAR)
    return {"approvals": what_is_asked([inbox_row_from_values(row) for row in rows])}


def get_approval_status(user: Any, *, conversation_id: Any, detail: Any = None) -> dict[str, Any]:
    """REST's approval-status; ``detail="full"`` adds the snapshot REST adds (the redacted view: no tool
    arguments beyond pauseDetails' redacted ones, no frozen transcript, no fingerprint)."""
    conversation = conversation_for_decision(user, required_id(conversation_id, "conversationId"))
    return approval_status_in_detail(conversation, user=user, detail=detail)


def _decision_body(verdict: Any, note: Any, tool_decisions: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"verdict": verdict}
    if note is not None:
        body["note"] = note
    if tool_decisions is not None:
        body["toolDecisions"] = tool_decisions
    return body


def resume_conversation(
    user: Any, *, conversation_id: Any, verdict: Any, note: Any = None, tool_decisions: Any = None
) -> dict[str, Any]:
    """REST's resume with ``?wait``: the decision, then its continuation in this process (or queued for
    the q-cluster in a q-cluster-only deployment), answered with the conversation as it then is."""
    require_mutations_enabled()
    count_request(user=user, scope=WRITES)
    continued = decide_conversation(
        user=user,
        conversation_id=required_id(conversation_id, "conversationId"),
        body=_decision_body(verdict, note, tool_decisions),
        actor=mcp_actor(user),
    )
    conversation_pk = continued.pause.subject_id
    if continued.tally is not None:  # one approval of several: nothing decided yet
        return {"conversationId": str(conversation_pk), **vote_answer(continued.pause, continued.tally)}
    pause = pause_by_id(pause_id=continued.pause.id)
    conversation = snapshot(reread_conversation(conversation_id=conversation_pk))
    conversation["lastDecision"] = decision_summary(pause)
    return {
        "status": "RESUMED",
        "conversationId": str(conversation_pk),
        "pauseId": str(pause.id),
        "verdict": pause.verdict,
        "decidedBy": pause.decided_by,
        "continuation": continued.outcome,
        "conversation": conversation,
    }


def cancel_conversation(user: Any, *, conversation_id: Any) -> dict[str, Any]:
    """REST's cancel: the pending approval (CANCELLED) or the running turn (CANCEL_REQUESTED while it
    stops before its next task)."""
    require_mutations_enabled()
    count_request(user=user, scope=WRITES)
    conversation = conversation_for_decision(user, required_id(conversation_id, "conversationId"))
    result = turns.cancel_conversation(conversation=conversation, actor=mcp_actor(user))
    body: dict[str, Any] = {
        "status": "CANCEL_REQUESTED" if result.cancel_request() else "CANCELLED",
        "conversationId": str(conversation.pk),
        "conversation": snapshot(result.conversation),
    }
    if (requested := result.cancel_request()) is not None:
        body["cancelRequested"] = requested
    return body


def _message(value: Any) -> str:
    if not isinstance(value, str):
        raise BadRequest("'message' is required", errors=[{"field": "message", "message": "required string"}])
    if len(value) > MESSAGE_MAX:
        raise BadRequest(
            f"'message' is over {MESSAGE_MAX} characters",
            errors=[{"field": "message", "message": f"over {MESSAGE_MAX} characters"}],
        )
    return value


def _environment(value: Any) -> str:
    environment = value or "production"
    if environment not in ENVIRONMENTS:
        raise BadRequest(
            f"unknown environment '{environment}'",
            errors=[{"field": "environment", "message": "must be production or test"}],
        )
    return environment


def _talk(user: Any, conversation_id: str, message: str) -> dict[str, Any]:
    """One turn of an existing conversation (owner or admin, as REST's say); while it awaits approval the
    message is not consumed and the answer is PAUSED_FOR_APPROVAL again."""
    found = talk_on_version(user, conversation_id)
    if found.conversation.state == ConversationState.AWAITING_HUMAN:
        return talk_result(found.conversation)
    said = turns.say(conversation=found, user=user, user_input=message, context={})
    return talk_result(said.conversation, said.steps)


def _start_and_talk(user: Any, agent_id: str, environment: str, message: str) -> dict[str, Any]:
    started = turns.start_conversation(user=user, agent_id=agent_id, environment=environment)
    if started.conversation.state == ConversationState.AWAITING_HUMAN or not message:
        return talk_result(started.conversation, started.steps)
    said = turns.say(conversation=started.conversation, user=user, user_input=message, context={})
    return talk_result(said.conversation, said.steps)


def talk_to_agent(
    user: Any, *, message: Any, agent_id: Any = None, conversation_id: Any = None, environment: Any = None
) -> dict[str, Any]:
    """Start a conversation with ``agent_id`` and say ``message``, or say it in ``conversation_id``
    (it changes a conversation: off with the kill switch, like the decisions). It counts against the
    caller's turn rate as REST's start and say do."""
    require_mutations_enabled()
    count_request(user=user, scope=TURNS)
    text = _message(message)
    if isinstance(conversation_id, str) and conversation_id.strip():
        return _talk(user, conversation_id.strip(), text)
    if isinstance(agent_id, str) and agent_id.strip():
        return _start_and_talk(user, agent_id.strip(), _environment(environment), text)
    raise BadRequest(
        "name an 'agentId' (to start a conversation) or a 'conversationId' (to continue one)",
        errors=[{"field": "agentId", "message": "agentId or conversationId is required"}],
    )


def chat_managed(
    user: Any,
    *,
    message: Any,
    agent_id: Any = None,
    environment: Any = None,
    intent: Any = None,
    user_id: Any = None,
) -> dict[str, Any]:
    """The caller's one running conversation, kept by the server (off with the kill switch; it counts
    against the caller's turn rate as REST's start and say do). With ``agent_id``: with that agent, the
    newest that has not ended (pinned while it awaits approval), or a new one. With ``intent`` (EDDI's
    form): the caller's managed conversation for the intent (conversations.managed), ``user_id`` only the
    caller's own user name."""
    require_mutations_enabled()
    count_request(user=user, scope=TURNS)
    text = _message(message)
    if intent is not None:
        if agent_id is not None:
            raise BadRequest(
                "name an 'agentId' or an 'intent', not both",
                errors=[{"field": "intent", "message": "not with agentId"}],
            )
        if user_id is not None:
            managed.require_own_user_id(user, required_id(user_id, "userId"))
        current = managed.current_conversation(user=user, intent=required_id(intent, "intent"))
        return _talk(user, str(current.conversation.pk), text)
    agent = required_id(agent_id, "agentId")
    where = _environment(environment)
    current_with = managed_conversation(user=user, agent_id=agent, environment=where)
    if current_with is not None:
        return _talk(user, str(current_with.pk), text)
    return _start_and_talk(user, agent, where, text)
