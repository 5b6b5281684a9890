"""What a discussion's approval looks like to those who may decide it: its approval status, and the
group inboxes. The group twin of conversations.snapshots.approval_status, built from the same pause
summaries (approvals.pause_summaries), so a group pause reads like a 1:1 one."""

from __future__ import annotations

import uuid
from typing import Any

from approvals.access import require_full_status
from approvals.models import Engine, PauseStatus, SubjectType
from approvals.pause_summaries import (
    decision_summary,
    inbox_row_from_values,
    iso,
    pause_details,
    shown_approval_timeout,
)
from approvals.selectors import current_pause_of, latest_pause_of, pending_inbox_rows
from groups.eddi_fields import eddi_group_conversation
from groups.models import DiscussionState, GroupConversation
from groups.selectors import live_group
from groups.snapshots import discussion_snapshot

# What approval-status shows for each pause field when nothing awaits a decision.
NO_PAUSE_FIELDS: dict[str, None] = dict.fromkeys(
    (
        "pauseId",
        "pausedAt",
        "phaseIndex",
        "phaseName",
        "pauseType",
        "reason",
        "timeoutPolicy",
        "approvalTimeout",
        "deadline",
        "awaitingTaskIds",
        "pauseDetails",
    )
)


# EDDI's names of the summary's fields, carried beside ours (docs/eddi-compatibility.md)
EDDI_NAMES = {
    "discussionId": "groupConversationId",
    "phaseName": "pausedPhaseName",
    "reason": "pauseReason",
    "awaitingTaskIds": "awaitingApprovalTaskIds",
}


def with_eddi_names(summary: dict[str, Any]) -> dict[str, Any]:
    return summary | {eddi: summary[ours] for ours, eddi in EDDI_NAMES.items() if ours in summary}


def approval_status(discussion: GroupConversation) -> dict[str, Any]:
    """The pause summary (with EDDI's names beside ours); unless the discussion awaits approval every
    pause field is null, and ``lastDecision`` shows its newest pause's decision instead."""
    return with_eddi_names(_approval_status(discussion))


def _approval_status(discussion: GroupConversation) -> dict[str, Any]:
    pause = current_pause_of(SubjectType.DISCUSSION, discussion.id)
    awaiting = (
        discussion.state == DiscussionState.AWAITING_APPROVAL
        and pause is not None
        and pause.status == PauseStatus.PENDING
    )
    summary: dict[str, Any] = {
        "discussionId": str(discussion.id),
        "groupId": str(discussion.group_id),
        "state": discussion.state,
    }
    if awaiting:
        where = pause.details or {}
        summary |= {
            "pauseId": str(pause.id),
            "pausedAt": iso(pause.paused_at),
            "phaseIndex": where.get("phaseIndex"),
            "phaseName": where.get("phaseName"),
            "pauseType": pause.kind,
            "reason": pause.reason,
            "timeoutPolicy": pause.timeout_policy,
            "approvalTimeout": shown_approval_timeout(pause.timeout_policy, pause.approval_timeout),
            "deadline": iso(pause.due_at),
            "awaitingTaskIds": list(where.get("awaitingTaskIds", [])),
            "pauseDetails": pause_details(pause),
            "lastDecision": None,
        }
        return summary
    last = latest_pause_of(SubjectType.DISCUSSION, discussion.id)
    return summary | NO_PAUSE_FIELDS | {"lastDecision": decision_summary(last) if last is not None else None}


def approval_status_in_detail(
    discussion: GroupConversation, *, user: Any, detail: str | None
) -> dict[str, Any]:
    """``approval_status``; ``detail="full"`` adds the discussion with its transcript and tasks as
    ``discussion`` and, beside the summary's fields, EDDI's group conversation (groups.eddi_fields), for
    whom ``approvals.access.require_full_status`` allows it."""
    summary = approval_status(discussion)
    if detail == "full":
        require_full_status(
            user,
            owner_id=discussion.owner_id,
            awaiting=discussion.state == DiscussionState.AWAITING_APPROVAL,
            subject="discussion",
        )
        eddi = eddi_group_conversation(discussion)
        summary["discussion"] = (
            discussion_snapshot(discussion) | eddi
        )  # as groups.snapshots.discussion_answer
        summary = eddi | summary
    return summary


def pending_group_approvals(user: Any, *, limit: Any, group_id: Any = None) -> list[dict[str, Any]]:
    """Pending group pauses ``user`` may decide, what is due first (approvals.selectors.due_first): every
    group's, or only ``group_id``'s.

    The group is looked up like the group store does (unknown, malformed or deleted: 404 for every
    caller). Group ids are no secret (every signed-in user may list the groups), so this is no existence
    oracle; which discussions exist is, and the owner scope of pending_inbox_rows (inside the query,
    before the limit) keeps them to those the caller may decide: a plain user's own."""
    group_key: uuid.UUID | None = None
    if group_id is not None:
        group_key = live_group(group_id=group_id).pk
    rows = pending_inbox_rows(user, limit=limit, surface=Engine.GROUP, group_id=group_key)
    return [inbox_row_from_values(row) for row in rows]
