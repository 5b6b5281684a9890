"""Config drift under a tool pause: the paused llm task is gone from its place in the workflow."""

from __future__ import annotations

import pytest

from approvals.models import AuditEntry, Pause, PauseStatus
from conversations.models import AgentVersion, ConversationStep
from harnesses.agents import payments_agent
from harnesses.factories import deployed_agent, say, start
from harnesses.queue_drain import run_queued_tasks
from toolgate.resume import CONFIG_DRIFT_TEXT

pytestmark = pytest.mark.django_db


def test_a_missing_paused_llm_task_is_config_drift_and_no_gated_call_runs(
    alice_client, approver_client, http_recorder
):
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
    assert not any(
        text.startswith("This step is waiting for a reviewer's approval") for text in snapshot["output"]
    )
    assert [r for r in http_recorder.requests if r["path"] == "/transfers"] == []
    assert AuditEntry.objects.filter(pause_id=pause.id, verb="hitl.tool.config_drift").count() == 1


def _stored_version_changed(agent_id: str, change) -> None:
    version = AgentVersion.objects.get(agent_id=agent_id)
    change(version.document)
    version.save()


def test_a_gone_paused_workflow_fails_the_continuation_and_no_gated_call_runs(
    alice_client, approver_client, http_recorder
):
    agent_id = deployed_agent(payments_agent(http_recorder.url))
    conversation_id = start(alice_client, agent_id)
    say(alice_client, conversation_id, "please transfer")
    pause = Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)
    _stored_version_changed(agent_id, lambda document: document["workflows"][0].update(id="main-v2"))
    approver_client.post(f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json")
    run_queued_tasks()
    snapshot = alice_client.get(f"/agents/{conversation_id}").json()
    assert snapshot["state"] == "ERROR"
    assert snapshot["output"] == [CONFIG_DRIFT_TEXT]
    assert [r for r in http_recorder.requests if r["path"] == "/transfers"] == []
    (drift,) = AuditEntry.objects.filter(pause_id=pause.id, verb="hitl.tool.config_drift")
    assert drift.detail["reason"] == "Paused workflow 'main' no longer exists (config drift)"
    (failed,) = AuditEntry.objects.filter(pause_id=pause.id, verb="hitl.continuation.failed")
    assert failed.detail["error"] == "ConfigDrift: Paused workflow 'main' no longer exists (config drift)"


def test_a_resumed_tool_pause_leaves_no_control_keys_in_step_data(
    alice_client, approver_client, http_recorder
):
    """A resume enters the pipeline with a typed resume point: nothing but data shown to people is stored."""
    conversation_id = start(alice_client, deployed_agent(payments_agent(http_recorder.url)))
    say(alice_client, conversation_id, "please transfer")
    step = ConversationStep.objects.filter(conversation_id=conversation_id).latest("index")
    assert {key for key in step.data if key.startswith("hitl:")} == {"hitl:tool_pause_count"}
    approver_client.post(f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json")
    run_queued_tasks()
    step.refresh_from_db()
    assert {key for key in step.data if key.startswith("hitl:")} == {
        "hitl:tool_pause_count",
        "hitl:decision_verdict",
        "hitl:decision_note",
        "hitl:decision_by",
    }
    assert not any(text.startswith("This step is waiting for a reviewer's approval") for text in step.output)
    assert [r["path"] for r in http_recorder.requests] == ["/transfers"]
