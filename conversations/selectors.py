"""Reads of conversations, each behind the access rule of what the caller wants to do, and of the agent list."""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass
from typing import Any

from approvals.access import require_decider, require_owner_or_admin
from common import rows
from conversations.agents import OnVersion, find_on_version
from conversations.models import Agent, Conversation

WHAT = "conversation"  # the word the access refusals use


def _find(conversation_id: Any) -> Conversation | None:
    try:
        key = uuid.UUID(str(conversation_id))
    except ValueError:
        return None
    if not rows.on_postgresql():
        return Conversation.objects.filter(pk=key).first()
    found = rows.fetch_one(_find_sql(), [key])
    return None if found is None else rows.instance(Conversation, found)


@functools.cache
def _find_sql() -> str:
    return f'SELECT {rows.select_list(Conversation, "c")} FROM {rows.table(Conversation)} c WHERE c."id" = %s'  # nosec B608  # identifiers from model metadata, values are parameters


def conversation_for_talk(user: Any, conversation_id: Any) -> Conversation:
    """Say, undo, redo, end and reading the snapshot: owner or admin."""
    conversation = _find(conversation_id)
    require_owner_or_admin(
        user,
        exists=conversation is not None,
        owner_id=conversation.owner_id if conversation else None,
        what=WHAT,
    )
    assert conversation is not None  # nosec B101  # type narrowing; the check above already refused it
    return conversation


def talk_on_version(user: Any, conversation_id: Any) -> OnVersion:
    """``conversation_for_talk`` (same access rule, same refusals), with the deployed version a turn
    runs on and the pending pauses its caps count read in the same statement: what ``turns.say`` needs,
    in one query."""
    found = _find_on_version(conversation_id, with_open_pauses=True)
    require_owner_or_admin(
        user, exists=found is not None, owner_id=found.conversation.owner_id if found else None, what=WHAT
    )
    assert found is not None  # nosec B101  # type narrowing; the check above already refused it
    return found


def decision_on_version(user: Any, conversation_id: Any, *, with_pending: bool = False) -> OnVersion:
    """``conversation_for_decision`` (same access rule, same refusals), with the deployed version read
    in the same statement: what the decision's check needs (``check_can_continue``), in one query;
    ``with_pending``: the pending pause the decision is for, in that query too."""
    found = _find_on_version(conversation_id, with_pending=with_pending)
    require_decider(
        user, exists=found is not None, owner_id=found.conversation.owner_id if found else None, what=WHAT
    )
    assert found is not None  # nosec B101  # type narrowing; the check above already refused it
    return found


def _find_on_version(
    conversation_id: Any, *, with_pending: bool = False, with_open_pauses: bool = False
) -> OnVersion | None:
    try:
        return find_on_version(
            uuid.UUID(str(conversation_id)), with_pending=with_pending, with_open_pauses=with_open_pauses
        )
    except ValueError:
        return None


def conversation_for_decision(user: Any, conversation_id: Any) -> Conversation:
    """Resume, cancel and approval status: owner, admin or approver."""
    conversation = _find(conversation_id)
    require_decider(
        user,
        exists=conversation is not None,
        owner_id=conversation.owner_id if conversation else None,
        what=WHAT,
    )
    assert conversation is not None  # nosec B101  # type narrowing; the check above already refused it
    return conversation


def reread_conversation(*, conversation_id: Any) -> Conversation:
    """The conversation read again, for a caller already past its access rule (after waiting for a
    continuation); ``Conversation.DoesNotExist`` if it is gone."""
    return Conversation.objects.get(pk=conversation_id)


def managed_conversation(*, user: Any, agent_id: Any, environment: str) -> Conversation | None:
    """The caller's own newest conversation with the agent in ``environment`` that has not ended: the one
    a managed chat (MCP ``chat_managed``) continues. It stays pinned while it awaits approval, as in the
    reference; an ERROR or interrupted one is left behind and a new one is started. Owner-only by
    construction (the owner index, newest first)."""
    try:
        agent_uuid = uuid.UUID(str(agent_id))
    except ValueError:
        return None
    return (
        Conversation.objects.filter(owner=user, agent_id=agent_uuid, environment=environment)
        .exclude(state__in=MANAGED_LEFT_BEHIND)
        .order_by("-created_at")
        .first()
    )


MANAGED_LEFT_BEHIND = ("ENDED", "ERROR", "EXECUTION_INTERRUPTED")


@dataclass(frozen=True)
class AgentSummary:
    id: uuid.UUID
    name: str
    latest_version: int  # 0 for an agent without versions


def agent_list() -> list[AgentSummary]:
    """The agents not deleted, by name, each with its latest version (every caller may list them)."""
    agents = Agent.objects.filter(deleted_at__isnull=True).prefetch_related("versions").order_by("name")
    return [
        AgentSummary(
            id=agent.id,
            name=agent.name,
            latest_version=max((v.version for v in agent.versions.all()), default=0),
        )
        for agent in agents
    ]
