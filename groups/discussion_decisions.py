"""Deciding and cancelling a paused discussion (docs/groups.md, "Deciding a gate"), through the core.

The approve body is ``{"decision": {"verdict", "note"}, "taskApprovals": {taskId: verdict}}``. Check
order: the body's shape (400) -> access (403/404) -> a pending pause (409) -> ``taskApprovals`` against
the pause (400: unknown task, a task not awaiting approval, a value that is not APPROVED or REJECTED,
any map on a PHASE pause) -> the compare-and-set (409 to the loser). Nothing is applied before all of
it passed, so a bad decision leaves the pause and its timer as they were.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone
from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from approvals.actors import Actor, actor_for_user
from approvals.audit import append_audit_entry
from approvals.continuation_runs import (
    Continued,
    decide_and_continue,
    decide_and_queue,
    record_cancel_request,
)
from approvals.decision_input import DecisionBodySerializer, DecisionInput, parse_verdict
from approvals.decisions import cancel_pending_pause, open_pause_of
from approvals.models import Engine, Pause, PauseKind, PauseStatus, SubjectType
from approvals.pause_kinds import register_decision_validator, register_details_provider
from common.errors import BadRequest, WrongState
from common.request_bodies import BodySerializer, validated_body
from groups import events as ev
from groups import task_list
from groups.models import TERMINAL_STATES, GroupConversation
from groups.selectors import discussion_for_owner

DECISION_REQUIRED = "Request body must include a 'decision' with a 'verdict' field (APPROVED or REJECTED)"
WHAT = "Group conversation"


@extend_schema_serializer(component_name="GroupApproval")
class GroupDecisionBodySerializer(BodySerializer):
    """The approve body; any other field is a 400 naming it."""

    not_an_object = ("decision", "required")

    decision = DecisionBodySerializer(error_messages={"required": "required", "null": "required"})
    taskApprovals = serializers.DictField(  # the wire name
        child=serializers.CharField(allow_blank=True, trim_whitespace=False),
        required=False,
        allow_null=True,
        default=dict,
        error_messages={"not_a_dict": "must be an object keyed by task id"},
        help_text='TASK pauses only: {taskId: "APPROVED"|"REJECTED"} (case-insensitive); '
        "tasks not named stay awaiting approval; {} or no map approves every awaiting task",
    )

    def problem_detail(self, errors: list[dict[str, str]]) -> str:
        data = self.initial_data
        decision = data.get("decision") if isinstance(data, dict) else None
        if not isinstance(decision, dict) or parse_verdict(decision.get("verdict")) is None:
            return DECISION_REQUIRED
        return super().problem_detail(errors)


def parse_group_decision(data: Any) -> DecisionInput:
    body = validated_body(GroupDecisionBodySerializer, data)
    decision = body["decision"]
    return DecisionInput(
        verdict=decision["verdict"],
        note=decision["note"],
        tool_decisions=decision["toolDecisions"],
        task_approvals=dict(body["taskApprovals"] or {}),
    )


def _tasks_of(pause: Pause) -> list[dict[str, Any]]:
    tasks = (
        GroupConversation.objects.filter(pk=pause.subject_id).values_list("tasks", flat=True).first() or []
    )
    return task_list.of_phase(tasks, pause.bookmark.get("phaseName", ""))


def validate_task_approvals(pause: Pause, decision: DecisionInput) -> dict[str, Any]:
    """Every entry of ``taskApprovals`` names a task of the paused phase that awaits approval, with
    APPROVED or REJECTED; all are checked before any is applied. Returns the audit's detail."""
    if not decision.task_approvals:
        return {}
    by_id = {task["id"]: task for task in _tasks_of(pause)}
    errors = []
    normalized = {}
    for task_id, value in decision.task_approvals.items():
        field = f"taskApprovals.{task_id}"
        task = by_id.get(task_id)
        verdict = parse_verdict(value)
        if task is None:
            errors.append({"field": field, "message": f"Unknown taskId in taskApprovals: '{task_id}'"})
        elif task["status"] != task_list.AWAITING_APPROVAL:
            errors.append(
                {
                    "field": field,
                    "message": f"Task '{task_id}' is not awaiting approval (status: {task['status']})",
                }
            )
        elif verdict is None:
            errors.append(
                {
                    "field": field,
                    "message": f"Invalid taskApprovals value for '{task_id}': expected APPROVED or REJECTED "
                    f"(case-insensitive), got '{str(value)[:40]}'",
                }
            )
        else:
            normalized[task_id] = verdict
    if errors:
        raise BadRequest("; ".join(e["message"] for e in errors), errors=errors)
    return {"taskApprovals": normalized}


