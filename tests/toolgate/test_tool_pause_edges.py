"""Edges of tool pauses through real turns: an omitted transcript, config drift under a pause, a call
aimed at the agent's own conversation, the precedence table, per-tool rules in a batch, and the
mixed-verdict metric."""

from __future__ import annotations

import json
from typing import Any

import pytest

import tests.hitl_project.conftest  # noqa: F401  (count into a metrics directory of this session's own)
from approvals.models import AuditEntry, Pause, PauseStatus
from conversations.models import AgentVersion, Conversation
from harnesses.agents import AFTER_TOOLS, payments_agent
from harnesses.factories import deployed_agent, say, start
from harnesses.queue_drain import run_queued_tasks
from tests.hitl_project.scrape import scrape, value
from toolgate.models import JournalEntry, PendingToolBatch
from toolgate.resume import CONFIG_DRIFT_TEXT

pytestmark = pytest.mark.django_db

REFUND = {
    "name": "refund_payment",
    "description": "Refund a payment",
    "parameters": {
        "type": "object",
        "properties": {"paymentId": {"type": "string"}},
        "required": ["paymentId"],
    },
    "request": {"method": "POST", "path": "/refunds", "body": {"paymentId": "{args.paymentId}"}},
}
TRANSFER_CALL = {"id": "call-1", "name": "transfer_funds", "arguments": {"amount": 100, "to": "bob"}}
REFUND_CALL = {"id": "call-2", "name": "refund_payment", "arguments": {"paymentId": "p-7"}}


def transfer_script(*calls: dict[str, Any]) -> list[dict[str, Any]]:
    return [AFTER_TOOLS, {"when": {"inputContains": "transfer"}, "toolCalls": list(calls or [TRANSFER_CALL])}]


def pause_turn(client, document: dict[str, Any]) -> tuple[str, Pause]:
    conversation_id = start(client, deployed_agent(document))
    response = say(client, conversation_id, "please transfer 100 to bob")
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "AWAITING_HUMAN", response.json()
    return conversation_id, Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)


def decide(client, conversation_id: str, body: dict[str, Any]) -> None:
    response = client.post(f"/agents/{conversation_id}/resume", body, format="json")
    assert response.status_code == 200, response.content
    run_queued_tasks()


def paths(server) -> list[str]:
    return [request.path for request in server.received]


def snapshot(client, conversation_id: str) -> dict[str, Any]:
    return client.get(f"/agents/{conversation_id}").json()


def results_of(snap: dict[str, Any]) -> list[dict[str, Any]]:
    return json.loads(snap["output"][-1].removeprefix("Done: "))


# --- transcript over HITL_TRANSCRIPT_MAX_BYTES ------------------------------------------------------


def test_an_oversized_transcript_is_omitted_and_the_resume_rebuilds_the_conversation(
    alice_client, approver_client, loopback_server, settings
):
    settings.HITL_TRANSCRIPT_MAX_BYTES = 200
    conversation_id, pause = pause_turn(alice_client, payments_agent(loopback_server.url))
    batch = PendingToolBatch.objects.get(pause=pause)
    assert batch.transcript is None and batch.transcript_omitted is True

    decide(approver_client, conversation_id, {"verdict": "APPROVED"})
    assert paths(loopback_server) == ["/transfers"]  # the approved call ran once
    snap = snapshot(alice_client, conversation_id)
    assert snap["state"] == "READY"
    assert results_of(snap) == [
        {"name": "transfer_funds", "status": "OK", "result": {"status": 200, "body": {"ok": True}}}
    ]
    assert JournalEntry.objects.get(pause_epoch=pause.epoch).status == "EXECUTED"


# --- config drift -----------------------------------------------------------------------------------


def test_config_drift_under_a_pause_applies_nothing_and_says_so(
    alice_client, approver_client, loopback_server
):
    conversation_id, pause = pause_turn(alice_client, payments_agent(loopback_server.url))
    conversation = Conversation.objects.get(pk=conversation_id)
    version = AgentVersion.objects.get(agent_id=conversation.agent_id, version=conversation.agent_version)
    document = version.document
    document["workflows"][0]["tasks"][0]["id"] = "assistant-v2"  # stored data drifted under the pause
    AgentVersion.objects.filter(pk=version.pk).update(document=document)

    decide(approver_client, conversation_id, {"verdict": "APPROVED"})
    assert loopback_server.received == []  # no gated call ran
    assert not JournalEntry.objects.filter(pause_epoch=pause.epoch).exists()
    snap = snapshot(alice_client, conversation_id)
    assert snap["state"] == "READY"
    assert snap["output"] == [CONFIG_DRIFT_TEXT]
    assert "pending approval could not be applied" in CONFIG_DRIFT_TEXT
    (entry,) = AuditEntry.objects.filter(pause_id=pause.id, verb="hitl.tool.config_drift")
    assert entry.actor == "system:toolgate" and entry.automated is True
    assert "assistant" in entry.detail["reason"]


