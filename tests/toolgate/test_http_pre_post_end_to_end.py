"""preRequest/postResponse end to end through the REST API: a rule-fired call and a gated http tool."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harnesses.agents import payments_agent
from harnesses.factories import deployed_agent, say, start
from harnesses.queue_drain import run_queued_tasks
from toolgate.models import JournalEntry, JournalStatus

pytestmark = pytest.mark.django_db

RETRY_FAST = {"retryApiCallInstruction": {"maxRetries": 3, "exponentialBackoffDelayInMillis": 1}}


def job_bot(server_url: str) -> dict[str, Any]:
    return {
        "name": "job-bot",
        "workflows": [
            {
                "id": "main",
                "tasks": [
                    {
                        "id": "parse",
                        "type": "parser",
                        "dictionaries": [{"word": "start", "expressions": "start_job(x)"}],
                    },
                    {
                        "id": "rules",
                        "type": "behavior_rules",
                        "rules": [
                            {
                                "name": "Start",
                                "actions": ["start_job"],
                                "conditions": [
                                    {"type": "inputmatcher", "configs": {"expressions": "start_job(*)"}}
                                ],
                            }
                        ],
                    },
                    {
                        "id": "jobs",
                        "type": "httpcalls",
                        "targetServerUrl": server_url,
                        "calls": [
                            {
                                "name": "startJob",
                                "actions": ["start_job"],
                                "request": {
                                    "method": "POST",
                                    "path": "/jobs",
                                    "body": {"by": "{properties.requestedBy}"},
                                },
                                "preRequest": {
                                    "propertyInstructions": [
                                        {"name": "requestedBy", "valueString": "chat:{memory.current.input}"}
                                    ]
                                },
                                "postResponse": {
                                    **RETRY_FAST,
                                    "propertyInstructions": [
                                        {"name": "jobId", "fromObjectPath": "memory.current.startJob.body.id"}
                                    ],
                                },
                            }
                        ],
                    },
                    {
                        "id": "output",
                        "type": "output",
                        "outputs": [
                            {
                                "action": "start_job",
                                "texts": [
                                    "Job {properties.jobId}: {memory.current.startJob.status} after {memory.current.startJob.attempts} attempts."
                                ],
                            }
                        ],
                    },
                    {"id": "templating", "type": "templating"},
                ],
            }
        ],
    }


def test_a_rule_fired_call_retries_and_the_snapshot_shows_the_final_result(alice_client, loopback_server):
    loopback_server.respond_in_turn("/jobs", (503, {"busy": 1}), (503, {"busy": 2}), (200, {"id": "j-42"}))
    conversation_id = start(alice_client, deployed_agent(job_bot(loopback_server.url)))
    response = say(alice_client, conversation_id, "start")
    assert response.status_code == 200, response.content
    assert [(request.method, request.path) for request in loopback_server.received] == [("POST", "/jobs")] * 3
    assert all(request.json() == {"by": "chat:start"} for request in loopback_server.received)
    snapshot = alice_client.get(f"/agents/{conversation_id}").json()
    assert snapshot["output"] == ["Job j-42: 200 after 3 attempts."]
    assert snapshot["properties"]["jobId"] == "j-42"
    assert snapshot["properties"]["requestedBy"] == "chat:start"


def test_a_gated_http_tool_with_a_retry_is_unpinned_and_retries_once_approved(
    alice_client, approver_client, loopback_server
):
    loopback_server.respond_in_turn("/transfers", (503, {}), (200, {"id": "t-1"}))
    document = payments_agent(loopback_server.url)
    document["workflows"][0]["tasks"][1]["calls"][0]["postResponse"] = {
        **RETRY_FAST,
        "propertyInstructions": [
            {"name": "lastTransfer", "fromObjectPath": "memory.current.transfer_funds.body.id"}
        ],
    }
    conversation_id = start(alice_client, deployed_agent(document))
    assert say(alice_client, conversation_id, "please transfer").json()["state"] == "AWAITING_HUMAN"

    (call,) = approver_client.get(f"/agents/{conversation_id}/approval-status").json()["pauseDetails"][
        "calls"
    ]
    assert call["requestPinned"] is False
    assert call["requestPreview"]["method"] == "POST"
    assert loopback_server.received == []

    assert (
        approver_client.post(
            f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json"
        ).status_code
        == 200
    )
    run_queued_tasks()
    assert [request.path for request in loopback_server.received] == ["/transfers", "/transfers"]
    (entry,) = JournalEntry.objects.filter(conversation_id=conversation_id)
    assert entry.status == JournalStatus.EXECUTED
    assert json.loads(entry.result) == {"status": 200, "body": {"id": "t-1"}, "attempts": 2}
    snapshot = alice_client.get(f"/agents/{conversation_id}").json()
    (result,) = json.loads(snapshot["output"][-1].removeprefix("Done: "))
    assert result["result"] == {"status": 200, "body": {"id": "t-1"}, "attempts": 2}
    assert snapshot["properties"]["lastTransfer"] == "t-1"
