"""An approval clears exactly one execution of exactly the approved call; a call id clears nothing.

Driven as the model would attack it: the official ``openai`` client against the local Chat Completions
stub, gated http tools on a loopback server, decisions over the REST API. After an approved
``call-1 = transfer_funds(bob, 1)`` the model reissues ``call-1`` as another tool, with other arguments,
and identically; it numbers its ids per response (``call_0`` every time); it repeats an id inside one
response; it sends ids the database cannot store.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from approvals.models import AuditEntry, Pause, PauseStatus
from conversations.models import Conversation
from harnesses.agents import payments_agent
from harnesses.factories import deployed_agent, say, start
from harnesses.queue_drain import run_queued_tasks
from toolgate.models import JournalEntry, PendingToolCall

pytestmark = pytest.mark.django_db

APPROVED = {"id": "call-1", "name": "transfer_funds", "arguments": {"amount": 1, "to": "bob"}}
DELETE_USER = {
    "name": "delete_user",
    "description": "Delete a user",
    "parameters": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    "request": {"method": "DELETE", "path": "/users/{args.name}"},
}


def openai_agent(stub_url: str, target_url: str) -> dict[str, Any]:
    document = payments_agent(
        target_url,
        extra_calls=[DELETE_USER],
        tool_approvals={"requireApproval": ["transfer_*", "delete_*"], "maxPausesPerTurn": 5},
    )
    llm = document["workflows"][0]["tasks"][0]
    llm["provider"] = {
        "type": "openai",
        "baseUrl": f"{stub_url}/v1",
        "apiKey": "sk-stub",
        "model": "gpt-test",
    }
    return document


def started(client, chat_stub, server) -> str:
    chat_stub.reply("How can I help?")  # the start of a conversation is a turn too
    return start(client, deployed_agent(openai_agent(chat_stub.url, server.url)))


def asked(client, conversation_id: str, text: str = "please send bob 1") -> dict[str, Any]:
    response = say(client, conversation_id, text)
    assert response.status_code == 200, response.content
    return response.json()


def approve(client, conversation_id: str) -> None:
    response = client.post(f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json")
    assert response.status_code == 200, response.content
    run_queued_tasks()


def pending(conversation_id: str) -> Pause:
    return Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)


def state_of(conversation_id: str) -> str:
    return Conversation.objects.get(pk=conversation_id).state


def sent(server) -> list[tuple[str, str, Any]]:
    return [(r.method, r.path, r.json() if r.body else None) for r in server.received]


def paused_calls(pause: Pause) -> list[tuple[str, str, dict[str, Any]]]:
    calls = PendingToolCall.objects.filter(batch__pause=pause).order_by("position")
    return [(c.call_id, c.tool_name, json.loads(c.arguments_raw)) for c in calls]


BOB_1 = ("POST", "/transfers", {"amount": "1", "to": "bob"})


@pytest.mark.parametrize(
    ("reissued", "runs_as"),
    [
        (
            {"id": "call-1", "name": "delete_user", "arguments": {"name": "admin"}},
            ("DELETE", "/users/admin", None),
        ),
        (
            {"id": "call-1", "name": "transfer_funds", "arguments": {"amount": 999999, "to": "mallory"}},
            ("POST", "/transfers", {"amount": "999999", "to": "mallory"}),
        ),
        (APPROVED, BOB_1),
    ],
    ids=["another-tool", "other-arguments", "identical-call"],
)
def test_an_approved_call_id_reissued_pauses_afresh_and_each_approval_runs_once(
    alice_client, approver_client, chat_stub, loopback_server, reissued, runs_as
):
    conversation_id = started(alice_client, chat_stub, loopback_server)
    chat_stub.call_tools(APPROVED)
    assert asked(alice_client, conversation_id)["state"] == "AWAITING_HUMAN"
    first = pending(conversation_id)

    chat_stub.call_tools(reissued)  # what the model answers once it has the approved call's result
    approve(approver_client, conversation_id)

    assert sent(loopback_server) == [BOB_1]  # the approved request, exactly once
    assert state_of(conversation_id) == "AWAITING_HUMAN"
    second = pending(conversation_id)
    assert second.id != first.id and second.epoch != first.epoch
    assert paused_calls(second) == [("call-1", reissued["name"], reissued["arguments"])]
    assert AuditEntry.objects.filter(pause_id=second.id, verb="hitl.pause").count() == 1
    assert JournalEntry.objects.filter(conversation_id=conversation_id).count() == 1

    chat_stub.reply("Done.")
    approve(approver_client, conversation_id)
    assert sent(loopback_server) == [BOB_1, runs_as]  # the second approval runs its call once more
    assert state_of(conversation_id) == "READY"
    assert list(
        JournalEntry.objects.filter(conversation_id=conversation_id).values_list("call_id", flat=True)
    ) == ["call-1", "call-1"]  # one claim per approval, each under its own pause epoch


def test_a_model_numbering_ids_per_response_cannot_pass_a_new_call_on_an_old_approval(
    alice_client, approver_client, chat_stub, loopback_server
):
    conversation_id = started(alice_client, chat_stub, loopback_server)
    chat_stub.call_tools({**APPROVED, "id": "call_0"})
    asked(alice_client, conversation_id)
    chat_stub.call_tools({"id": "call_0", "name": "delete_user", "arguments": {"name": "carol"}})
    approve(approver_client, conversation_id)

    assert sent(loopback_server) == [BOB_1]
    assert paused_calls(pending(conversation_id)) == [("call_0", "delete_user", {"name": "carol"})]
    chat_stub.reply("I will not delete carol.")
    response = approver_client.post(
        f"/agents/{conversation_id}/resume", {"verdict": "REJECTED", "note": "no"}, format="json"
    )
    assert response.status_code == 200, response.content
    run_queued_tasks()
    assert sent(loopback_server) == [BOB_1] and state_of(conversation_id) == "READY"


def tool_messages_answer_one_call_each(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The newest assistant message's calls by id, each answered by exactly one tool message after it."""
    messages = request["messages"]
    index = max(i for i, m in enumerate(messages) if m["role"] == "assistant" and m.get("tool_calls"))
    calls = {c["id"]: c for c in messages[index]["tool_calls"]}
    answers = [m["tool_call_id"] for m in messages[index + 1 :] if m["role"] == "tool"]
    assert len(calls) == len(messages[index]["tool_calls"]), "ids of one response must be distinct"
    assert sorted(answers) == sorted(calls), (answers, list(calls))
    return {m["tool_call_id"]: json.loads(m["content"]) for m in messages[index + 1 :] if m["role"] == "tool"}