# --- a call aimed at the agent's own conversation ---------------------------------------------------


def test_an_approved_call_carrying_the_conversations_own_id_is_refused(
    alice_client, approver_client, chat_stub, loopback_server
):
    document = payments_agent(loopback_server.url)
    document["workflows"][0]["tasks"][0]["provider"] = {
        "type": "openai",
        "baseUrl": f"{chat_stub.url}/v1",
        "apiKey": "sk-test-self",
        "model": "gpt-test",
    }
    chat_stub.reply("Hello")
    conversation_id = start(alice_client, deployed_agent(document))
    chat_stub.call_tools(
        {
            "id": "self-1",
            "name": "transfer_funds",
            "arguments": {"amount": 1, "to": f"conversation {conversation_id}"},
        }
    )
    chat_stub.reply("I could not do that.")
    assert say(alice_client, conversation_id, "transfer to yourself").json()["state"] == "AWAITING_HUMAN"

    decide(approver_client, conversation_id, {"verdict": "APPROVED"})
    assert loopback_server.received == []
    tool_message = chat_stub.requests[-1]["messages"][-1]
    assert tool_message["tool_call_id"] == "self-1"
    assert json.loads(tool_message["content"]) == {
        "status": "NOT_EXECUTED",
        "reason": "an agent may not send a request to its own conversation",
    }
    assert snapshot(alice_client, conversation_id)["output"] == ["I could not do that."]


# --- the precedence table ---------------------------------------------------------------------------

AGENT_GATE = {"requireApproval": ["transfer_*"]}
TASK_LOOSENS = {"requireApproval": ["get_*"], "exempt": ["transfer_*"]}


@pytest.mark.parametrize(
    ("mode", "pauses"),
    [("strict", True), ("replace", False)],
    ids=["strict-task-exempt-cannot-ungate", "replace-task-exempt-ungates"],
)
def test_a_task_level_exempt_ungates_only_in_replace_mode(
    alice_client, loopback_server, settings, mode, pauses
):
    settings.HITL_TASK_APPROVALS_MODE = mode
    conversation_id = start(
        alice_client,
        deployed_agent(
            payments_agent(loopback_server.url, tool_approvals=AGENT_GATE, task_approvals=TASK_LOOSENS)
        ),
    )
    state = say(alice_client, conversation_id, "please transfer 100 to bob").json()["state"]
    assert state == ("AWAITING_HUMAN" if pauses else "READY")
    assert paths(loopback_server) == ([] if pauses else ["/transfers"])


@pytest.mark.parametrize(
    ("mode", "expected_policy"),
    [("strict", "WAIT_INDEFINITELY"), ("replace", "AUTO_APPROVE")],
)
def test_a_task_level_auto_approve_is_demoted_only_in_strict_mode(
    alice_client, loopback_server, settings, mode, expected_policy
):
    settings.HITL_TASK_APPROVALS_MODE = mode
    task = {"requireApproval": ["transfer_*"], "timeoutPolicy": "AUTO_APPROVE", "approvalTimeout": "PT1M"}
    _, pause = pause_turn(
        alice_client, payments_agent(loopback_server.url, tool_approvals=AGENT_GATE, task_approvals=task)
    )
    assert pause.timeout_policy == expected_policy


def test_strict_mode_unites_require_patterns_so_a_task_can_add_a_gate(alice_client, loopback_server):
    script = transfer_script({"id": "read", "name": "get_balance", "arguments": {}})
    _, pause = pause_turn(
        alice_client,
        payments_agent(
            loopback_server.url,
            script=script,
            tool_approvals=AGENT_GATE,
            task_approvals={"requireApproval": ["get_*"]},
        ),
    )
    assert pause.tool_names == ["get_balance"]
    assert loopback_server.received == []


def test_absent_require_approval_means_the_gate_is_off(alice_client, loopback_server):
    conversation_id = start(
        alice_client, deployed_agent(payments_agent(loopback_server.url, tool_approvals={}))
    )
    assert say(alice_client, conversation_id, "please transfer 100 to bob").json()["state"] == "READY"
    assert paths(loopback_server) == ["/transfers"]


def test_any_require_match_suffices_and_names_the_first_pattern(
    alice_client, approver_client, loopback_server
):
    gate = {"requireApproval": ["delete_*", "http.post:/transfers", "transfer_*"]}
    conversation_id, _ = pause_turn(alice_client, payments_agent(loopback_server.url, tool_approvals=gate))
    (call,) = approver_client.get(f"/agents/{conversation_id}/approval-status").json()["pauseDetails"][
        "calls"
    ]
    assert call["gateReason"] == "http.post:/transfers"


