"""${vault:NAME} references resolved from the secret store when a request is built."""

from __future__ import annotations

import json

import pytest

from approvals.models import Pause, PauseStatus
from conversations.models import ConversationStep
from harnesses.agents import payments_agent
from harnesses.factories import account_bot, deployed_agent, say, start
from harnesses.queue_drain import run_queued_tasks
from tests.conftest import CANARY_SECRET_NAME
from toolgate import secret_store
from toolgate.models import JournalEntry, PendingToolCall

pytestmark = pytest.mark.django_db


def test_a_rule_triggered_call_sends_the_secret_and_stores_it_nowhere(
    alice_client, http_recorder, canary_secret
):
    document = account_bot(hitlConfig={})
    document["workflows"][0]["tasks"][1]["rules"][1]["actions"] = ["say_hello", "ping"]
    document["workflows"][0]["tasks"].insert(
        2,
        {
            "id": "ping",
            "type": "httpcalls",
            "targetServerUrl": http_recorder.url,
            "calls": [
                {
                    "name": "ping",
                    "actions": ["ping"],
                    "request": {
                        "method": "POST",
                        "path": "/ping",
                        "headers": {"X-Api-Key": "${vault:" + CANARY_SECRET_NAME + "}"},
                        "body": {"key": "${vault:" + CANARY_SECRET_NAME + "}"},
                    },
                }
            ],
        },
    )
    conversation_id = start(alice_client, deployed_agent(document))
    assert say(alice_client, conversation_id, "hello").status_code == 200
    (sent,) = http_recorder.requests
    assert sent["headers"]["X-Api-Key"] == canary_secret and json.loads(sent["body"]) == {
        "key": canary_secret
    }
    step = ConversationStep.objects.filter(conversation_id=conversation_id).order_by("-index").first()
    assert canary_secret not in json.dumps(step.data) and canary_secret not in json.dumps(step.outputs)


def test_an_unknown_secret_fails_that_call_naming_the_reference(alice_client, http_recorder):
    document = account_bot(hitlConfig={})
    document["workflows"][0]["tasks"][1]["rules"][1]["actions"] = ["say_hello", "ping"]
    document["workflows"][0]["tasks"].insert(
        2,
        {
            "id": "ping",
            "type": "httpcalls",
            "targetServerUrl": http_recorder.url,
            "calls": [
                {
                    "name": "ping",
                    "actions": ["ping"],
                    "request": {
                        "method": "GET",
                        "path": "/ping",
                        "headers": {"Authorization": "Bearer ${vault:nope}"},
                    },
                }
            ],
        },
    )
    conversation_id = start(alice_client, deployed_agent(document))
    say(alice_client, conversation_id, "hello")
    assert http_recorder.requests == []
    step = ConversationStep.objects.filter(conversation_id=conversation_id).order_by("-index").first()
    assert step.outputs["ping"] == {"error": "unknown secret: ${vault:nope}"}


def with_vault_body(url: str) -> dict:
    document = payments_agent(url)
    call = document["workflows"][0]["tasks"][1]["calls"][0]
    call["request"]["body"] = {
        "amount": "{args.amount}",
        "to": "{args.to}",
        "signature": "${vault:signing.key}",
    }
    return document


def test_the_preview_journal_and_results_never_hold_the_resolved_secret(
    alice_client, approver_client, http_recorder
):
    secret_store.set_secret(name="signing.key", value="very-private-signing-value")
    conversation_id = start(alice_client, deployed_agent(with_vault_body(http_recorder.url)))
    say(alice_client, conversation_id, "transfer")
    pause = Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)
    call = PendingToolCall.objects.get(batch__pause=pause)
    assert call.request_pinned and "very-private" not in json.dumps(call.request_preview)
    assert "${vault:signing.key}" in call.request_preview["body"]  # named, never shown
    approver_client.post(f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json")
    run_queued_tasks()
    (sent,) = [r for r in http_recorder.requests if r["path"] == "/transfers"]
    assert json.loads(sent["body"])["signature"] == "very-private-signing-value"
    assert "very-private" not in JournalEntry.objects.get(pause_epoch=pause.epoch).result


def test_a_secret_that_changes_between_gate_time_and_execution_changes_the_request(
    alice_client, approver_client, http_recorder
):
    secret_store.set_secret(name="signing.key", value="first-signing-value")
    conversation_id = start(alice_client, deployed_agent(with_vault_body(http_recorder.url)))
    say(alice_client, conversation_id, "transfer")
    secret_store.set_secret(name="signing.key", value="second-signing-value")  # rotated while deciding
    approver_client.post(f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json")
    run_queued_tasks()
    assert [r for r in http_recorder.requests if r["path"] == "/transfers"] == []
    output = alice_client.get(f"/agents/{conversation_id}").json()["output"][-1]
    assert "the request changed after it was approved" in output