def test_a_repeated_id_in_one_response_is_not_run_nor_paused_and_the_model_reads_why(
    alice_client, approver_client, chat_stub, loopback_server
):
    conversation_id = started(alice_client, chat_stub, loopback_server)
    chat_stub.call_tools(
        APPROVED,
        {"id": "call-1", "name": "transfer_funds", "arguments": {"amount": 999999, "to": "mallory"}},
        {"id": "call-1", "name": "get_balance", "arguments": {}},
    )
    assert asked(alice_client, conversation_id)["state"] == "AWAITING_HUMAN"  # not ERROR
    assert sent(loopback_server) == []  # the ungated repeat did not run either
    assert paused_calls(pending(conversation_id)) == [
        ("call-1", "transfer_funds", {"amount": 1, "to": "bob"})
    ]

    chat_stub.reply("Sent 1 to bob.")
    approve(approver_client, conversation_id)
    assert sent(loopback_server) == [BOB_1]
    assert state_of(conversation_id) == "READY"

    results = tool_messages_answer_one_call_each(chat_stub.requests[-1])
    assert results.pop("call-1") == {"status": 200, "body": {"ok": True}}
    assert len(results) == 2 and all(call_id.startswith("gen-") for call_id in results)
    assert (
        list(results.values())
        == [
            {
                "status": "NOT_EXECUTED",
                "reason": "call id 'call-1' was used twice in one response; this call was not run - issue it "
                "again with its own id if it is still needed",
            }
        ]
        * 2
    )


