"""Deciding a conversation's pending pause: the one service REST, MCP, Slack and the bench call.

The decision is the core's (approvals.decisions): one transaction holds the pause's compare-and-set,
its audit entry and its disarmed timer; the continuation resumes the turn and writes its journal. What a
surface chooses is where the continuation runs (``continuation``):

- ``HERE``: in this process, before the service returns (REST ``?wait``, MCP, the bench). With inline
  continuations off (``HITL_CONTINUE_INLINE=false``) it is queued for the q-cluster instead.
- ``QUICK_HERE``: here only when it takes milliseconds, else queued (Slack must answer within 3 s).
- ``AFTER_ANSWER``: with ``HITL_CONTINUE_AFTER_RESPONSE`` on, a quick one is claimed for this process to
  run once its answer is sent (``Continued.then``); else, and for a slow one, it is queued (REST
  without ``?wait``).
"""

from __future__ import annotations

from typing import Any, Final, Literal

from django.conf import settings

from approvals.actors import Actor, actor_for_user
from approvals.continuation_runs import (
    Continued,
    decide_and_continue,
    decide_and_continue_later,
    decide_and_queue,
)
from approvals.decision_input import parse_decision_body
from approvals.models import Engine, SubjectType
from approvals.pause_summaries import decision_summary
from approvals.selectors import pause_by_id
from conversations.selectors import decision_on_version, reread_conversation
from conversations.snapshots import snapshot
from conversations.turn_commits import TurnResult

Continuation = Literal["here", "quick_here", "after_answer"]
HERE: Final = "here"
QUICK_HERE: Final = "quick_here"
AFTER_ANSWER: Final = "after_answer"


def decide_conversation(
    *,
    user: Any,
    conversation_id: Any,
    body: Any,
    actor: Actor | None = None,
    continuation: Continuation = HERE,
) -> Continued:
    """Decide the conversation's pending pause and continue it where ``continuation`` says (see the
    module). Check order: body (400) -> access (403/404) -> state (409); bad input never consumes a pause.

    ``actor``: who the decision is recorded as when the surface has its own name (``mcp:alice``, acting
    as ``user``; ``slack:<userId>``, deciding with the Slack integration's user's access). Default:
    ``user``'s."""
    decision = parse_decision_body(body)
    found = decision_on_version(user, conversation_id, with_pending=continuation != AFTER_ANSWER)
    decide = {
        "surface": Engine.REGULAR,
        "subject_type": SubjectType.CONVERSATION,
        "subject_id": found.conversation.pk,
        "decision": decision,
        "actor": actor or actor_for_user(user),
        "subject": found,
    }
    if continuation == AFTER_ANSWER:
        if settings.HITL_CONTINUE_AFTER_RESPONSE:
            return decide_and_continue_later(**decide)
        return decide_and_queue(**decide)
    # the pending pause read with the conversation, not again: the compare-and-set on it still decides
    return decide_and_continue(**decide, pending=found.pending, only_if_quick=continuation == QUICK_HERE)


def settled_snapshot(conversation_id: Any, pause_id: Any) -> dict[str, Any]:
    """The snapshot after a decision, read afresh, with ``lastDecision``: the decision, and who cancelled
    it if anyone did."""
    body = snapshot(reread_conversation(conversation_id=conversation_id))
    body["lastDecision"] = decision_summary(pause_by_id(pause_id=pause_id))
    return body


def continued_snapshot(continued: Continued) -> dict[str, Any]:
    """``settled_snapshot`` for a continuation this process just ran: when its own result committed, the
    conversation, its steps and the finished pause are as it left them in memory, and nothing is read."""
    result = continued.subject
    if not continued.continued_here or not isinstance(result, TurnResult) or result.steps is None:
        return settled_snapshot(continued.pause.subject_id, continued.pause.id)
    body = snapshot(result.conversation, steps=result.steps)
    body["lastDecision"] = decision_summary(continued.pause)
    return body
