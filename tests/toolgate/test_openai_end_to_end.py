"""The openai provider end to end: the official SDK against a local Chat Completions stub, a gated http
tool on a loopback server, a pause, an approval over REST and the continuation that feeds the tool
result back to the model. The provider's API key goes to the stub and nowhere else."""

from __future__ import annotations

import json

import pytest

from approvals.models import AuditEntry
from harnesses.agents import payments_agent
from harnesses.factories import deployed_agent, say, start
from harnesses.queue_drain import run_queued_tasks
from harnesses.stored_rows import stored_rows_text

pytestmark = pytest.mark.django_db

API_KEY = "sk-test-e2e-9f8b7c6d5e4f3a2b1c0d"
CALL_ID = "call_transfer_1"


def openai_payments_agent(stub_url: str, target_url: str) -> dict:
    document = payments_agent(target_url)
    llm = document["workflows"][0]["tasks"][0]
    llm["provider"] = {"type": "openai", "baseUrl": f"{stub_url}/v1", "apiKey": API_KEY, "model": "gpt-test"}
    return document


def test_openai_model_pauses_on_a_gated_call_and_gets_the_result_after_approval(
    alice_client, approver_client, admin_client, chat_stub, loopback_server
):
    chat_stub.reply("How can I help?")  # the start of the conversation is a turn too
    chat_stub.call_tools({"id": CALL_ID, "name": "transfer_funds", "arguments": {"amount": 100, "to": "bob"}})
    chat_stub.reply("I transferred 100 to bob.")
    bodies: list[str] = []

    def body(response):
        bodies.append(response.content.decode())
        return response

    conversation_id = start(
        alice_client, deployed_agent(openai_payments_agent(chat_stub.url, loopback_server.url))
    )
    said = body(say(alice_client, conversation_id, "please transfer 100 to bob"))
    assert said.status_code == 200, said.content
    assert said.json()["state"] == "AWAITING_HUMAN"
    assert loopback_server.received == []  # paused before the tool ran

    greeting, first = chat_stub.requests
    assert greeting["messages"][-1] == {"role": "user", "content": ""}
    assert first["model"] == "gpt-test"
    assert first["messages"][0] == {"role": "system", "content": "You help with payments."}
    assert first["messages"][-1] == {"role": "user", "content": "please transfer 100 to bob"}
    assert {tool["function"]["name"] for tool in first["tools"]} == {"transfer_funds", "get_balance"}

    status = body(approver_client.get(f"/agents/{conversation_id}/approval-status"))
    (call,) = status.json()["pauseDetails"]["calls"]
    assert (call["callId"], call["toolName"], call["source"], call["gateReason"]) == (
        CALL_ID,
        "transfer_funds",
        "http",
        "transfer_*",
    )
    body(approver_client.get("/agents/pending-approvals"))

    resumed = body(
        approver_client.post(f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json")
    )
    assert resumed.status_code == 200, resumed.content
    assert run_queued_tasks() >= 1

    assert [(r.method, r.path, r.json()) for r in loopback_server.received] == [
        ("POST", "/transfers", {"amount": "100", "to": "bob"})
    ]
    second = chat_stub.requests[2]
    assistant, tool_result = second["messages"][-2:]
    assert [c["id"] for c in assistant["tool_calls"]] == [CALL_ID]
    assert tool_result["role"] == "tool" and tool_result["tool_call_id"] == CALL_ID
    assert json.loads(tool_result["content"]) == {"status": 200, "body": {"ok": True}}
    assert len(chat_stub.requests) == 3

    snapshot = body(alice_client.get(f"/agents/{conversation_id}")).json()
    assert snapshot["state"] == "READY"
    assert snapshot["output"] == ["I transferred 100 to bob."]

    # the key went to the stub, as a bearer token on every request, and nowhere else
    assert [headers["authorization"] for headers in chat_stub.headers] == [f"Bearer {API_KEY}"] * 3
    audit = body(admin_client.get(f"/audit/entries?conversation={conversation_id}"))
    assert audit.status_code == 200 and audit.json()["results"], audit.content
    assert body(admin_client.get(f"/agents/{conversation_id}/approval-status?detail=full")).status_code == 200
    assert all(API_KEY not in text for text in bodies), [text for text in bodies if API_KEY in text]
    assert API_KEY not in stored_rows_text(conversation_id)
    assert AuditEntry.objects.filter(subject_id=conversation_id, verb="hitl.approval").count() == 1
