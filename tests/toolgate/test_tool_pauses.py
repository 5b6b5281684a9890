"""Tool-call pauses end to end: the scripted model calls a gated http tool on a real loopback server."""

from __future__ import annotations

import json

import pytest

from approvals.models import AuditEntry, Pause, PauseStatus
from conversations.models import Conversation
from harnesses.agents import AFTER_TOOLS, payments_agent
from harnesses.factories import deployed_agent, say, start
from harnesses.queue_drain import run_queued_tasks
from toolgate.models import JournalEntry, PendingToolBatch

pytestmark = pytest.mark.django_db


def paused_transfer(client, server, **agent_kwargs):
    conversation_id = start(client, deployed_agent(payments_agent(server.url, **agent_kwargs)))
    response = say(client, conversation_id, "please transfer 100 to bob")
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "AWAITING_HUMAN", response.json()
    return conversation_id, Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)


def decide(client, conversation_id, body):
    response = client.post(f"/agents/{conversation_id}/resume", body, format="json")
    if response.status_code == 200:
        run_queued_tasks()
    return response


def transfers(server):
    return [r for r in server.requests if r["path"] == "/transfers"]


def last_output(client, conversation_id):
    return client.get(f"/agents/{conversation_id}").json()["output"]


def results_of(output_text: str) -> list[dict]:
    return json.loads(output_text.removeprefix("Done: "))


def test_a_gated_call_pauses_before_it_runs_and_shows_why(alice_client, approver_client, http_recorder):
    conversation_id, pause = paused_transfer(alice_client, http_recorder)
    assert transfers(http_recorder) == []
    assert pause.kind == "TOOL_CALL" and pause.tool_names == ["transfer_funds"]
    assert pause.reason == "Tool call requires approval: transfer_funds"
    output = last_output(alice_client, conversation_id)
    assert output[-1].startswith(
        "This step is waiting for a reviewer's approval before transfer_funds can run."
    )
    details = approver_client.get(f"/agents/{conversation_id}/approval-status").json()["pauseDetails"]
    assert (
        details["type"] == "TOOL_CALL"
        and details["executedUngatedCalls"] == []
        and details["outcomeUnknown"] == []
    )
    (call,) = details["calls"]
    assert {
        k: call[k] for k in ("callId", "toolName", "source", "argsTruncated", "gateReason", "requestPinned")
    } == {
        "callId": "call-1",
        "toolName": "transfer_funds",
        "source": "http",
        "argsTruncated": False,
        "gateReason": "transfer_*",
        "requestPinned": True,
    }
    assert json.loads(call["arguments"]) == {"amount": 100, "to": "bob"}
    assert call["requestPreview"]["method"] == "POST"
    assert call["requestPreview"]["uri"] == f"{http_recorder.url}/transfers"
    assert json.loads(call["requestPreview"]["body"]) == {"amount": "100", "to": "bob"}


def test_approve_runs_the_call_exactly_once_and_the_model_continues(
    alice_client, approver_client, http_recorder
):
    conversation_id, pause = paused_transfer(alice_client, http_recorder)
    assert decide(approver_client, conversation_id, {"verdict": "APPROVED", "note": "ok"}).status_code == 200
    assert [json.loads(r["body"]) for r in transfers(http_recorder)] == [{"amount": "100", "to": "bob"}]
    snapshot = alice_client.get(f"/agents/{conversation_id}").json()
    assert snapshot["state"] == "READY"
    (result,) = results_of(snapshot["output"][-1])
    assert result["name"] == "transfer_funds" and result["status"] == "OK"
    assert not any(
        text.startswith("This step is waiting for a reviewer's approval") for text in snapshot["output"]
    )
    entry = JournalEntry.objects.get(pause_epoch=pause.epoch, call_id="call-1")
    assert entry.status == "EXECUTED"


def test_reject_runs_nothing_and_the_model_reads_the_reviewers_note(
    alice_client, approver_client, http_recorder
):
    conversation_id, _ = paused_transfer(alice_client, http_recorder)
    decide(approver_client, conversation_id, {"verdict": "REJECTED", "note": "not to bob"})
    assert transfers(http_recorder) == []
    (result,) = results_of(last_output(alice_client, conversation_id)[-1])
    assert result["status"] == "REJECTED_BY_REVIEWER"
    assert not JournalEntry.objects.exists()


