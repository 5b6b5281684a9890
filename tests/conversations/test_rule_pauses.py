"""Rule pauses of 1:1 conversations, end to end through the REST API and the continuation task."""

from __future__ import annotations

import pytest

from approvals.models import AuditEntry, Pause, PauseStatus
from conversations.models import AgentVersion, Conversation, ConversationStep
from harnesses.factories import account_bot, deployed_agent, paused_conversation, say, start
from harnesses.queue_drain import queued_count, run_queued_tasks

pytestmark = pytest.mark.django_db


def resume(client, conversation_id, verdict="APPROVED", note="ok"):
    return client.post(f"/agents/{conversation_id}/resume", {"verdict": verdict, "note": note}, format="json")


def test_say_that_adds_pause_conversation_returns_awaiting_human_with_one_pending_pause(alice_client):
    conversation_id = paused_conversation(alice_client)
    pause = Pause.objects.get(subject_id=conversation_id)
    assert pause.status == PauseStatus.PENDING
    assert pause.kind == "RULE"
    assert pause.bookmark["workflowId"] == "main" and pause.bookmark["taskIndex"] == 1
    assert pause.reason == "Account deletion requires manager sign-off"
    assert pause.timeout_policy == "AUTO_REJECT" and pause.approval_timeout == "PT15M"
    assert (pause.due_at - pause.paused_at).total_seconds() == 900
    assert Conversation.objects.get(pk=conversation_id).state == "AWAITING_HUMAN"


def test_input_while_paused_is_409_and_not_consumed(alice_client):
    conversation_id = paused_conversation(alice_client)
    steps_before = ConversationStep.objects.filter(conversation_id=conversation_id).count()
    response = say(alice_client, conversation_id, "hello")
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "WRONG_STATE" and body["currentState"] == "AWAITING_HUMAN"
    assert "resume" in body["detail"]
    assert ConversationStep.objects.filter(conversation_id=conversation_id).count() == steps_before
    assert Pause.objects.get(subject_id=conversation_id).status == PauseStatus.PENDING


@pytest.mark.parametrize("verb", ["undo", "redo"])
def test_undo_and_redo_are_409_while_paused(alice_client, verb):
    conversation_id = paused_conversation(alice_client)
    response = alice_client.post(f"/agents/{conversation_id}/{verb}")
    assert response.status_code == 409
    assert response.json()["currentState"] == "AWAITING_HUMAN"


@pytest.mark.usefixtures("continuations_queued")
def test_approved_rule_pause_resumes_at_the_next_task_and_sees_the_decision(alice_client, approver_client):
    conversation_id = paused_conversation(alice_client)
    response = resume(approver_client, conversation_id, "approved", "fine by me")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (
        body["verdict"] == "APPROVED" and body["decidedBy"] == "approver" and body["state"] == "IN_PROGRESS"
    )
    assert run_queued_tasks() == 1
    snapshot = alice_client.get(f"/agents/{conversation_id}").json()
    assert snapshot["state"] == "READY"
    assert snapshot["output"] == ["Deletion APPROVED."]
    assert snapshot["properties"]["hitlVerdict"] == "APPROVED"
    assert "PAUSE_CONVERSATION" not in snapshot["actions"]
    step = ConversationStep.objects.filter(conversation_id=conversation_id).order_by("-index").first()
    assert step.data["hitl:decision_verdict"] == "APPROVED"
    assert step.data["hitl:decision_note"] == "fine by me"
    assert step.data["hitl:decision_by"] == "approver"
    assert step.outputs["hitlDecisionNote"] == "fine by me"
    assert "hitl:status" not in step.data
    assert Pause.objects.get(subject_id=conversation_id).status == PauseStatus.RESOLVED