def group_pause_details(pause: Pause, *, reviewer: bool = False) -> dict[str, Any]:
    """A group pause's pauseDetails: the phase, and the tasks awaiting approval (ids, descriptions and
    assignees; their results are in the transcript view, for those who may read it). The same for a
    reviewer and everyone else: nothing in it is redacted."""
    details = pause.details or {}
    awaiting = set(details.get("awaitingTaskIds", []))
    tasks = _tasks_of(pause) if pause.kind == PauseKind.TASK else []
    return {
        "type": pause.kind,
        "reason": pause.reason,
        "phaseIndex": details.get("phaseIndex"),
        "phaseName": details.get("phaseName"),
        "phaseType": details.get("phaseType"),
        "granularity": details.get("granularity"),
        "awaitingTaskIds": sorted(awaiting),
        "awaitingTasks": [
            {"id": t["id"], "description": t["description"], "assignee": t["assignee"]}
            for t in tasks
            if t["id"] in awaiting
        ],
    }


def register() -> None:
    register_decision_validator(PauseKind.TASK, validate_task_approvals)
    register_details_provider(PauseKind.TASK, group_pause_details)
    register_details_provider(PauseKind.PHASE, group_pause_details)


def _acting(user: Any, actor: Actor | None) -> Actor:
    if actor is None:
        return actor_for_user(user)
    if actor.user is not None and actor.user is not user:
        raise ValueError("a surface's actor bound to an account must act as the authenticated user")
    return actor


def approve_discussion(
    *,
    user: Any,
    group_id: Any,
    discussion_id: Any,
    body: Any,
    events: ev.EventSink = ev.no_events,
    actor: Actor | None = None,
    continue_here: bool = True,
) -> Continued:
    """Decide the discussion's pending pause and run its continuation in this process (see the module),
    or with ``continue_here=False`` hand it to the q-cluster (a surface that must answer at once: Slack
    gives an interaction 3 seconds).

    ``actor``: who the decision is recorded as when the surface has its own name (``mcp:alice``, acting
    as ``user``; ``slack:<userId>``, an allow-listed Slack user with no account, deciding with the
    integration's user's access). An actor bound to an account must be ``user``. Default: ``user``'s."""
    decision = parse_group_decision(body)
    discussion = discussion_for_owner(user=user, group_id=group_id, discussion_id=discussion_id)
    decide = {
        "surface": Engine.GROUP,
        "subject_type": SubjectType.DISCUSSION,
        "subject_id": discussion.pk,
        "decision": decision,
        "actor": _acting(user, actor),
        "what": WHAT,
        "subject": discussion,
    }
    if not continue_here:
        return decide_and_queue(**decide)
    with ev.watched_by(events):
        return decide_and_continue(**decide)


def cancel_discussion(
    *, user: Any, group_id: Any, discussion_id: Any, actor: Actor | None = None
) -> GroupConversation:
    """Cancel a discussion: a pending approval ends through the audited cancel path (CANCELLED at once);
    a running discussion is told to stop before its next member turn. 409 when it already ended.
    ``actor``: as for ``approve_discussion``."""
    discussion = discussion_for_owner(user=user, group_id=group_id, discussion_id=discussion_id)
    actor = _acting(user, actor)
    with transaction.atomic():
        # The pending pause first, then the discussion: the order a decision locks them in. Locking the
        # discussion first deadlocked with a decision (a reviewer's or the timer's) committing meanwhile.
        if cancel_pending_of(discussion.pk, actor):
            discussion.refresh_from_db()
            return discussion
        locked = GroupConversation.objects.select_for_update().get(pk=discussion.pk)
        if locked.state in TERMINAL_STATES:
            raise WrongState(
                f"Nothing to cancel: the discussion already ended (current state: {locked.state})",
                current_state=locked.state,
            )
        if not cancel_pending_of(locked.pk, actor):  # a gate the discussion reached since the first look
            now = timezone.now()
            GroupConversation.objects.filter(pk=locked.pk, cancel_requested_at__isnull=True).update(
                cancel_requested_at=now, cancel_requested_by=actor.name
            )
            deciding = Pause.objects.filter(
                subject_type=SubjectType.DISCUSSION, subject_id=locked.pk, status=PauseStatus.RESOLVING
            ).first()
            if deciding is not None:
                record_cancel_request(pause_id=deciding.pk, by=actor.name, at=now)
            append_audit_entry(
                subject_type=SubjectType.DISCUSSION,
                subject_id=locked.pk,
                verb="hitl.discussion.cancel_requested",
                actor=actor.name,
                detail={"state": locked.state},
            )
    discussion.refresh_from_db()
    return discussion


def cancel_pending_of(discussion_id: Any, actor: Actor) -> bool:
    """Cancel the discussion's pending pause, if it has one, through the audited cancel path."""
    pause = open_pause_of(SubjectType.DISCUSSION, discussion_id)
    return pause is not None and cancel_pending_pause(pause=pause, actor=actor)
