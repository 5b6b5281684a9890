"""Timeouts of group pauses, fired by the timer drainer with time travel instead of sleeping.

A group's continuation is never quick (member turns), so a timer's approval or rejection is queued for
the q-cluster; the tests run the queue as a worker would (harnesses.queue_drain)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.conf import settings
from django_q.models import Schedule

from approvals.models import AuditEntry, Pause, PauseStatus, SubjectType
from approvals.timers import FAILED_FIRE_RETRY, fire_due_batch, fire_timeout
from groups.gates import NO_PROGRESS
from groups.models import GroupConversation
from harnesses.members import answering, discuss, echoing, group
from harnesses.queue_drain import queued_functions, run_queued_tasks

pytestmark = pytest.mark.django_db

BACKSTOP = timedelta(seconds=120)  # HITL_TIMER_BACKSTOP_SECONDS
CONTINUATION = "approvals.continuation_runs.run_continuation"
PHASES = [
    {"name": "Opinions", "type": "OPINION", "requiresApproval": True},
    {"name": "Decision", "type": "SYNTHESIS"},
]


def at(moment):
    return time_machine.travel(moment, tick=False)


def timed(policy: str | None, timeout: str = "PT5M", **hitl: Any) -> dict[str, Any]:
    return ({"timeoutPolicy": policy, "approvalTimeout": timeout} if policy else {}) | hitl


def paused_discussion(client, hitl_config: dict[str, Any]) -> tuple[dict[str, Any], Pause]:
    pat = answering("pat", "Ship it.")
    body = discuss(client, group([(pat, "Optimist")], PHASES, hitlConfig=hitl_config))
    assert body["state"] == "AWAITING_APPROVAL", body
    return body, open_pause(body)


def open_pause(body: dict[str, Any]) -> Pause:
    return Pause.objects.get(
        subject_type=SubjectType.DISCUSSION, subject_id=body["discussionId"], status=PauseStatus.PENDING
    )


def discussion(body: dict[str, Any]) -> GroupConversation:
    return GroupConversation.objects.get(pk=body["discussionId"])


def verbs(body: dict[str, Any]) -> list[tuple[str, str]]:
    entries = AuditEntry.objects.filter(subject_id=body["discussionId"]).order_by("sequence")
    return [(e.verb, e.actor) for e in entries]


def test_a_finite_policy_sets_the_deadline_and_arms_a_backstop_on_the_timer_cluster(alice_client):
    body, pause = paused_discussion(alice_client, timed("AUTO_APPROVE", "PT5M"))

    assert (pause.timeout_policy, pause.approval_timeout) == ("AUTO_APPROVE", "PT5M")
    assert pause.due_at - pause.paused_at == timedelta(minutes=5)
    schedule = Schedule.objects.get(pk=pause.schedule_id)
    assert (schedule.schedule_type, schedule.next_run, schedule.cluster) == (
        Schedule.ONCE,
        pause.due_at + BACKSTOP,
        settings.HITL_TIMER_CLUSTER,
    )


@pytest.mark.parametrize("hitl_config", [{}, timed("WAIT_INDEFINITELY", "PT5M")], ids=["none", "explicit"])
def test_wait_indefinitely_has_no_deadline_and_nothing_ever_fires(alice_client, hitl_config):
    body, pause = paused_discussion(alice_client, hitl_config)

    assert pause.due_at is None and pause.schedule_id is None
    with at(pause.paused_at + timedelta(days=400)):
        assert fire_due_batch() == 0
        assert fire_timeout(str(pause.id)) == "no-op"
    assert open_pause(body).pk == pause.pk and discussion(body).state == "AWAITING_APPROVAL"


@pytest.mark.parametrize("policy", ["AUTO_APPROVE", "AUTO_REJECT", "ABORT"])
def test_nothing_fires_before_the_deadline(alice_client, policy):
    body, pause = paused_discussion(alice_client, timed(policy))

    with at(pause.due_at - timedelta(seconds=1)):
        assert fire_due_batch() == 0
        assert fire_timeout(str(pause.id)) == "no-op"
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING
    assert discussion(body).state == "AWAITING_APPROVAL" and queued_functions() == []


def test_auto_approve_queues_the_continuation_and_the_discussion_runs_on_as_system_timeout(alice_client):
    body, pause = paused_discussion(alice_client, timed("AUTO_APPROVE"))

    with at(pause.due_at + timedelta(milliseconds=100)):
        assert fire_due_batch() == 1
        decided = Pause.objects.get(pk=pause.pk)
        assert (decided.status, decided.verdict, decided.decided_by, decided.automated) == (
            PauseStatus.RESOLVING,
            "APPROVED",
            "system:timeout",
            True,
        )
        assert decided.note == "Automatic approved due to timeout (policy: AUTO_APPROVE)"
        assert queued_functions() == [CONTINUATION]  # a group's continuation is never run by the timer
        assert discussion(body).state == "IN_PROGRESS"
        assert not Schedule.objects.filter(pk=pause.schedule_id).exists()  # disarmed with the decision
        assert run_queued_tasks() == 1

    done = discussion(body)
    assert done.state == "COMPLETED"
    assert [e["phase"] for e in done.transcript] == ["Opinions", "Decision"]
    finished = Pause.objects.get(pk=pause.pk)
    assert finished.status == PauseStatus.RESOLVED and finished.due_at is None
    assert verbs(body) == [
        ("hitl.discussion.started", "alice"),
        ("hitl.pause", "system:pipeline"),
        ("hitl.approval", "system:timeout"),
        ("hitl.discussion.resumed", "system:timeout"),
        ("hitl.discussion.finished", "system:group"),
    ]
    resumed = AuditEntry.objects.get(subject_id=body["discussionId"], verb="hitl.discussion.resumed")
    assert resumed.automated and resumed.pause_id == pause.id


def test_auto_reject_fails_the_discussion_naming_the_timeout(alice_client):
    body, pause = paused_discussion(alice_client, timed("AUTO_REJECT"))

    with at(pause.due_at):
        assert fire_due_batch() == 1
        assert run_queued_tasks() == 1

    failed = discussion(body)
    assert failed.state == "FAILED"
    last = failed.transcript[-1]
    assert (last["status"], last["member"]) == ("ERROR", None)
    assert last["note"] == (
        "Discussion failed: the approval was rejected by system:timeout: "
        "Automatic rejected due to timeout (policy: AUTO_REJECT)"
    )
    assert [e["phase"] for e in failed.transcript[:-1]] == ["Opinions"]  # the next phase never ran
    decision = AuditEntry.objects.get(pause_id=pause.id, verb="hitl.approval")
    assert (decision.verdict, decision.actor, decision.automated) == ("REJECTED", "system:timeout", True)
    end = AuditEntry.objects.get(subject_id=body["discussionId"], verb="hitl.discussion.finished")
    assert end.detail["state"] == "FAILED"
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.RESOLVED


@pytest.mark.parametrize("policy", ["AUTO_APPROVE", "AUTO_REJECT"])
def test_a_cancel_before_the_queued_continuation_started_ends_the_discussion_cancelled(alice_client, policy):
    """Found by the R5 state machine: the last gate's approval (nothing after it to stop before) ran on
    and COMPLETED a discussion whose cancel had been accepted; a continuation nobody started is
    cancelled before it starts, whatever the verdict, as on a 1:1 conversation."""
    pat = answering("pat", "Ship it.")
    last_gate = [{"name": "Opinions", "type": "OPINION", "requiresApproval": True}]
    body = discuss(alice_client, group([(pat, "Optimist")], last_gate, hitlConfig=timed(policy)))
    pause = open_pause(body)
    with at(pause.due_at):
        assert fire_due_batch() == 1  # decided by the timer, its continuation queued
        cancel = f"/groups/{body['groupId']}/conversations/{body['discussionId']}/cancel"
        answer = alice_client.post(cancel, format="json")
        assert (answer.status_code, answer.json()["state"]) == (200, "IN_PROGRESS"), answer.content
        assert run_queued_tasks() == 1

    assert discussion(body).state == "CANCELLED"
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.RESOLVED
    assert verbs(body)[-3:] == [  # the discussion finished, then its pause: the continuations' lock order
        ("hitl.discussion.cancel_requested", "alice"),
        ("hitl.discussion.finished", "alice"),
        ("hitl.continuation.cancelled", "system:continuation"),
    ]


def test_abort_cancels_the_discussion_at_once_audited_as_system_timeout(alice_client):
    body, pause = paused_discussion(alice_client, timed("ABORT"))

    with at(pause.due_at):
        assert fire_due_batch() == 1
    assert queued_functions() == []  # nothing left to run

    assert discussion(body).state == "CANCELLED"
    cancelled = Pause.objects.get(pk=pause.pk)
    assert (cancelled.status, cancelled.verdict, cancelled.decided_by, cancelled.due_at) == (
        PauseStatus.CANCELLED,
        "CANCELLED",
        "system:timeout",
        None,
    )
    assert not Schedule.objects.filter(pk=pause.schedule_id).exists()
    decision = AuditEntry.objects.get(pause_id=pause.id, verb="hitl.approval")
    assert (decision.verdict, decision.actor, decision.detail["mode"]) == (
        "CANCELLED",
        "system:timeout",
        "TIMEOUT_ABORT",
    )
    end = AuditEntry.objects.get(subject_id=body["discussionId"], verb="hitl.discussion.finished")
    assert (end.actor, end.automated, end.detail) == (
        "system:timeout",
        True,
        {"state": "CANCELLED", "mode": "TIMEOUT_ABORT"},
    )
    assert set(verbs(body)[-2:]) == {
        ("hitl.approval", "system:timeout"),
        ("hitl.discussion.finished", "system:timeout"),
    }


def test_a_human_decision_disarms_the_timer_and_a_late_fire_decides_nothing(alice_client, approver_client):
    body, pause = paused_discussion(alice_client, timed("AUTO_REJECT"))
    approved = approver_client.post(
        f"/groups/{body['groupId']}/conversations/{body['discussionId']}/approve?wait=60",
        {"decision": {"verdict": "APPROVED"}},
        format="json",
    )
    assert approved.status_code == 200 and approved.json()["state"] == "COMPLETED"
    assert not Schedule.objects.filter(pk=pause.schedule_id).exists()

    with at(pause.due_at + timedelta(minutes=5)):
        assert fire_timeout(str(pause.id)) == "no-op"
        assert fire_due_batch() == 0

    decisions = AuditEntry.objects.filter(pause_id=pause.id, verb="hitl.approval")
    assert [(e.verdict, e.actor) for e in decisions] == [("APPROVED", "approver")]
    assert discussion(body).state == "COMPLETED"


# --- TASK pauses: a timer's approval never grants a fresh turn budget -----------------------------------


def budget_group(**hitl: Any) -> str:
    """One EXECUTE phase of two independent tasks, approved task by task, with a budget of ONE turn:
    the first task's result awaits approval and the budget is spent before the second runs."""
    worker = echoing("worker")
    return group(
        [(worker, "Worker")],
        [
            {
                "name": "Build",
                "type": "EXECUTE",
                "requiresApproval": True,
                "tasks": [
                    {"id": "a", "description": "do a", "assignee": worker},
                    {"id": "b", "description": "do b", "assignee": worker},
                ],
            }
        ],
        protocol={"maxTurns": 1},
        hitlConfig={"granularity": "TASK"} | hitl,
    )