# --- rules ------------------------------------------------------------------------------------------

RULED = {
    "requireApproval": ["transfer_*", "refund_*"],
    "timeoutPolicy": "AUTO_APPROVE",
    "approvalTimeout": "PT30M",
    "pauseReason": "Payments need a look: {toolNames}",
    "pendingMessage": "Please wait while someone approves {toolNames}.",
    "rules": [
        {"match": "http.post:*", "pauseReason": "Some POST: {toolNames}"},
        {
            "match": "http.post:/refunds",
            "timeoutPolicy": "AUTO_REJECT",
            "approvalTimeout": "PT5M",
            "pauseReason": "Refund requested: {toolNames}",
        },
        {
            "match": "transfer_funds",
            "timeoutPolicy": "WAIT_INDEFINITELY",
            "pauseReason": "Money leaves the account: {toolNames}",
            "pendingMessage": "Finance must approve {toolNames} first.",
        },
    ],
}


def test_a_rule_tunes_one_tool_and_its_other_fields_fall_back(alice_client, approver_client, loopback_server):
    document = payments_agent(
        loopback_server.url, script=transfer_script(REFUND_CALL), tool_approvals=RULED, extra_calls=[REFUND]
    )
    conversation_id, pause = pause_turn(alice_client, document)
    assert pause.reason == "Refund requested: refund_payment"  # the endpoint rule beats http.post:*
    assert (pause.timeout_policy, pause.approval_timeout) == ("AUTO_REJECT", "PT5M")
    assert pause.due_at is not None
    # the rule states no pendingMessage: the toolApprovals one applies
    assert (
        snapshot(alice_client, conversation_id)["output"][-1]
        == "Please wait while someone approves refund_payment."
    )
    (call,) = approver_client.get(f"/agents/{conversation_id}/approval-status").json()["pauseDetails"][
        "calls"
    ]
    assert (call["gateReason"], call["matchedRule"]) == ("refund_*", "http.post:/refunds")


def test_the_strictest_rule_governs_a_two_call_batch(alice_client, approver_client, loopback_server):
    document = payments_agent(
        loopback_server.url,
        script=transfer_script(REFUND_CALL, TRANSFER_CALL),
        tool_approvals=RULED,
        extra_calls=[REFUND],
    )
    conversation_id, pause = pause_turn(alice_client, document)
    assert pause.tool_names == ["refund_payment", "transfer_funds"]
    assert pause.reason == "Money leaves the account: refund_payment, transfer_funds"
    assert pause.timeout_policy == "WAIT_INDEFINITELY" and pause.due_at is None  # bundling never softens
    assert snapshot(alice_client, conversation_id)["output"][-1] == (
        "Finance must approve refund_payment, transfer_funds first."
    )
    calls = approver_client.get(f"/agents/{conversation_id}/approval-status").json()["pauseDetails"]["calls"]
    assert [(c["callId"], c["toolName"], c["gateReason"], c["matchedRule"]) for c in calls] == [
        ("call-2", "refund_payment", "refund_*", "http.post:/refunds"),
        ("call-1", "transfer_funds", "transfer_*", "transfer_funds"),
    ]
    assert PendingToolBatch.objects.get(pause=pause).effective_rule["match"] == "transfer_funds"
    assert loopback_server.received == []


# --- metrics ----------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)  # tool resumes are counted once the decision commits
def test_a_mixed_decision_moves_the_mixed_tool_resume_counter_by_one(
    alice_client, approver_client, loopback_server
):
    document = payments_agent(
        loopback_server.url,
        script=transfer_script(REFUND_CALL, TRANSFER_CALL),
        tool_approvals={"requireApproval": ["transfer_*", "refund_*"]},
        extra_calls=[REFUND],
    )
    conversation_id, _ = pause_turn(alice_client, document)
    before = scrape()
    decide(
        approver_client,
        conversation_id,
        {"verdict": "APPROVED", "toolDecisions": {"call-1": {"verdict": "REJECTED", "note": "not today"}}},
    )
    after = scrape()
    for verdict, moved in (("mixed", 1), ("approved", 0), ("rejected", 0)):
        assert (
            value(after, "hitl_tool_resumes_total", verdict=verdict)
            - value(before, "hitl_tool_resumes_total", verdict=verdict)
            == moved
        ), verdict
    assert paths(loopback_server) == ["/refunds"]
    assert [r["status"] for r in results_of(snapshot(alice_client, conversation_id))] == [
        "OK",
        "REJECTED_BY_REVIEWER",
    ]