def test_rejected_rule_pause_skips_remaining_tasks_and_posts_the_note(
    alice_client, approver_client, http_recorder
):
    document = account_bot()
    document["workflows"][0]["tasks"].insert(
        2,
        {
            "id": "delete",
            "type": "httpcalls",
            "targetServerUrl": http_recorder.url,
            "calls": [
                {
                    "name": "deleteAccount",
                    "actions": ["confirm_deletion"],
                    "request": {"method": "DELETE", "path": "/accounts/me"},
                }
            ],
        },
    )
    conversation_id = paused_conversation(alice_client, deployed_agent(document))
    assert resume(approver_client, conversation_id, "REJECTED", "not without a ticket").status_code == 200
    run_queued_tasks()
    snapshot = alice_client.get(f"/agents/{conversation_id}").json()
    assert snapshot["state"] == "READY"
    assert snapshot["output"] == [
        "This action was rejected by a human reviewer. Reason: not without a ticket"
    ]
    assert snapshot["properties"]["hitlVerdict"] == "REJECTED"
    assert http_recorder.requests == []  # the action that would have called the API did not run


def test_approved_rule_pause_runs_the_http_call_it_was_holding(alice_client, approver_client, http_recorder):
    document = account_bot()
    document["workflows"][0]["tasks"].insert(
        2,
        {
            "id": "delete",
            "type": "httpcalls",
            "targetServerUrl": http_recorder.url,
            "calls": [
                {
                    "name": "deleteAccount",
                    "actions": ["confirm_deletion"],
                    "request": {"method": "DELETE", "path": "/accounts/me"},
                }
            ],
        },
    )
    conversation_id = paused_conversation(alice_client, deployed_agent(document))
    assert http_recorder.requests == []
    resume(approver_client, conversation_id)
    run_queued_tasks()
    assert [(r["method"], r["path"]) for r in http_recorder.requests] == [("DELETE", "/accounts/me")]


def test_stop_conversation_beats_pause_in_the_same_step(alice_client):
    document = account_bot()
    document["workflows"][0]["tasks"][1]["rules"][0]["actions"] = ["PAUSE_CONVERSATION", "STOP_CONVERSATION"]
    conversation_id = start(alice_client, deployed_agent(document))
    response = say(alice_client, conversation_id, "delete my account")
    assert response.json()["state"] == "ENDED"
    assert not Pause.objects.filter(subject_id=conversation_id).exists()


def test_a_second_rule_task_that_adds_pause_again_re_pauses_after_approval(alice_client, approver_client):
    document = account_bot()
    tasks = document["workflows"][0]["tasks"]
    tasks.insert(
        2,
        {
            "id": "second-gate",
            "type": "behavior_rules",
            "rules": [
                {
                    "name": "double check",
                    "actions": ["PAUSE_CONVERSATION"],
                    "conditions": [{"type": "actionmatcher", "configs": {"actions": "confirm_deletion"}}],
                }
            ],
        },
    )
    conversation_id = paused_conversation(alice_client, deployed_agent(document))
    resume(approver_client, conversation_id)
    run_queued_tasks()
    pauses = list(Pause.objects.filter(subject_id=conversation_id).order_by("paused_at"))
    assert [p.status for p in pauses] == [PauseStatus.RESOLVED, PauseStatus.PENDING]
    assert pauses[1].bookmark["taskIndex"] == 2
    assert pauses[1].epoch != pauses[0].epoch
    assert Conversation.objects.get(pk=conversation_id).state == "AWAITING_HUMAN"


def test_a_pause_on_the_start_turn_answers_201_awaiting_human(alice_client):
    document = account_bot()
    document["workflows"][0]["tasks"][1]["rules"].append(
        {
            "name": "gate the start",
            "actions": ["PAUSE_CONVERSATION"],
            "conditions": [{"type": "actionmatcher", "configs": {"actions": "CONVERSATION_START"}}],
        }
    )
    agent_id = deployed_agent(document)
    response = alice_client.post(f"/agents/{agent_id}/start", format="json")
    assert response.status_code == 201
    assert response.json()["state"] == "AWAITING_HUMAN"
    assert response["Location"] == f"/agents/{response.json()['conversationId']}"


