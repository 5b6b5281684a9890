"""The group discussion tools, each the REST operation's service call (groups.api): the same access
(``discussion_for_owner``: no existence oracle), the same approve body parser and continuation, the same
discussion view."""

from __future__ import annotations

import json
from typing import Any

from approvals.votes import vote_answer
from common.errors import BadRequest
from common.throttles import WRITES, count_request
from groups.discussion_decisions import approve_discussion, cancel_discussion
from groups.discussion_status import approval_status_in_detail, pending_group_approvals
from groups.errors import ResumeNotStarted
from groups.models import DiscussionState, GroupConversation
from groups.selectors import discussion_decided, discussion_for_owner, latest_pause_reason
from groups.snapshots import discussion_snapshot
from mcp_surface.answers import require_mutations_enabled
from mcp_surface.conversation_tools import required_id
from mcp_surface.identity import mcp_actor
from mcp_surface.inbox_rows import what_is_asked

INBOX_DEFAULT = 100  # EDDI's default, as on REST


def list_group_pending_approvals(user: Any, *, group_id: Any, limit: Any = None) -> dict[str, Any]:
    rows = pending_group_approvals(
        user, limit=INBOX_DEFAULT if limit is None else limit, group_id=required_id(group_id, "groupId")
    )
    return {"approvals": what_is_asked(rows)}


def list_all_group_pending_approvals(user: Any, *, limit: Any = None) -> dict[str, Any]:
    rows = pending_group_approvals(user, limit=INBOX_DEFAULT if limit is None else limit)
    return {"approvals": what_is_asked(rows)}


def _discussion(user: Any, group_id: Any, conversation_id: Any) -> GroupConversation:
    return discussion_for_owner(
        user=user,
        group_id=required_id(group_id, "groupId"),
        discussion_id=required_id(conversation_id, "conversationId"),
    )


def get_group_approval_status(
    user: Any, *, group_id: Any, conversation_id: Any, detail: Any = None
) -> dict[str, Any]:
    discussion = _discussion(user, group_id, conversation_id)
    return approval_status_in_detail(discussion, user=user, detail=detail)


def _task_approvals_from_json(task_approvals: Any, text: Any) -> Any:
    """``taskApprovalsJson`` parsed: an object, given instead of ``taskApprovals``; else a 400 naming it."""
    field = "taskApprovalsJson"
    if task_approvals is not None:
        raise BadRequest(
            f"{field}: give taskApprovals or taskApprovalsJson, not both",
            errors=[{"field": field, "message": "give taskApprovals or taskApprovalsJson, not both"}],
        )
    try:
        parsed = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        message = 'must be a JSON object as text, e.g. "{"t1": "APPROVED"}"'
        raise BadRequest(f"{field}: {message}", errors=[{"field": field, "message": message}])
    return parsed


def approve_group_phase(
    user: Any,
    *,
    group_id: Any,
    conversation_id: Any,
    verdict: Any,
    note: Any = None,
    task_approvals: Any = None,
    task_approvals_json: Any = None,
) -> dict[str, Any]:
    """REST's approve: the decision and the resumed discussion, run to its end or next gate before the
    answer (queued for the q-cluster in a q-cluster-only deployment). ``task_approvals_json``: the task
    verdicts as EDDI's clients send them, a JSON string (one of the two)."""
    require_mutations_enabled()
    count_request(user=user, scope=WRITES)
    if task_approvals_json is not None:
        task_approvals = _task_approvals_from_json(task_approvals, task_approvals_json)
    decision: dict[str, Any] = {"verdict": verdict}
    if note is not None:
        decision["note"] = note
    body: dict[str, Any] = {"decision": decision}
    if task_approvals is not None:
        body["taskApprovals"] = task_approvals
    continued = approve_discussion(
        user=user,
        group_id=required_id(group_id, "groupId"),
        discussion_id=required_id(conversation_id, "conversationId"),
        body=body,
        actor=mcp_actor(user),
    )
    discussion = discussion_decided(continued.pause.subject_id)
    if continued.tally is not None:  # one approval of several: nothing decided yet
        return vote_answer(continued.pause, continued.tally) | {"discussion": discussion_snapshot(discussion)}
    if continued.outcome == "restored":
        raise ResumeNotStarted(
            latest_pause_reason(discussion) or "the resumed discussion could not start",
            currentState=discussion.state,
        )
    return {
        "status": "QUEUED" if continued.outcome == "queued" else "RESUMED",
        "verdict": continued.pause.verdict,
        "decidedBy": continued.pause.decided_by,
        "discussion": discussion_snapshot(discussion),
    }


def cancel_group_discussion(user: Any, *, group_id: Any, conversation_id: Any) -> dict[str, Any]:
    require_mutations_enabled()
    count_request(user=user, scope=WRITES)
    discussion = cancel_discussion(
        user=user,
        group_id=required_id(group_id, "groupId"),
        discussion_id=required_id(conversation_id, "conversationId"),
        actor=mcp_actor(user),
    )
    cancelled = discussion.state == DiscussionState.CANCELLED
    return {
        "status": "CANCELLED" if cancelled else "CANCEL_REQUESTED",
        "discussion": discussion_snapshot(discussion),
    }
