"""Config drift under a tool pause: the paused llm task is gone from its place in the workflow."""

from __future__ import annotations

import pytest

from approvals.models import AuditEntry, Pause, PauseStatus
from conversations.models import AgentVersion
from tests.factories import deployed_agent, say, start
from tests.queue_drain import run_queued_tasks
from tests.toolgate.agents import payments_agent

pytestmark = pytest.mark.django_db


def test_a_missing_paused_llm_task_is_config_drift_and_no_gated_call_runs(alice_client, approver_client,
                                                                         http_recorder):
    agent_id = deployed_agent(payments_agent(http_recorder.url))
    conversation_id = start(alice_client, agent_id)
    say(alice_client, conversation_id, "please transfer")
    pause = Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)
    version = AgentVersion.objects.get(agent_id=agent_id)
    version.document["workflows"][0]["tasks"].pop(0)  # the llm task is gone from the stored version
    version.save()
    approver_client.post(f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json")
    run_queued_tasks()
    snapshot = alice_client.get(f"/agents/{conversation_id}").json()
    assert snapshot["state"] == "READY"
    assert snapshot["output"][-1].startswith("The pending approval could not be applied")
    assert not any(text.startswith("I need your approval") for text in snapshot["output"])
    assert [r for r in http_recorder.requests if r["path"] == "/transfers"] == []
    assert AuditEntry.objects.filter(pause_id=pause.id, verb="hitl.tool.config_drift").count() == 1
