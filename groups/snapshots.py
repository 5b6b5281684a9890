"""A discussion as every surface shows it: its transcript, tasks and state."""

from __future__ import annotations

from typing import Any

from groups.eddi_fields import eddi_group_conversation
from groups.models import TERMINAL_STATES, GroupConversation


def discussion_snapshot(discussion: GroupConversation) -> dict[str, Any]:
    return {
        "discussionId": str(discussion.id),
        "groupId": str(discussion.group_id),
        "groupVersion": discussion.group_version,
        "state": discussion.state,
        "phaseIndex": discussion.phase_index,
        "turnCount": discussion.turn_count,
        "question": discussion.question,
        "transcript": discussion.transcript,
        "tasks": discussion.tasks,
        "cancelRequested": discussion.cancel_requested_at is not None
        and discussion.state not in TERMINAL_STATES,
    }


def discussion_answer(discussion: GroupConversation) -> dict[str, Any]:
    """What REST answers with a discussion: ``discussion_snapshot`` and, beside its fields, EDDI's
    (groups.eddi_fields: each transcript entry carries both names), so a client written for EDDI reads
    its group conversation in it."""
    return discussion_snapshot(discussion) | eddi_group_conversation(discussion)