def test_a_repeated_id_of_an_ungated_call_runs_the_first_only(alice_client, chat_stub, loopback_server):
    conversation_id = started(alice_client, chat_stub, loopback_server)
    chat_stub.call_tools(
        {"id": "call-7", "name": "get_balance", "arguments": {}},
        {"id": "call-7", "name": "delete_user", "arguments": {"name": "admin"}},
    )
    chat_stub.reply("Your balance is fine.")
    assert asked(alice_client, conversation_id, "my balance?")["state"] == "READY"
    assert sent(loopback_server) == [("GET", "/balance", None)]
    assert not Pause.objects.filter(subject_id=conversation_id).exists()  # the repeat was not paused
    results = tool_messages_answer_one_call_each(chat_stub.requests[-1])
    assert results["call-7"] == {"status": 200, "body": {"ok": True}}


@pytest.mark.parametrize(
    "hostile_id",
    ["x" * 201, "call\x00-1", "call-\ud800"],
    ids=["201-chars", "nul", "lone-surrogate"],
)
def test_an_id_the_database_cannot_store_is_renamed_and_the_turn_goes_on(
    alice_client, approver_client, chat_stub, loopback_server, hostile_id
):
    conversation_id = started(alice_client, chat_stub, loopback_server)
    chat_stub.call_tools({**APPROVED, "id": hostile_id})
    assert asked(alice_client, conversation_id)["state"] == "AWAITING_HUMAN"
    ((call_id, name, _),) = paused_calls(pending(conversation_id))
    assert call_id.startswith("gen-") and name == "transfer_funds"

    chat_stub.reply("Sent.")
    approve(approver_client, conversation_id)
    assert sent(loopback_server) == [BOB_1] and state_of(conversation_id) == "READY"
    assert tool_messages_answer_one_call_each(chat_stub.requests[-1]) == {
        call_id: {"status": 200, "body": {"ok": True}}
    }


def test_an_id_of_exactly_200_characters_is_kept(alice_client, chat_stub, loopback_server):
    conversation_id = started(alice_client, chat_stub, loopback_server)
    chat_stub.call_tools({**APPROVED, "id": "y" * 200})
    asked(alice_client, conversation_id)
    assert paused_calls(pending(conversation_id))[0][0] == "y" * 200


def test_a_call_id_shaped_like_a_journal_step_key_cannot_suppress_a_later_http_call(
    alice_client, approver_client, chat_stub, loopback_server
):
    """The continuation journals its http steps as ``http:<task>:<call>`` in the tool calls' key space:
    an approved call under that id would take the step's claim, and the step would never be sent."""
    document = openai_agent(chat_stub.url, loopback_server.url)
    tasks = document["workflows"][0]["tasks"]
    tasks[0:0] = [
        {"id": "parse", "type": "parser", "dictionaries": [{"word": "send", "expressions": "pay(x)"}]},
        {
            "id": "rules",
            "type": "behavior_rules",
            "rules": [
                {
                    "name": "Log every payment",
                    "actions": ["log_payment"],
                    "conditions": [{"type": "inputmatcher", "configs": {"expressions": "pay(*)"}}],
                }
            ],
        },
    ]
    tasks.append(
        {
            "id": "audit",
            "type": "httpcalls",
            "targetServerUrl": loopback_server.url,
            "calls": [
                {"name": "log", "actions": ["log_payment"], "request": {"method": "POST", "path": "/log"}}
            ],
        }
    )
    chat_stub.reply("How can I help?")
    conversation_id = start(alice_client, deployed_agent(document))
    chat_stub.call_tools({**APPROVED, "id": "http:audit:log"})
    assert asked(alice_client, conversation_id)["state"] == "AWAITING_HUMAN"
    chat_stub.reply("Sent.")
    approve(approver_client, conversation_id)
    assert [(method, path) for method, path, _ in sent(loopback_server)] == [
        ("POST", "/transfers"),
        ("POST", "/log"),
    ]