def test_amend_runs_once_with_the_reviewers_arguments_and_says_so(
    alice_client, approver_client, http_recorder
):
    conversation_id, _ = paused_transfer(alice_client, http_recorder)
    body = {
        "verdict": "APPROVED",
        "toolDecisions": {
            "call-1": {"verdict": "APPROVED", "amendedArguments": json.dumps({"amount": 50, "to": "carol"})}
        },
    }
    assert decide(approver_client, conversation_id, body).status_code == 200
    assert [json.loads(r["body"]) for r in transfers(http_recorder)] == [{"amount": "50", "to": "carol"}]
    entry = AuditEntry.objects.get(verb="hitl.approval", subject_id=conversation_id)
    (call,) = entry.detail["toolDecisions"]
    assert call["amended"] is True and call["verdict"] == "APPROVED" and len(call["argsDigest"]) == 64
    assert "carol" not in json.dumps(entry.detail) and "bob" not in json.dumps(entry.detail)


def test_ungated_calls_of_a_mixed_batch_run_first(alice_client, approver_client, http_recorder):
    script = [
        AFTER_TOOLS,
        {
            "when": {"inputContains": "transfer"},
            "toolCalls": [
                {"id": "c-read", "name": "get_balance", "arguments": {}},
                {"id": "c-pay", "name": "transfer_funds", "arguments": {"amount": 5, "to": "bob"}},
            ],
        },
    ]
    conversation_id, _ = paused_transfer(alice_client, http_recorder, script=script)
    assert [r["path"] for r in http_recorder.requests] == ["/balance"]
    details = approver_client.get(f"/agents/{conversation_id}/approval-status").json()["pauseDetails"]
    assert details["executedUngatedCalls"] == ["get_balance"]
    assert [c["callId"] for c in details["calls"]] == ["c-pay"]
    decide(approver_client, conversation_id, {"verdict": "APPROVED"})
    assert [r["path"] for r in http_recorder.requests] == ["/balance", "/transfers"]  # not re-run


def test_calls_not_listed_inherit_the_top_level_verdict(alice_client, approver_client, http_recorder):
    script = [
        AFTER_TOOLS,
        {
            "when": {"inputContains": "transfer"},
            "toolCalls": [
                {"id": "a", "name": "transfer_funds", "arguments": {"amount": 1, "to": "x"}},
                {"id": "b", "name": "transfer_funds", "arguments": {"amount": 2, "to": "y"}},
            ],
        },
    ]
    conversation_id, _ = paused_transfer(alice_client, http_recorder, script=script)
    decide(
        approver_client,
        conversation_id,
        {"verdict": "APPROVED", "toolDecisions": {"b": {"verdict": "REJECTED"}}},
    )
    assert [json.loads(r["body"])["to"] for r in transfers(http_recorder)] == ["x"]
    statuses = [r["status"] for r in results_of(last_output(alice_client, conversation_id)[-1])]
    assert statuses == ["OK", "REJECTED_BY_REVIEWER"]


@pytest.mark.parametrize(
    ("tool_decisions", "verdict", "message"),
    [
        ({"nope": {"verdict": "APPROVED"}}, "APPROVED", "no pending tool call 'nope'; pending: [call-1]"),
        ({"call-1": {"verdict": "APPROVED"}}, "REJECTED", "top-level verdict is REJECTED"),
        ({"call-1": {}}, "APPROVED", "toolDecisions['call-1'].verdict is required"),
        (
            {"call-1": {"verdict": "APPROVED", "note": "n" * 1025}},
            "APPROVED",
            "exceeds the maximum length of 1024",
        ),
        (
            {"call-1": {"verdict": "REJECTED", "amendedArguments": "{}"}},
            "APPROVED",
            "only valid for an APPROVED call",
        ),
        (
            {"call-1": {"verdict": "APPROVED", "amendedArguments": "{not json"}},
            "APPROVED",
            "is not valid JSON",
        ),
        ({"call-1": {"verdict": "APPROVED", "amendedArguments": "[1]"}}, "APPROVED", "must be a JSON object"),
        (
            {"call-1": {"verdict": "APPROVED", "amendedArguments": json.dumps({"x": "y" * 33000})}},
            "APPROVED",
            "exceeds the maximum size of 32768 bytes",
        ),
    ],
)
def test_bad_tool_decisions_are_400_and_never_consume_the_pause(
    alice_client, approver_client, http_recorder, tool_decisions, verdict, message
):
    conversation_id, pause = paused_transfer(alice_client, http_recorder)
    response = approver_client.post(
        f"/agents/{conversation_id}/resume",
        {"verdict": verdict, "toolDecisions": tool_decisions},
        format="json",
    )
    assert response.status_code == 400, response.content
    assert message in response.json()["detail"]
    assert response.json()["errors"][0]["field"].startswith("toolDecisions")
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING
    assert transfers(http_recorder) == []


