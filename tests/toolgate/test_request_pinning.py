"""Request pinning end to end: what runs is checked against what was approved."""

from __future__ import annotations

import json

import pytest
from rest_framework.authtoken.models import Token

from approvals.models import AuditEntry, Pause, PauseStatus
from conversations.models import AgentVersion
from harnesses.agents import payments_agent
from harnesses.factories import deployed_agent, say, start
from harnesses.queue_drain import run_queued_tasks
from toolgate.models import PendingToolCall

pytestmark = pytest.mark.django_db


def paused(client, server, **kwargs):
    agent_id = deployed_agent(payments_agent(server.url, **kwargs))
    conversation_id = start(client, agent_id)
    assert say(client, conversation_id, "please transfer").json()["state"] == "AWAITING_HUMAN"
    return (
        agent_id,
        conversation_id,
        Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING),
    )


def transfer_call(agent_id):
    version = AgentVersion.objects.get(agent_id=agent_id)
    call = version.document["workflows"][0]["tasks"][1]["calls"][0]
    return version, call


def approve(client, conversation_id, body=None):
    assert (
        client.post(
            f"/agents/{conversation_id}/resume", body or {"verdict": "APPROVED"}, format="json"
        ).status_code
        == 200
    )
    run_queued_tasks()


def tool_results(client, conversation_id):
    return json.loads(client.get(f"/agents/{conversation_id}").json()["output"][-1].removeprefix("Done: "))


def transfers(server):
    return [r for r in server.requests if r["path"].startswith("/transfers")]


def test_a_request_changed_after_approval_is_refused_audited_and_never_sent(
    alice_client, approver_client, http_recorder, caplog
):
    agent_id, conversation_id, pause = paused(alice_client, http_recorder)
    version, call = transfer_call(agent_id)
    call["request"]["body"] = {"amount": "{args.amount}", "to": "mallory"}  # stored data changed meanwhile
    version.save()
    approve(approver_client, conversation_id)
    assert transfers(http_recorder) == []
    (result,) = tool_results(alice_client, conversation_id)
    assert result["result"] == {
        "status": "NOT_EXECUTED",
        "reason": "the request changed after it was approved",
    }
    entry = AuditEntry.objects.get(pause_id=pause.id, verb="hitl.tool.request_changed")
    assert entry.detail == {
        "tool": "transfer_funds",
        "callId": "call-1",
        "reason": "the request changed after it was approved",
    }
    # the WARN line operators of EDDI alert on: its marker, never the request
    (line,) = [r for r in caplog.records if r.getMessage().startswith("hitl.tool.request_changed")]
    assert line.levelname == "WARNING"
    assert (
        line.getMessage()
        == f"hitl.tool.request_changed tool='transfer_funds' callId='call-1' pauseId={pause.id}"
    )
    assert "mallory" not in caplog.text


def test_an_unchanged_pinned_request_runs_exactly_once(alice_client, approver_client, http_recorder):
    _, conversation_id, pause = paused(alice_client, http_recorder)
    assert PendingToolCall.objects.get(batch__pause=pause).request_pinned
    approve(approver_client, conversation_id)
    assert len(transfers(http_recorder)) == 1


def test_a_tool_that_disappeared_is_refused(alice_client, approver_client, http_recorder):
    agent_id, conversation_id, _ = paused(alice_client, http_recorder)
    version, call = transfer_call(agent_id)
    call["name"] = "renamed_transfer"
    version.save()
    approve(approver_client, conversation_id)
    assert transfers(http_recorder) == []
    assert tool_results(alice_client, conversation_id)[0]["result"]["reason"] == (
        "the tool is no longer available to re-check the approved request"
    )


def test_a_call_that_became_unpinnable_while_the_human_decided_is_refused(
    alice_client, approver_client, http_recorder
):
    agent_id, conversation_id, _ = paused(alice_client, http_recorder)
    version, call = transfer_call(agent_id)
    call["postResponse"] = {"retryApiCallInstruction": {}}  # retries default to 3: no longer pinnable
    version.save()
    approve(approver_client, conversation_id)
    assert transfers(http_recorder) == []
    assert tool_results(alice_client, conversation_id)[0]["result"]["reason"] == (
        "the request could no longer be resolved for comparison"
    )


