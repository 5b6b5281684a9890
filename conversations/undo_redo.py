"""Undo and redo: moving a conversation's newest live step out of its history and back.

Live steps are the indexes 0..step_count-1 and the undone ones follow (conversations.step_store); the
conversation's properties become those of its newest live step.
"""

from __future__ import annotations

from django.db import transaction

from common.errors import WrongState
from conversations.models import Conversation, ConversationStep
from conversations.turn_commits import TALKABLE


def undo(*, conversation: Conversation) -> Conversation:
    return _move_history(conversation, undo=True)


def redo(*, conversation: Conversation) -> Conversation:
    return _move_history(conversation, undo=False)


def _move_history(conversation: Conversation, *, undo: bool) -> Conversation:
    with transaction.atomic():
        locked = Conversation.objects.select_for_update().get(pk=conversation.pk)
        if locked.state not in TALKABLE:
            raise WrongState(
                f"Cannot {'undo' if undo else 'redo'} while the conversation is {locked.state}",
                current_state=locked.state,
            )
        # live steps are the indexes 0..step_count-1, the undone ones follow (conversations.step_store)
        steps = ConversationStep.objects.filter(conversation=locked)
        if undo:
            target = steps.filter(undone=False, index=locked.step_count - 1).first()
        else:
            target = steps.filter(undone=True, index=locked.step_count).first()
        if target is None:
            raise WrongState(f"Nothing to {'undo' if undo else 'redo'}", current_state=locked.state)
        target.undone = undo
        target.save(update_fields=["undone"])
        locked.step_count += -1 if undo else 1
        latest = steps.filter(undone=False, index=locked.step_count - 1).only("properties").first()
        locked.properties = latest.properties if latest else {}
        locked.save(update_fields=["properties", "step_count", "updated_at"])
    conversation.refresh_from_db()
    return conversation