def tasks_of(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(t["id"], t["status"]) for t in discussion(body).tasks]


def test_a_task_pause_approved_by_the_timer_keeps_the_spent_turn_budget(alice_client):
    body = discuss(alice_client, budget_group(**timed("AUTO_APPROVE")))
    first = open_pause(body)
    assert first.kind == "TASK" and tasks_of(body) == [("a", "AWAITING_APPROVAL"), ("b", "PENDING")]
    before = discussion(body)
    assert (before.turn_count, before.budget_base) == (1, 0)

    with at(first.due_at + timedelta(seconds=1)):
        assert fire_due_batch() == 1
        assert run_queued_tasks() == 1

    after = discussion(body)
    assert (after.turn_count, after.budget_base) == (1, 0)  # budget_base unchanged: no fresh budget
    assert tasks_of(body) == [("a", "COMPLETED"), ("b", "PENDING")]  # so b could not run
    assert after.state == "AWAITING_APPROVAL"
    second = open_pause(body)
    assert second.kind == "TASK" and second.details["awaitingTaskIds"] == []
    resumed = AuditEntry.objects.get(pause_id=first.id, verb="hitl.discussion.resumed")
    assert (resumed.actor, resumed.automated, resumed.detail["tasks"]) == (
        "system:timeout",
        True,
        {"a": "COMPLETED"},
    )

    # The timer approving again changes nothing: the no-progress guard fails the discussion, no loop.
    with at(second.due_at + timedelta(seconds=1)):
        assert fire_due_batch() == 1
        assert run_queued_tasks() == 1
    failed = discussion(body)
    assert failed.state == "FAILED" and failed.turn_count == 1
    assert failed.transcript[-1]["note"] == NO_PROGRESS.format(name="Build")