def test_a_truncated_call_cannot_be_amended_and_is_never_run(alice_client, approver_client, http_recorder):
    script = [
        AFTER_TOOLS,
        {
            "when": {"inputContains": "transfer"},
            "toolCalls": [
                {"id": "big", "name": "transfer_funds", "arguments": {"amount": 1, "to": "z" * 300_000}}
            ],
        },
    ]
    conversation_id, pause = paused_transfer(alice_client, http_recorder, script=script)
    call = PendingToolBatch.objects.get(pause=pause).calls.get()
    assert call.args_truncated and len(call.arguments_raw.encode()) <= 262_144
    assert len(call.arguments_redacted.encode()) <= 32_768
    response = approver_client.post(
        f"/agents/{conversation_id}/resume",
        {"verdict": "APPROVED", "toolDecisions": {"big": {"verdict": "APPROVED", "amendedArguments": "{}"}}},
        format="json",
    )
    assert "was truncated at pause time" in response.json()["detail"]
    decide(approver_client, conversation_id, {"verdict": "APPROVED"})
    assert transfers(http_recorder) == []
    assert results_of(last_output(alice_client, conversation_id)[-1])[0]["status"] == "NOT_EXECUTED"


def test_at_most_once_an_executed_journal_entry_is_replayed_not_rerun(
    alice_client, approver_client, http_recorder
):
    conversation_id, pause = paused_transfer(alice_client, http_recorder)
    JournalEntry.objects.create(
        conversation_id=pause.subject_id,
        pause_epoch=pause.epoch,
        call_id="call-1",
        tool_name="transfer_funds",
        status="EXECUTED",
        result='{"status": 201, "body": "x"}',
        claimed_at=pause.paused_at,
    )
    decide(approver_client, conversation_id, {"verdict": "APPROVED"})
    assert transfers(http_recorder) == []
    assert results_of(last_output(alice_client, conversation_id)[-1])[0]["status"] == "OK"


def test_at_most_once_a_claimed_unfinished_call_is_reported_outcome_unknown(
    alice_client, approver_client, http_recorder
):
    conversation_id, pause = paused_transfer(alice_client, http_recorder)
    JournalEntry.objects.create(
        conversation_id=pause.subject_id,
        pause_epoch=pause.epoch,
        call_id="call-1",
        tool_name="transfer_funds",
        claimed_at=pause.paused_at,
    )
    details = approver_client.get(f"/agents/{conversation_id}/approval-status").json()["pauseDetails"]
    assert details["outcomeUnknown"] == ["call-1"]
    decide(approver_client, conversation_id, {"verdict": "APPROVED"})
    assert transfers(http_recorder) == []
    assert (
        results_of(last_output(alice_client, conversation_id)[-1])[0]["status"] == "EXECUTION_OUTCOME_UNKNOWN"
    )
    assert AuditEntry.objects.filter(pause_id=pause.id, verb="hitl.tool.outcome_unknown").count() == 1


def test_an_approval_clears_one_execution_a_reissued_call_pauses_again(
    alice_client, approver_client, http_recorder
):
    reissue = {"id": "call-1", "name": "transfer_funds", "arguments": {"amount": 100, "to": "bob"}}
    script = [
        {"when": {"afterToolResults": True}, "toolCalls": [reissue]},
        {"when": {"inputContains": "transfer"}, "toolCalls": [reissue]},
    ]
    conversation_id, first = paused_transfer(alice_client, http_recorder, script=script)
    decide(approver_client, conversation_id, {"verdict": "APPROVED"})
    assert len(transfers(http_recorder)) == 1  # the approved call, once; its reissue waits
    second = Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)
    assert second.epoch != first.epoch
    assert Conversation.objects.get(pk=conversation_id).state == "AWAITING_HUMAN"
    decide(approver_client, conversation_id, {"verdict": "APPROVED"})
    assert len(transfers(http_recorder)) == 2