def test_an_amended_call_is_not_checked_the_reviewer_wrote_it(alice_client, approver_client, http_recorder):
    agent_id, conversation_id, _ = paused(alice_client, http_recorder)
    version, call = transfer_call(agent_id)
    call["request"]["body"] = {"amount": "{args.amount}", "to": "{args.to}", "memo": "changed"}
    version.save()
    approve(
        approver_client,
        conversation_id,
        {
            "verdict": "APPROVED",
            "toolDecisions": {
                "call-1": {
                    "verdict": "APPROVED",
                    "amendedArguments": json.dumps({"amount": 1, "to": "carol"}),
                }
            },
        },
    )
    assert [json.loads(r["body"]) for r in transfers(http_recorder)] == [
        {"amount": "1", "to": "carol", "memo": "changed"}
    ]


@pytest.mark.parametrize(
    ("extra", "pinned"),
    [
        ({"preRequest": {"propertyInstructions": []}}, False),
        ({"preRequest": {"propertyInstructions": [{"name": "via", "valueString": "chat"}]}}, False),
        ({"postResponse": {"retryApiCallInstruction": {}}}, False),
        ({"postResponse": {"retryApiCallInstruction": {"maxRetries": 0}}}, True),
        (
            {
                "request": {
                    "method": "POST",
                    "path": "/transfers",
                    "queryParams": {"version": "3"},
                    "body": {"amount": "{args.amount}", "to": "{args.to}"},
                }
            },
            True,
        ),
    ],
)
def test_unpinnable_calls_keep_their_preview_and_are_never_refused(
    alice_client, approver_client, http_recorder, extra, pinned
):
    document = payments_agent(http_recorder.url)
    document["workflows"][0]["tasks"][1]["calls"][0].update(extra)
    conversation_id = start(alice_client, deployed_agent(document))
    say(alice_client, conversation_id, "transfer")
    (call,) = approver_client.get(f"/agents/{conversation_id}/approval-status").json()["pauseDetails"][
        "calls"
    ]
    assert call["requestPinned"] is pinned
    assert call["requestPreview"]["method"] == "POST"
    approve(approver_client, conversation_id)
    assert len(transfers(http_recorder)) == 1


def test_the_approvers_token_goes_out_on_a_resumed_turn_and_the_pin_still_holds(
    alice_client, approver_client, approver, http_recorder
):
    document = payments_agent(http_recorder.url)
    document["workflows"][0]["tasks"][1]["calls"][0]["request"]["headers"] = {
        "Authorization": "Token ${caller:token}"
    }
    conversation_id = start(alice_client, deployed_agent(document))
    say(alice_client, conversation_id, "transfer")
    (call,) = approver_client.get(f"/agents/{conversation_id}/approval-status").json()["pauseDetails"][
        "calls"
    ]
    assert call["requestPinned"] is True
    assert call["requestPreview"]["headers"]["authorization"] == "Token ${caller:token}"
    approve(approver_client, conversation_id)
    (sent,) = transfers(http_recorder)
    assert sent["headers"]["Authorization"] == f"Token {Token.objects.get(user=approver).key}"


def test_the_fingerprint_never_leaves_the_server(alice_client, approver_client, admin_client, http_recorder):
    _, conversation_id, pause = paused(alice_client, http_recorder)
    fingerprint = PendingToolCall.objects.get(batch__pause=pause).request_fingerprint
    assert len(fingerprint) == 64
    bodies = [
        approver_client.get(f"/agents/{conversation_id}/approval-status").content,
        approver_client.get(f"/agents/{conversation_id}/approval-status?detail=full").content,
        alice_client.get(f"/agents/{conversation_id}").content,
        approver_client.get("/agents/pending-approvals").content,
        admin_client.get(f"/audit/entries?conversation={conversation_id}").content,
    ]
    approve(approver_client, conversation_id)
    bodies.append(admin_client.get(f"/audit/entries?conversation={conversation_id}").content)
    export = admin_client.get(f"/audit/export?format=jsonl&conversation={conversation_id}")
    bodies.append(b"".join(export.streaming_content) if export.streaming else export.content)
    assert all(fingerprint.encode() not in body for body in bodies)
