"""A discussion as every surface shows it: its transcript, tasks and state."""

from __future__ import annotations

from typing import Any

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