def test_a_new_gated_call_after_resume_pauses_again_with_a_new_epoch(
    alice_client, approver_client, http_recorder
):
    script = [
        {
            "when": {"afterToolResults": True},
            "toolCalls": [
                {"id": "call-2", "name": "transfer_funds", "arguments": {"amount": 7, "to": "dan"}}
            ],
        },
        {
            "when": {"inputContains": "transfer"},
            "toolCalls": [
                {"id": "call-1", "name": "transfer_funds", "arguments": {"amount": 1, "to": "bob"}}
            ],
        },
    ]
    conversation_id, first = paused_transfer(alice_client, http_recorder, script=script)
    decide(approver_client, conversation_id, {"verdict": "APPROVED"})
    second = Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)
    assert second.epoch != first.epoch and second.kind == "TOOL_CALL"
    assert PendingToolBatch.objects.get(pause=second).pause_count_this_turn == 2


def test_past_max_pauses_per_turn_gated_calls_are_denied_never_run(
    alice_client, approver_client, http_recorder
):
    script = [
        {
            "when": {"afterToolResults": True},
            "toolCalls": [
                {"id": "call-2", "name": "transfer_funds", "arguments": {"amount": 7, "to": "dan"}}
            ],
        },
        {
            "when": {"inputContains": "transfer"},
            "toolCalls": [
                {"id": "call-1", "name": "transfer_funds", "arguments": {"amount": 1, "to": "bob"}}
            ],
        },
    ]
    conversation_id, _ = paused_transfer(
        alice_client,
        http_recorder,
        script=script,
        tool_approvals={"requireApproval": ["transfer_*"], "maxPausesPerTurn": 1},
    )
    decide(approver_client, conversation_id, {"verdict": "APPROVED"})
    assert [json.loads(r["body"])["to"] for r in transfers(http_recorder)] == ["bob"]
    assert Pause.objects.filter(subject_id=conversation_id).count() == 1
    assert AuditEntry.objects.filter(subject_id=conversation_id, verb="hitl.tool.pause_cap").count() >= 1


def test_gate_is_inert_when_tool_gating_is_disabled(alice_client, http_recorder, settings):
    settings.HITL_TOOL_ENABLED = False
    conversation_id = start(alice_client, deployed_agent(payments_agent(http_recorder.url)))
    assert say(alice_client, conversation_id, "transfer please").json()["state"] == "READY"
    assert len(transfers(http_recorder)) == 1


def test_fail_closed_a_config_that_cannot_be_read_gates_every_call(alice_client, http_recorder):
    from conversations.models import AgentVersion

    agent_id = deployed_agent(payments_agent(http_recorder.url))
    version = AgentVersion.objects.get(agent_id=agent_id)
    version.document["hitlConfig"]["toolApprovals"] = {
        "requireApproval": "not a list"
    }  # stored data gone bad
    version.save()
    conversation_id = start(alice_client, agent_id)
    script_calls_balance = say(alice_client, conversation_id, "transfer please")
    assert script_calls_balance.json()["state"] == "AWAITING_HUMAN"
    assert transfers(http_recorder) == []
    pause = Pause.objects.get(subject_id=conversation_id)
    assert "could not be read" in pause.reason


def test_inherited_auto_approve_never_auto_runs_a_gated_tool(alice_client, http_recorder):
    _, pause = paused_transfer(
        alice_client, http_recorder, hitl_config={"timeoutPolicy": "AUTO_APPROVE", "approvalTimeout": "PT1M"}
    )
    assert pause.timeout_policy == "WAIT_INDEFINITELY" and pause.due_at is None


def test_explicit_tool_level_auto_approve_is_honoured(alice_client, http_recorder):
    _, pause = paused_transfer(
        alice_client,
        http_recorder,
        tool_approvals={
            "requireApproval": ["transfer_*"],
            "timeoutPolicy": "AUTO_APPROVE",
            "approvalTimeout": "PT1M",
        },
    )
    assert pause.timeout_policy == "AUTO_APPROVE" and pause.due_at is not None
