"""Opening a pause: one row, written in the caller's transaction with the subject's state."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from approvals import metrics, notices
from approvals.audit import append_audit_entry
from approvals.models import Pause, PauseKind, PauseRoute, TimeoutPolicy
from approvals.openings import announce_opened
from approvals.pause_rows import insert_pause
from approvals.routing import Routing, effective_routing, route_rows
from approvals.self_approval import effective_allow_self_approval
from approvals.timer_arming import timer_schedule
from common.durations import positive_duration

GENERIC_RULE_REASON = "PAUSE_CONVERSATION action"
FINITE_POLICIES = (TimeoutPolicy.AUTO_APPROVE, TimeoutPolicy.AUTO_REJECT, TimeoutPolicy.ABORT)


def effective_timeout(hitl_config: dict[str, Any] | None) -> tuple[str, str]:
    """(policy, approvalTimeout) from a hitlConfig; anything unusable means wait indefinitely.

    Documents are validated on save, so this only guards against stored data older than the rules.
    """
    config = hitl_config or {}
    policy = config.get("timeoutPolicy") or TimeoutPolicy.WAIT_INDEFINITELY
    timeout = config.get("approvalTimeout") or ""
    if policy not in TimeoutPolicy.values:
        return TimeoutPolicy.WAIT_INDEFINITELY, timeout
    if policy in FINITE_POLICIES:
        try:
            positive_duration(timeout)
        except (TypeError, ValueError):
            return TimeoutPolicy.WAIT_INDEFINITELY, timeout
    return policy, timeout


def deadline_for(policy: str, timeout: str, paused_at: datetime) -> datetime | None:
    if policy not in FINITE_POLICIES:
        return None
    return paused_at + positive_duration(timeout)


def open_pause(
    *,
    surface: str,
    kind: str,
    subject_type: str,
    subject_id: uuid.UUID,
    owner_id: int | None,
    reason: str,
    hitl_config: dict[str, Any] | None,
    bookmark: dict[str, Any],
    details: dict[str, Any] | None = None,
    tool_names: list[str] | None = None,
    agent_id: uuid.UUID | None = None,
    agent_version: int | None = None,
    group_id: uuid.UUID | None = None,
    raised_by_id: int | None = None,
    allow_self_approval: bool | None = None,
    routing: Routing | None = None,
) -> Pause:
    """Create the PENDING pause with its deadline. Must run inside the transaction that moves the
    subject to its awaiting state, so the two commit together or not at all.

    ``allow_self_approval`` and ``routing`` (who approves, approvals.routing) are frozen on the pause;
    None means the agent level of ``hitl_config`` (a caller whose ``hitl_config`` is not the agent's, as
    for a tool-call pause with its matched rules, passes them).
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("open_pause must run inside the subject's transaction")
    if allow_self_approval is None:
        allow_self_approval = effective_allow_self_approval(hitl_config)
    if routing is None:
        routing = effective_routing(hitl_config)
    policy, timeout = effective_timeout(hitl_config)
    paused_at = timezone.now()
    pause = Pause(
        surface=surface,
        kind=kind,
        subject_type=subject_type,
        subject_id=subject_id,
        owner_id=owner_id,
        raised_by_id=raised_by_id,
        allow_self_approval=allow_self_approval,
        agent_id=agent_id,
        agent_version=agent_version,
        group_id=group_id,
        reason=(reason or GENERIC_RULE_REASON)[:500],
        timeout_policy=policy,
        approval_timeout=timeout,
        paused_at=paused_at,
        due_at=deadline_for(policy, timeout, paused_at),
        bookmark={**bookmark, "pausedAt": paused_at.isoformat()},
        details=details or {},
        tool_names=tool_names or [],
        routed=routing.routed,
        required_approvals=routing.required,
        routing=routing.frozen(paused_at),
    )
    pause.remind_at = routing.remind_at(pause.due_at, paused_at)
    # its timer's schedule, the pause with the schedule's key, and the subject's audit head locked: one statement
    head = insert_pause(pause, timer_schedule(pause))
    if routes := route_rows(pause, routing):
        PauseRoute.objects.bulk_create(routes)
    transaction.on_commit(lambda: metrics.count_pause(surface))
    append_audit_entry(
        subject_type=subject_type,
        subject_id=subject_id,
        verb="hitl.pause",
        actor="system:pipeline",
        automated=True,
        pause_id=pause.id,
        epoch=pause.epoch,
        detail={
            "kind": kind,
            "surface": surface,
            "reason": pause.reason,
            "timeoutPolicy": policy,
            "approvalTimeout": timeout,
            "dueAt": pause.due_at.isoformat() if pause.due_at else None,
            "toolNames": pause.tool_names,
            "allowSelfApproval": allow_self_approval,
            **({"routing": pause.routing} if pause.routing else {}),
        },
        head=head,
    )
    announce_opened(pause)
    notices.on_opened(pause)
    return pause


def rule_pause_reason(hitl_config: dict[str, Any] | None) -> str:
    reason = (hitl_config or {}).get("pauseReason")
    return reason if isinstance(reason, str) and reason.strip() else GENERIC_RULE_REASON


__all__ = ["open_pause", "effective_timeout", "deadline_for", "rule_pause_reason", "PauseKind"]