def test_a_human_approval_of_the_same_task_pause_grants_a_fresh_budget(alice_client, approver_client):
    body = discuss(alice_client, budget_group(**timed("AUTO_APPROVE")))

    response = approver_client.post(
        f"/groups/{body['groupId']}/conversations/{body['discussionId']}/approve?wait=60",
        {"decision": {"verdict": "APPROVED"}},
        format="json",
    )

    assert response.status_code == 200, response.content
    after = discussion(body)
    assert (after.turn_count, after.budget_base) == (2, 1)  # a fresh budget from turn 1: b ran
    assert tasks_of(body) == [("a", "COMPLETED"), ("b", "AWAITING_APPROVAL")]


# --- a timer's decision whose continuation cannot start -------------------------------------------------


def test_a_timer_approval_that_cannot_continue_is_restored_and_retried_later_not_at_once(
    alice_client, admin_client
):
    """A member undeployed while the discussion waits: the continuation restores the pause (deadline
    unchanged, reason in the transcript), and the overdue pause is fired again only after
    FAILED_FIRE_RETRY, as a 1:1 fire that failed is, not at the drainer's next poll."""
    pat = answering("pat", "Ship it.")
    body = discuss(alice_client, group([(pat, "Optimist")], PHASES, hitlConfig=timed("AUTO_APPROVE")))
    pause = open_pause(body)
    assert admin_client.post(f"/administration/production/undeploy/{pat}").status_code == 200
    fired_at = pause.due_at + timedelta(seconds=1)

    with at(fired_at):
        assert fire_due_batch() == 1
        assert run_queued_tasks() == 1
        restored = Pause.objects.get(pk=pause.pk)
        assert restored.status == PauseStatus.PENDING and restored.due_at == pause.due_at
        assert discussion(body).state == "AWAITING_APPROVAL"
        assert "not deployed" in discussion(body).transcript[-1]["note"]
        assert fire_due_batch() == 0  # not fired again at once: no decide-restore loop
    with at(fired_at + FAILED_FIRE_RETRY - timedelta(seconds=1)):
        assert fire_due_batch() == 0

    assert admin_client.post(f"/administration/production/deploy/{pat}").status_code == 200
    with at(fired_at + FAILED_FIRE_RETRY + timedelta(seconds=1)):
        assert fire_due_batch() == 1
        assert run_queued_tasks() == 1
    assert discussion(body).state == "COMPLETED"
    decisions = AuditEntry.objects.filter(pause_id=pause.id, verb__in=["hitl.approval", "hitl.restored"])
    assert [e.verb for e in decisions.order_by("sequence")] == [
        "hitl.approval",
        "hitl.restored",
        "hitl.approval",
    ]


