"""An approver's credentials never reach a call the approver did not see.

A continuation acts for the user whose turn raised the pause; only the calls of the batch a human
approver approved carry the approver's identity (``${caller:token}``). The target is a loopback server
that answers 200 only to the approver's token and 403 to anything else, and records the Authorization
header of every request, as a service that trusts the approver more than alice would.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.core import serializers
from rest_framework.authtoken.models import Token

from approvals.models import Pause, PauseKind, PauseStatus
from approvals.timers import fire_due_batch
from conversations.acting_identity import approver_caller, continuation_caller
from conversations.models import Conversation, ConversationStep
from harnesses.agents import AFTER_TOOLS, payments_agent
from harnesses.factories import account_bot, deployed_agent, say, start
from harnesses.queue_drain import run_queued_tasks
from tests.conversations.conftest import CannedResponse, ReceivedRequest
from toolgate.models import JournalEntry, PendingToolBatch

pytestmark = pytest.mark.django_db

AS_CALLER = {"Authorization": "Token ${caller:token}"}
TRANSFER = {"id": "call-1", "name": "transfer_funds", "arguments": {"amount": 1, "to": "bob"}}


def token_of(user) -> str:
    return Token.objects.get(user=user).key


@pytest.fixture
def approver_only_server(loopback_server, approver):
    """The loopback server, answering 200 to the approver's token only (403 otherwise)."""
    expected = f"Token {token_of(approver)}"

    def answer(request: ReceivedRequest) -> CannedResponse:
        if request.headers.get("authorization") == expected:
            return CannedResponse(200, b'{"ok": true}')
        return CannedResponse(403, b'{"detail": "forbidden"}')

    loopback_server.answering = answer
    return loopback_server


def authorizations(server) -> list[tuple[str, str]]:
    return [(r.path, r.headers.get("authorization", "")) for r in server.received]


def caller_token_agent(target_url: str, **kwargs: Any) -> dict[str, Any]:
    """The payments agent whose http tools authenticate as ``${caller:token}``."""
    document = payments_agent(target_url, **kwargs)
    for call in document["workflows"][0]["tasks"][1]["calls"]:
        call["request"]["headers"] = dict(AS_CALLER)
    return document


def on_openai(document: dict[str, Any], stub_url: str) -> dict[str, Any]:
    llm = document["workflows"][0]["tasks"][0]
    llm["provider"] = {
        "type": "openai",
        "baseUrl": f"{stub_url}/v1",
        "apiKey": "sk-stub",
        "model": "gpt-test",
    }
    return document


def approve(client, conversation_id: str) -> None:
    response = client.post(f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json")
    assert response.status_code == 200, response.content
    run_queued_tasks()


def stored_rows_text(conversation_id: str) -> str:
    querysets = [
        Pause.objects.filter(subject_id=conversation_id),
        PendingToolBatch.objects.filter(conversation_id=conversation_id),
        JournalEntry.objects.filter(conversation_id=conversation_id),
        ConversationStep.objects.filter(conversation_id=conversation_id),
    ]
    return "\n".join(serializers.serialize("json", queryset) for queryset in querysets)


def tool_results(request: dict[str, Any]) -> dict[str, Any]:
    return {m["tool_call_id"]: json.loads(m["content"]) for m in request["messages"] if m["role"] == "tool"}


def test_only_the_approved_call_carries_the_approvers_token_the_rest_of_the_turn_acts_for_alice(
    alice, approver, alice_client, approver_client, chat_stub, approver_only_server
):
    server = approver_only_server
    chat_stub.reply("How can I help?")
    conversation_id = start(
        alice_client, deployed_agent(on_openai(caller_token_agent(server.url), chat_stub.url))
    )
    chat_stub.call_tools({"id": "call-0", "name": "get_balance", "arguments": {}}, TRANSFER)
    assert say(alice_client, conversation_id, "send bob 1").json()["state"] == "AWAITING_HUMAN"
    (call,) = approver_client.get(f"/agents/{conversation_id}/approval-status").json()["pauseDetails"][
        "calls"
    ]
    assert call["requestPinned"] is True  # the reviewer reads whose token goes: the reference, named
    assert call["requestPreview"]["headers"]["authorization"] == "Token ${caller:token}"

    chat_stub.call_tools({"id": "call-2", "name": "get_balance", "arguments": {}})  # after the resume
    chat_stub.reply("Done.")
    approve(approver_client, conversation_id)

    alice_auth, approver_auth = f"Token {token_of(alice)}", f"Token {token_of(approver)}"
    assert authorizations(server) == [
        ("/balance", alice_auth),  # before the pause: alice's turn
        ("/transfers", approver_auth),  # the call the approver saw and approved
        ("/balance", alice_auth),  # after the resume: still alice's turn (403 before, 403 after)
    ]
    results = tool_results(chat_stub.requests[-1])
    assert [results[i]["status"] for i in ("call-0", "call-1", "call-2")] == [403, 200, 403]
    # the approved pinned call ran although its token is not the raising user's
    assert Conversation.objects.get(pk=conversation_id).state == "READY"
    # the approver's token reached no other request: not the model, not the rows written
    everything_sent = json.dumps([chat_stub.requests, chat_stub.headers])
    assert token_of(approver) not in everything_sent
    assert token_of(approver) not in stored_rows_text(conversation_id)


def test_the_http_calls_a_rule_pause_continuation_fires_act_for_the_raising_user(
    alice, approver, alice_client, approver_client, approver_only_server
):
    document = account_bot()
    document["workflows"][0]["tasks"].insert(
        2,
        {
            "id": "delete",
            "type": "httpcalls",
            "targetServerUrl": approver_only_server.url,
            "calls": [
                {
                    "name": "deleteAccount",
                    "actions": ["confirm_deletion"],
                    "request": {"method": "DELETE", "path": "/accounts/me", "headers": dict(AS_CALLER)},
                }
            ],
        },
    )
    conversation_id = start(alice_client, deployed_agent(document))
    assert say(alice_client, conversation_id, "please delete my account").json()["state"] == "AWAITING_HUMAN"
    approve(approver_client, conversation_id)
    assert authorizations(approver_only_server) == [("/accounts/me", f"Token {token_of(alice)}")]
    step = ConversationStep.objects.filter(conversation_id=conversation_id).order_by("-index").first()
    assert step.outputs["deleteAccount"]["status"] == 403


def test_an_auto_approve_timeouts_approved_call_acts_for_the_raising_user(
    alice, alice_client, approver_only_server
):
    document = caller_token_agent(
        approver_only_server.url,
        script=[AFTER_TOOLS, {"when": {"inputContains": "transfer"}, "toolCalls": [TRANSFER]}],
        tool_approvals={
            "requireApproval": ["transfer_*"],
            "timeoutPolicy": "AUTO_APPROVE",
            "approvalTimeout": "PT1M",
        },
    )
    conversation_id = start(alice_client, deployed_agent(document))
    say(alice_client, conversation_id, "transfer 1 to bob")
    pause = Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)
    with time_machine.travel(pause.due_at + timedelta(seconds=1), tick=False):
        assert fire_due_batch() == 1
        run_queued_tasks()
    pause.refresh_from_db()
    assert pause.decided_by == "system:timeout" and pause.verdict == "APPROVED"
    assert authorizations(approver_only_server) == [("/transfers", f"Token {token_of(alice)}")]