def test_undeployed_agent_resume_is_409_not_deployed_and_the_pause_stays(
    alice_client, approver_client, admin_client
):
    agent_id = deployed_agent()
    conversation_id = paused_conversation(alice_client, agent_id)
    undeploy = admin_client.post(f"/administration/production/undeploy/{agent_id}")
    assert undeploy.status_code == 200, undeploy.content
    response = resume(approver_client, conversation_id)
    assert response.status_code == 409
    assert response.json()["code"] == "NOT_DEPLOYED"
    assert Pause.objects.get(subject_id=conversation_id).status == PauseStatus.PENDING
    assert Conversation.objects.get(pk=conversation_id).state == "AWAITING_HUMAN"
    assert queued_count() == 0
    admin_client.post(f"/administration/production/deploy/{agent_id}")
    assert resume(approver_client, conversation_id).status_code == 200


@pytest.mark.usefixtures("continuations_queued")
def test_a_continuation_that_cannot_start_restores_the_pause_with_its_deadline(
    alice_client, approver_client, admin_client
):
    agent_id = deployed_agent()
    conversation_id = paused_conversation(alice_client, agent_id)
    before = Pause.objects.get(subject_id=conversation_id)
    assert resume(approver_client, conversation_id).status_code == 200
    admin_client.post(f"/administration/production/undeploy/{agent_id}")  # between decision and worker
    run_queued_tasks()
    after = Pause.objects.get(pk=before.pk)
    assert after.status == PauseStatus.PENDING
    assert after.due_at == before.due_at
    assert after.verdict == "" and after.decided_by == ""
    assert Conversation.objects.get(pk=conversation_id).state == "AWAITING_HUMAN"
    assert AuditEntry.objects.filter(pause_id=before.pk, verb="hitl.restored").count() == 1


def test_conversation_stays_pinned_to_the_version_it_started_on(alice_client, admin_client, approver_client):
    agent_id = deployed_agent()
    conversation_id = paused_conversation(alice_client, agent_id)
    changed = account_bot()
    changed["workflows"][0]["tasks"][2]["outputs"][0]["texts"] = [
        "Version two says {memory.current.hitlDecision}."
    ]
    assert admin_client.put(f"/agentstore/agents/{agent_id}", changed, format="json").status_code == 200
    admin_client.post(f"/administration/production/deploy/{agent_id}?version=2")
    resume(approver_client, conversation_id)
    run_queued_tasks()
    snapshot = alice_client.get(f"/agents/{conversation_id}").json()
    assert snapshot["agentVersion"] == 1
    assert snapshot["output"] == ["Deletion APPROVED."]
    assert (
        start(alice_client, agent_id)
        and alice_client.get(f"/agents/{start(alice_client, agent_id)}").json()["agentVersion"] == 2
    )


def test_reply_after_a_decision_can_react_to_the_verdict_property(alice_client, approver_client):
    document = account_bot()
    rules = document["workflows"][0]["tasks"][1]["rules"]
    rules.append(
        {
            "name": "after approval",
            "actions": ["was_approved"],
            "conditions": [
                {"type": "propertymatcher", "configs": {"name": "hitlVerdict", "value": "APPROVED"}},
                {"type": "inputmatcher", "configs": {"expressions": "greeting(*)"}},
            ],
        }
    )
    document["workflows"][0]["tasks"][2]["outputs"].append(
        {"action": "was_approved", "texts": ["You were approved."]}
    )
    conversation_id = paused_conversation(alice_client, deployed_agent(document))
    resume(approver_client, conversation_id)
    run_queued_tasks()
    assert "You were approved." in say(alice_client, conversation_id, "hello").json()["output"]


def test_a_rule_pause_whose_workflow_is_gone_fails_its_continuation(alice_client, approver_client):
    agent_id = deployed_agent()
    conversation_id = paused_conversation(alice_client, agent_id)
    version = AgentVersion.objects.get(agent_id=agent_id)
    version.document["workflows"][0]["id"] = "main-v2"
    version.save()
    assert resume(approver_client, conversation_id).status_code == 200
    run_queued_tasks()
    assert Conversation.objects.get(pk=conversation_id).state == "ERROR"
    step = ConversationStep.objects.filter(conversation_id=conversation_id).latest("index")
    assert step.data["error"] == "ConfigDrift: Paused workflow 'main' no longer exists (config drift)"
    assert Pause.objects.get(subject_id=conversation_id).status == PauseStatus.RESOLVED
    assert AuditEntry.objects.filter(subject_id=conversation_id, verb="hitl.continuation.failed").count() == 1