def test_auto_reject_fails_a_discussion_whose_group_was_deleted_meanwhile(alice_client, admin_client):
    """A rejection needs nothing of the group's latest version or its members: it fails the discussion
    on the version it ran on (a restore would have the timer decide it again every 30 s, forever)."""
    body, pause = paused_discussion(alice_client, timed("AUTO_REJECT"))
    assert admin_client.delete(f"/groupstore/groups/{body['groupId']}").status_code == 204

    with at(pause.due_at):
        assert fire_due_batch() == 1
        assert run_queued_tasks() == 1

    failed = discussion(body)
    assert failed.state == "FAILED" and failed.group_version == body["groupVersion"]
    assert failed.transcript[-1]["note"].startswith(
        "Discussion failed: the approval was rejected by system:timeout"
    )
    assert failed.transcript[-1]["phaseType"] == "OPINION"
    assert not AuditEntry.objects.filter(pause_id=pause.id, verb="hitl.restored").exists()


def test_a_human_rejection_fails_the_discussion_even_with_a_member_undeployed(
    alice_client, admin_client, approver_client
):
    body, pause = paused_discussion(alice_client, {})
    member = body["transcript"][0]["member"]
    assert admin_client.post(f"/administration/production/undeploy/{member}").status_code == 200

    response = approver_client.post(
        f"/groups/{body['groupId']}/conversations/{body['discussionId']}/approve?wait=60",
        {"decision": {"verdict": "REJECTED", "note": "no"}},
        format="json",
    )

    assert response.status_code == 200, response.content
    assert response.json()["state"] == "FAILED"
    assert (
        response.json()["transcript"][-1]["note"]
        == "Discussion failed: the approval was rejected by approver: no"
    )
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.RESOLVED
