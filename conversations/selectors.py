"""Reads of conversations, each behind the access rule of what the caller wants to do."""

from __future__ import annotations

import uuid
from typing import Any

from approvals.access import require_decider, require_owner_or_admin
from conversations.models import Conversation


def _find(conversation_id: Any) -> Conversation | None:
    try:
        key = uuid.UUID(str(conversation_id))
    except ValueError:
        return None
    return Conversation.objects.select_related("agent", "owner").filter(pk=key).first()


def conversation_for_talk(user: Any, conversation_id: Any) -> Conversation:
    """Say, undo, redo, end and reading the snapshot: owner or admin."""
    conversation = _find(conversation_id)
    require_owner_or_admin(
        user, exists=conversation is not None, owner_id=conversation.owner_id if conversation else None
    )
    assert conversation is not None
    return conversation


def conversation_for_decision(user: Any, conversation_id: Any) -> Conversation:
    """Resume, cancel and approval status: owner, admin or approver."""
    conversation = _find(conversation_id)
    require_decider(
        user, exists=conversation is not None, owner_id=conversation.owner_id if conversation else None
    )
    assert conversation is not None
    return conversation
