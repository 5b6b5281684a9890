"""approval-status and inbox rows: a field with no value is JSON null, never "", in every state."""

from __future__ import annotations

from typing import Any

import pytest

from harnesses.factories import account_bot, deployed_agent, paused_conversation, say, start
from harnesses.queue_drain import run_queued_tasks

pytestmark = pytest.mark.django_db

PAUSE_FIELDS = (
    "pauseId",
    "pausedAt",
    "deadline",
    "pauseReason",
    "pauseType",
    "timeoutPolicy",
    "approvalTimeout",
)


def status_of(client: Any, conversation_id: str) -> dict[str, Any]:
    response = client.get(f"/agents/{conversation_id}/approval-status")
    assert response.status_code == 200, response.content
    return response.json()


def assert_no_pause(status: dict[str, Any]) -> None:
    assert {name: status[name] for name in PAUSE_FIELDS} == dict.fromkeys(PAUSE_FIELDS)
    assert status["pauseDetails"] is None
    assert "" not in status.values()


def test_approval_status_empty_fields_are_null(alice_client, approver_client):
    never_paused = start(alice_client, deployed_agent())
    say(alice_client, never_paused, "hello")
    assert_no_pause(status_of(alice_client, never_paused))

    decided = paused_conversation(alice_client)
    approver_client.post(f"/agents/{decided}/resume", {"verdict": "APPROVED"}, format="json")
    assert_no_pause(status_of(approver_client, decided))  # the continuation still runs: IN_PROGRESS
    run_queued_tasks()
    status = status_of(alice_client, decided)
    assert status["state"] == "READY" and status["lastDecision"]["verdict"] == "APPROVED"
    assert status["lastDecision"]["note"] is None and status["lastDecision"]["cancelledBy"] is None
    assert_no_pause(status)

    cancelled = paused_conversation(alice_client)
    assert alice_client.post(f"/agents/{cancelled}/cancel").status_code == 200
    status = status_of(alice_client, cancelled)
    assert status["state"] == "EXECUTION_INTERRUPTED"
    assert_no_pause(status)

    ended = paused_conversation(alice_client)
    assert alice_client.post(f"/agents/{ended}/endConversation").status_code == 200
    assert_no_pause(status_of(alice_client, ended))


def test_a_pending_pause_fills_every_field_and_matches_its_inbox_row(alice_client, approver_client):
    conversation_id = paused_conversation(alice_client)
    status = status_of(approver_client, conversation_id)
    assert all(isinstance(status[name], str) and status[name] for name in PAUSE_FIELDS), status
    assert (status["timeoutPolicy"], status["approvalTimeout"]) == ("AUTO_REJECT", "PT15M")
    (row,) = approver_client.get("/agents/pending-approvals").json()
    assert {name: row[name] for name in PAUSE_FIELDS} == {name: status[name] for name in PAUSE_FIELDS}


@pytest.mark.parametrize(
    "hitl_config",
    [
        {"timeoutPolicy": "WAIT_INDEFINITELY", "pauseReason": "Wait for it"},
        {"timeoutPolicy": "WAIT_INDEFINITELY", "approvalTimeout": "PT15M", "pauseReason": "Wait for it"},
        {"pauseReason": "Wait for it"},
    ],
)
def test_a_wait_indefinitely_pause_has_null_approval_timeout_and_deadline(
    alice_client, approver_client, hitl_config
):
    conversation_id = paused_conversation(alice_client, deployed_agent(account_bot(hitlConfig=hitl_config)))
    status = status_of(approver_client, conversation_id)
    assert status["timeoutPolicy"] == "WAIT_INDEFINITELY"
    assert status["approvalTimeout"] is None and status["deadline"] is None
    assert status["pausedAt"] and status["pauseId"] and status["pauseReason"] == "Wait for it"
    (row,) = approver_client.get("/agents/pending-approvals").json()
    assert {name: row[name] for name in PAUSE_FIELDS} == {name: status[name] for name in PAUSE_FIELDS}
    assert "" not in row.values()


def test_openapi_schema_marks_every_pause_field_of_approval_status_nullable(anon_client):
    response = anon_client.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    document = response.json()
    operation = document["paths"]["/agents/{conversation_id}/approval-status"]["get"]
    reference = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    schema = document["components"]["schemas"][reference.rsplit("/", 1)[-1]]
    for name in (*PAUSE_FIELDS, "pauseDetails", "lastDecision"):
        assert schema["properties"][name].get("nullable") is True, name
        assert name in schema["required"]
