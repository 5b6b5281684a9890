"""Deleting a discussion (``DELETE /groups/{groupId}/conversations/{discussionId}``): the discussion and
the 1:1 conversations its members talked through go; its ledger entries and decided pauses stay.

Its owner and admins may delete it (an approver decides, it does not own). A discussion awaiting
approval has its pause cancelled first, through the audited cancel path, in the same transaction; a
running one is refused (409: cancel it, then delete it once it stopped), so nothing that runs can find
its discussion gone.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from approvals.access import require_owner_or_admin
from approvals.actors import actor_for_user
from approvals.audit import append_audit_entry
from approvals.models import SubjectType
from common.errors import NotFound, WrongState
from conversations.models import Conversation, ConversationState
from groups.discussion_decisions import cancel_pending_of
from groups.models import TERMINAL_STATES, GroupConversation
from groups.selectors import GONE, discussion_for_owner

# member conversations left alone: one awaiting a decision or running a turn is not the discussion's to end
KEPT_STATES = (ConversationState.AWAITING_HUMAN, ConversationState.IN_PROGRESS)


def delete_discussion(*, user: Any, group_id: Any, discussion_id: Any) -> None:
    discussion = discussion_for_owner(user=user, group_id=group_id, discussion_id=discussion_id)
    require_owner_or_admin(user, exists=True, owner_id=discussion.owner_id, what="discussion")
    actor = actor_for_user(user)
    with transaction.atomic():
        cancel_pending_of(discussion.pk, actor)  # the pause first: the order a decision locks them in
        locked = GroupConversation.objects.select_for_update().filter(pk=discussion.pk).first()
        if locked is None:
            raise NotFound(GONE)
        if locked.state not in TERMINAL_STATES:
            raise WrongState(
                f"The discussion is running (current state: {locked.state}): cancel it, then delete it "
                "once it stopped",
                current_state=locked.state,
            )
        members = Conversation.objects.filter(pk__in=list(locked.member_conversations.values()))
        members.exclude(state__in=KEPT_STATES).delete()
        append_audit_entry(
            subject_type=SubjectType.DISCUSSION,
            subject_id=locked.pk,
            verb="hitl.discussion.deleted",
            actor=actor.name,
            detail={"state": locked.state, "memberConversations": len(locked.member_conversations)},
        )
        locked.delete()