def a2a_agent(stub_url: str, target_url: str, nested_agent_id: str, **approvals: Any) -> dict[str, Any]:
    document = on_openai(
        caller_token_agent(target_url, tool_approvals={"requireApproval": ["transfer_*"], **approvals}),
        stub_url,
    )
    document["workflows"][0]["tasks"][0]["tools"]["a2a"] = [
        {"name": "accountBot", "agentId": nested_agent_id, "description": "Manages accounts"}
    ]
    return document


def nested_conversation(agent_id: str) -> Conversation:
    return Conversation.objects.get(agent_id=agent_id)


def test_a_nested_conversation_started_after_the_resume_belongs_to_the_raising_user(
    alice_client, approver_client, chat_stub, approver_only_server
):
    nested_agent = deployed_agent(account_bot())
    chat_stub.reply("How can I help?")
    conversation_id = start(
        alice_client, deployed_agent(a2a_agent(chat_stub.url, approver_only_server.url, nested_agent))
    )
    chat_stub.call_tools(TRANSFER)
    say(alice_client, conversation_id, "send bob 1")
    chat_stub.call_tools({"id": "call-2", "name": "accountBot", "arguments": {"message": "hello"}})
    chat_stub.reply("Done.")
    approve(approver_client, conversation_id)
    assert tool_results(chat_stub.requests[-1])["call-2"]["status"] == "OK"
    assert nested_conversation(nested_agent).owner.username == "alice"


def test_a_nested_conversation_an_approved_call_starts_belongs_to_the_raising_user(
    alice_client, approver_client, chat_stub, approver_only_server
):
    """The approver approved talking to the agent, not the calls the nested conversation goes on to make."""
    nested_agent = deployed_agent(account_bot())
    chat_stub.reply("How can I help?")
    document = a2a_agent(chat_stub.url, approver_only_server.url, nested_agent)
    document["hitlConfig"]["toolApprovals"]["requireApproval"].append("a2a:*")
    conversation_id = start(alice_client, deployed_agent(document))
    chat_stub.call_tools({"id": "call-1", "name": "accountBot", "arguments": {"message": "hello"}})
    assert say(alice_client, conversation_id, "say hello").json()["state"] == "AWAITING_HUMAN"
    chat_stub.reply("Done.")
    approve(approver_client, conversation_id)
    assert nested_conversation(nested_agent).owner.username == "alice"


def test_who_a_continuation_and_its_approved_calls_act_for(alice, approver):
    def decided(kind: str, decided_by: str, user) -> Pause:
        return Pause(
            kind=kind,
            raised_by=alice,
            decided_by=decided_by,
            decided_by_user=user,
            automated=decided_by.startswith("system:"),
        )

    human = decided(PauseKind.TOOL_CALL, "approver", approver)
    assert continuation_caller(human).username == "alice"
    assert approver_caller(human).username == "approver"
    assert approver_caller(decided(PauseKind.TOOL_CALL, "mcp:approver", approver)).username == "approver"
    assert approver_caller(decided(PauseKind.TOOL_CALL, "system:timeout", None)) is None
    assert approver_caller(decided(PauseKind.TOOL_CALL, "slack:U123", None)) is None  # no account here
    assert approver_caller(decided(PauseKind.RULE, "approver", approver)) is None
    assert continuation_caller(Pause(kind=PauseKind.TOOL_CALL, raised_by=None)) is None
    assert continuation_caller(Pause(kind=PauseKind.RULE, owner=alice, raised_by=alice)).username == "alice"
    # an admin's turn in alice's conversation raised it: the continuation acts for the admin
    assert (
        continuation_caller(Pause(kind=PauseKind.RULE, owner=alice, raised_by=approver)).username
        == "approver"
    )
