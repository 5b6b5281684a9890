"""What guards a paused discussion: the approve body checked before anything is applied, config drift
and a failed start restoring the pause, the no-progress guard, turn budgets, cancel, separation of
duties, and a member's gated tool call rejected as system:group."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django_q.models import Schedule

from approvals.actors import system_actor
from approvals.continuation_runs import decide_and_continue
from approvals.decision_input import DecisionInput
from approvals.models import AuditEntry, Pause, PauseStatus, SubjectType, Surface
from conversations.agents import deploy_agent, undeploy_agent
from conversations.models import Conversation
from groups.models import GroupConversation, GroupVersion
from groups.store import update_group
from harnesses.agents import payments_agent
from harnesses.factories import deployed_agent
from harnesses.members import PHASES, answering, approve, discuss, echoing, group, pause_of

pytestmark = pytest.mark.django_db


def task_group(worker: str, *, tasks: int = 2, max_turns: int | None = None, **hitl: Any) -> str:
    declared = [
        {
            "id": f"t{i}",
            "description": f"do {i}",
            "assignee": worker,
            **({"dependsOn": [f"t{i - 1}"]} if i else {}),
        }
        for i in range(tasks)
    ]
    return group(
        [(worker, "Worker")],
        [{"name": "Build", "type": "EXECUTE", "requiresApproval": True, "tasks": declared}],
        hitlConfig={"granularity": "TASK", **hitl},
        **({"protocol": {"maxTurns": max_turns}} if max_turns else {}),
    )


def statuses(body: dict[str, Any]) -> list[str]:
    return [task["status"] for task in body["tasks"]]


# --- the approve body: checked before anything is applied ---------------------------------------------


@pytest.mark.parametrize(
    ("decision", "field", "message"),
    [
        (
            {"decision": {"verdict": "APPROVED"}, "taskApprovals": {"nope": "APPROVED"}},
            "taskApprovals.nope",
            "Unknown taskId in taskApprovals: 'nope'",
        ),
        (
            {"decision": {"verdict": "APPROVED"}, "taskApprovals": {"t1": "APPROVED"}},
            "taskApprovals.t1",
            "Task 't1' is not awaiting approval (status: PENDING)",
        ),
        (
            {"decision": {"verdict": "APPROVED"}, "taskApprovals": {"t0": "maybe"}},
            "taskApprovals.t0",
            "Invalid taskApprovals value for 't0': expected APPROVED or REJECTED (case-insensitive), got 'maybe'",
        ),
    ],
)
def test_a_bad_task_verdict_is_a_400_naming_it_and_the_pause_and_timer_survive(
    alice_client, approver_client, decision, field, message
):
    paused = discuss(
        alice_client, task_group(echoing("w"), timeoutPolicy="AUTO_REJECT", approvalTimeout="PT1H")
    )
    pause = pause_of(paused)
    assert pause.schedule_id and Schedule.objects.filter(pk=pause.schedule_id).exists()

    problem = approve(approver_client, paused, decision, status=400)

    assert {"field": field, "message": message} in problem["errors"]
    pause.refresh_from_db()
    assert pause.status == PauseStatus.PENDING and pause.verdict == ""
    assert Schedule.objects.filter(pk=pause.schedule_id).exists()
    assert GroupConversation.objects.get(pk=paused["discussionId"]).state == "AWAITING_APPROVAL"
    assert not AuditEntry.objects.filter(subject_id=paused["discussionId"], verb="hitl.approval").exists()


def test_task_approvals_on_a_phase_pause_are_a_400(alice_client, approver_client):
    paused = discuss(alice_client, group([(answering("p", "Yes."), "Optimist")], PHASES))

    problem = approve(
        approver_client,
        paused,
        {"decision": {"verdict": "APPROVED"}, "taskApprovals": {"x": "APPROVED"}},
        status=400,
    )

    assert problem["errors"] == [{"field": "taskApprovals", "message": "only valid for TASK pauses"}]
    assert pause_of(paused).status == PauseStatus.PENDING


@pytest.mark.parametrize(
    "body", [{}, {"decision": {}}, {"decision": {"verdict": "maybe"}}, {"verdict": "APPROVED"}, []]
)
def test_an_approve_without_a_decision_verdict_is_a_400_and_nothing_is_consumed(
    alice_client, approver_client, body
):
    paused = discuss(alice_client, group([(answering("p", "Yes."), "Optimist")], PHASES))

    problem = approve(approver_client, paused, body, status=400)

    assert (
        problem["detail"]
        == "Request body must include a 'decision' with a 'verdict' field (APPROVED or REJECTED)"
    )
    assert pause_of(paused).status == PauseStatus.PENDING


def test_a_bad_map_on_a_discussion_that_is_not_paused_is_a_409(alice_client, approver_client):
    done = discuss(
        alice_client, group([(answering("p", "Yes."), "Optimist")], [{"name": "Only", "type": "OPINION"}])
    )

    problem = approve(
        approver_client, done, {"decision": {"verdict": "APPROVED"}, "taskApprovals": {"x": "?"}}, status=409
    )

    assert problem["currentState"] == "COMPLETED"


def test_a_discussion_of_another_group_is_404_to_an_approver_and_403_to_a_plain_user(
    alice_client, approver_client, bob_client
):
    paused = discuss(alice_client, group([(answering("p", "Yes."), "Optimist")], PHASES))
    other = group([(answering("q", "No."), "Critic")], [{"name": "Only", "type": "OPINION"}])

    assert approve(approver_client, paused | {"groupId": other}, status=404)["code"] == "NOT_FOUND"
    assert approve(bob_client, paused, status=403)["code"] == "FORBIDDEN"
    assert pause_of(paused).status == PauseStatus.PENDING


def test_the_owner_may_not_approve_a_gate_of_a_group_that_forbids_self_approval(
    alice_client, approver_client
):
    paused = discuss(
        alice_client,
        group([(answering("p", "Yes."), "Optimist")], PHASES, hitlConfig={"allowSelfApproval": False}),
    )

    assert approve(alice_client, paused, status=403)["code"] == "FORBIDDEN"
    assert approve(approver_client, paused)["state"] == "COMPLETED"


# --- task verdicts and budgets -----------------------------------------------------------------------


def test_a_rejected_task_with_fail_fails_it_and_the_tasks_that_depend_on_it(alice_client, approver_client):
    paused = discuss(alice_client, task_group(echoing("w"), tasks=3, onTaskRejection="FAIL"))

    done = approve(
        approver_client,
        paused,
        {"decision": {"verdict": "APPROVED", "note": "wrong"}, "taskApprovals": {"t0": "REJECTED"}},
    )

    assert done["state"] == "COMPLETED"
    assert statuses(done) == ["FAILED", "FAILED", "FAILED"]
    assert done["tasks"][0]["note"] == "wrong"
    assert done["tasks"][1]["note"] == "not run: it depends on failed task t0"


def test_a_human_approval_grants_a_fresh_turn_budget(alice_client, approver_client):
    # two independent tasks, a budget of one turn: the first wave runs one task, the gate pauses with the other
    worker = echoing("w")
    group_id = group(
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
        hitlConfig={"granularity": "TASK"},
        protocol={"maxTurns": 1},
    )
    first = discuss(alice_client, group_id)
    assert first["state"] == "AWAITING_APPROVAL" and statuses(first) == ["AWAITING_APPROVAL", "PENDING"]

    second = approve(approver_client, first)

    assert statuses(second) == ["COMPLETED", "AWAITING_APPROVAL"] and second["turnCount"] == 2
    assert approve(approver_client, second)["state"] == "COMPLETED"


def test_no_progress_fails_the_discussion_when_a_system_approval_cannot_advance(alice_client):
    worker = echoing("w")
    group_id = group(
        [(worker, "Worker")],
        [
            {
                "name": "Build",
                "type": "EXECUTE",
                "requiresApproval": True,
                "tasks": [
                    {"id": "a", "description": "do a", "assignee": worker},
                    {"id": "b", "description": "do b", "assignee": worker},
                    {"id": "c", "description": "do c", "assignee": worker},
                ],
            }
        ],
        hitlConfig={"granularity": "TASK"},
        protocol={"maxTurns": 1},
    )
    paused = discuss(alice_client, group_id)

    def system_approves() -> GroupConversation:
        decide_and_continue(
            surface=Surface.GROUP,
            subject_type=SubjectType.DISCUSSION,
            subject_id=paused["discussionId"],
            decision=DecisionInput(verdict="APPROVED"),
            actor=system_actor("timeout"),
        )
        return GroupConversation.objects.get(pk=paused["discussionId"])

    # a system approval completes the awaiting task but grants no fresh budget: nothing more runs, yet
    # the task list changed (progress), so the discussion pauses again
    once = system_approves()
    assert once.state == "AWAITING_APPROVAL" and [t["status"] for t in once.tasks] == [
        "COMPLETED",
        "PENDING",
        "PENDING",
    ]
    # the next one changes nothing: the same tasks remain executable, no member turn ran
    twice = system_approves()

    assert twice.state == "FAILED"
    assert twice.transcript[-1]["note"].startswith(
        "Discussion failed: EXECUTE phase 'Build' cannot make progress"
    )
    assert twice.last_pause_fingerprint == ""
    assert not Pause.objects.filter(subject_id=paused["discussionId"], status=PauseStatus.PENDING).exists()


def test_a_non_execute_phase_with_task_granularity_still_pauses_as_a_phase(alice_client, approver_client):
    paused = discuss(
        alice_client,
        group([(answering("p", "Yes."), "Optimist")], PHASES, hitlConfig={"granularity": "TASK"}),
    )

    assert paused["state"] == "AWAITING_APPROVAL" and pause_of(paused).kind == "PHASE"


# --- drift and a start that fails restore the pause ------------------------------------------------


def test_config_drift_restores_the_pause_with_its_deadline_and_a_fixed_config_resumes(
    alice_client, approver_client
):
    group_id = group(
        [(answering("p", "Yes."), "Optimist")],
        PHASES,
        hitlConfig={"timeoutPolicy": "AUTO_REJECT", "approvalTimeout": "PT1H"},
    )
    paused = discuss(alice_client, group_id)
    pause = pause_of(paused)
    due, original = pause.due_at, GroupVersion.objects.get(group_id=group_id).document
    renamed = copy.deepcopy(original)
    renamed["phases"][1]["name"] = "Pushback"
    update_group(group_id=group_id, document=renamed)

    problem = approve(approver_client, paused, status=409)

    assert problem["code"] == "RESUME_NOT_STARTED" and problem["currentState"] == "AWAITING_APPROVAL"
    assert "expected phase 'Challenge' at index 1 but found 'Pushback'" in problem["detail"]
    pause.refresh_from_db()
    assert pause.status == PauseStatus.PENDING and pause.due_at == due
    assert Schedule.objects.filter(pk=pause.schedule_id).exists()
    discussion = GroupConversation.objects.get(pk=paused["discussionId"])
    assert discussion.state == "AWAITING_APPROVAL" and discussion.transcript[-1]["status"] == "ERROR"
    assert AuditEntry.objects.filter(pause_id=pause.id, verb="hitl.restored").count() == 1

    update_group(group_id=group_id, document=original)
    done = approve(approver_client, paused)

    assert done["state"] == "COMPLETED" and done["groupVersion"] == 3


def test_a_removed_phase_is_drift_too(alice_client, approver_client):
    group_id = group([(answering("p", "Yes."), "Optimist")], PHASES)
    paused = discuss(alice_client, group_id)
    update_group(
        group_id=group_id,
        document={**GroupVersion.objects.get(group_id=group_id).document, "phases": PHASES[:1]},
    )

    problem = approve(approver_client, paused, status=409)

    assert "expected phase 'Challenge' at index 1 but no phase at that index" in problem["detail"]
    assert pause_of(paused).status == PauseStatus.PENDING


# --- cancel --------------------------------------------------------------------------------------------


def cancel(client, body: dict[str, Any], status: int = 200) -> Any:
    response = client.post(f"/groups/{body['groupId']}/conversations/{body['discussionId']}/cancel")
    assert response.status_code == status, response.content
    return response.json()


def test_cancelling_a_paused_discussion_ends_it_and_its_pause_audited(alice_client):
    paused = discuss(alice_client, group([(answering("p", "Yes."), "Optimist")], PHASES))

    cancelled = cancel(alice_client, paused)

    assert cancelled["state"] == "CANCELLED"
    pause = pause_of(paused)
    assert pause.status == PauseStatus.CANCELLED and pause.decided_by == "alice"
    finished = AuditEntry.objects.get(subject_id=paused["discussionId"], verb="hitl.discussion.finished")
    assert finished.detail["state"] == "CANCELLED" and finished.actor == "alice"
    assert cancel(alice_client, paused, status=409)["currentState"] == "CANCELLED"


def test_cancelling_an_ended_discussion_is_a_409(alice_client):
    done = discuss(
        alice_client, group([(answering("p", "Yes."), "Optimist")], [{"name": "Only", "type": "OPINION"}])
    )

    assert cancel(alice_client, done, status=409)["currentState"] == "COMPLETED"


# --- a member's gated tool call ------------------------------------------------------------------------


def test_a_member_tool_call_is_rejected_as_system_group_and_its_answer_without_the_tool_is_used(
    alice_client, http_recorder
):
    payer = deployed_agent(payments_agent(http_recorder.url))
    group_id = group([(payer, "Payer")], [{"name": "Opinions", "type": "OPINION"}])

    done = discuss(alice_client, group_id, question="please transfer 100 to bob")

    assert done["state"] == "COMPLETED"
    (entry,) = done["transcript"]
    assert entry["status"] == "OK" and entry["toolCallRejected"] is True
    assert entry["content"].startswith("Done: ")
    assert [r for r in http_recorder.requests if r["path"] == "/transfers"] == []
    member = Conversation.objects.get(
        pk=GroupConversation.objects.get(pk=done["discussionId"]).member_conversations[payer]
    )
    pause = Pause.objects.get(subject_id=member.pk)
    assert pause.kind == "TOOL_CALL" and pause.verdict == "REJECTED" and pause.decided_by == "system:group"
    assert pause.note == "tool approval is not available during group discussions in this version"


def test_a_member_undeployed_while_paused_restores_the_pause_and_redeploying_resumes(
    alice_client, approver_client
):
    member = answering("p", "Yes.")
    paused = discuss(alice_client, group([(member, "Optimist")], PHASES))
    undeploy_agent(agent_id=member, version=1, environment="production")

    problem = approve(approver_client, paused, status=409)

    assert problem["code"] == "RESUME_NOT_STARTED" and "is not deployed in production" in problem["detail"]
    assert pause_of(paused).status == PauseStatus.PENDING
    deploy_agent(agent_id=member, version=1, environment="production")
    assert approve(approver_client, paused)["state"] == "COMPLETED"
