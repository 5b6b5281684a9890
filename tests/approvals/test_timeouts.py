"""Timeout policies, fired by the timer drainer with time travel instead of sleeping."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import time_machine
from django_q.models import Schedule

from approvals.decision_notices import rejection_text
from approvals.models import AuditEntry, Pause, PauseStatus
from approvals.timers import FAILED_FIRE_RETRY, TIMER_FUNC, fire_due_batch, fire_timeout
from conversations.models import Conversation, ConversationStep
from harnesses.agents import payments_agent
from harnesses.factories import account_bot, deployed_agent, paused_conversation, say, start
from harnesses.queue_drain import run_queued_tasks

pytestmark = pytest.mark.django_db
BACKSTOP = timedelta(seconds=120)  # HITL_TIMER_BACKSTOP_SECONDS: the schedule backs up the drainer


def paused_with(client, policy: str, timeout: str = "PT15M") -> Pause:
    config = {"timeoutPolicy": policy, "approvalTimeout": timeout} if policy != "WAIT_INDEFINITELY" else {}
    conversation_id = paused_conversation(client, deployed_agent(account_bot(hitlConfig=config)))
    return Pause.objects.get(subject_id=conversation_id)


def at(moment):
    return time_machine.travel(moment, tick=False)


def test_a_finite_pause_arms_a_one_shot_backstop_schedule_in_its_transaction(alice_client):
    pause = paused_with(alice_client, "AUTO_REJECT", "PT30S")
    assert (pause.due_at - pause.paused_at) == timedelta(seconds=30)
    schedule = Schedule.objects.get(pk=pause.schedule_id)
    assert (schedule.func, schedule.schedule_type, schedule.next_run) == (
        TIMER_FUNC,
        Schedule.ONCE,
        pause.due_at + BACKSTOP,
    )
    assert schedule.name == f"hitl-timeout-{pause.id}"


def test_wait_indefinitely_arms_nothing(alice_client):
    pause = paused_with(alice_client, "WAIT_INDEFINITELY")
    assert pause.due_at is None and pause.schedule_id is None
    with at(pause.paused_at + timedelta(days=400)):
        assert fire_due_batch() == 0
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING


def test_nothing_fires_before_the_deadline(alice_client):
    pause = paused_with(alice_client, "AUTO_APPROVE")
    with at(pause.due_at - timedelta(seconds=1)):
        assert fire_due_batch() == 0
        assert fire_timeout(str(pause.id)) == "no-op"
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING


def test_auto_approve_decides_approved_as_system_timeout_and_continues(alice_client):
    pause = paused_with(alice_client, "AUTO_APPROVE")
    with at(pause.due_at + timedelta(milliseconds=100)):
        assert fire_due_batch() == 1
    decided = Pause.objects.get(pk=pause.pk)
    assert (decided.verdict, decided.decided_by, decided.automated) == ("APPROVED", "system:timeout", True)
    assert decided.note == "Automatic approved due to timeout (policy: AUTO_APPROVE)"
    assert not Schedule.objects.filter(pk=pause.schedule_id).exists()
    run_queued_tasks()
    conversation = Conversation.objects.get(pk=pause.subject_id)
    assert conversation.state == "READY"
    assert alice_client.get(f"/agents/{conversation.pk}").json()["output"] == ["Deletion APPROVED."]
    assert Pause.objects.get(pk=pause.pk).due_at is None  # cleared by the successful transition


def test_auto_reject_skips_the_rest_of_the_turn(alice_client):
    pause = paused_with(alice_client, "AUTO_REJECT")
    with at(pause.due_at):
        fire_due_batch()
    run_queued_tasks()
    snapshot = alice_client.get(f"/agents/{pause.subject_id}").json()
    assert snapshot["state"] == "READY"
    assert snapshot["output"] == [
        "No reviewer decided in time; the request was rejected automatically (policy AUTO_REJECT)."
    ]
    entry = AuditEntry.objects.get(pause_id=pause.id, verb="hitl.approval")
    assert (entry.verdict, entry.actor, entry.automated) == ("REJECTED", "system:timeout", True)


def test_abort_cancels_and_is_audited_as_cancelled_by_system_timeout(alice_client):
    pause = paused_with(alice_client, "ABORT")
    with at(pause.due_at):
        fire_due_batch()
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.CANCELLED
    assert Conversation.objects.get(pk=pause.subject_id).state == "EXECUTION_INTERRUPTED"
    entry = AuditEntry.objects.get(pause_id=pause.id, verb="hitl.approval")
    assert (entry.verdict, entry.actor, entry.detail["mode"]) == (
        "CANCELLED",
        "system:timeout",
        "TIMEOUT_ABORT",
    )


def test_a_late_or_repeated_fire_never_decides_twice(alice_client, approver_client):
    pause = paused_with(alice_client, "AUTO_REJECT")
    approver_client.post(f"/agents/{pause.subject_id}/resume", {"verdict": "APPROVED"}, format="json")
    assert not Schedule.objects.filter(pk=pause.schedule_id).exists()  # removed with the decision
    with at(pause.due_at + timedelta(minutes=5)):
        assert fire_timeout(str(pause.id)) == "no-op"
        assert fire_timeout(str(pause.id)) == "no-op"
        assert fire_due_batch() == 0
    entries = AuditEntry.objects.filter(pause_id=pause.id, verb="hitl.approval")
    assert [(e.verdict, e.actor) for e in entries] == [("APPROVED", "approver")]


def test_the_deadline_is_data_a_pause_whose_schedule_was_deleted_still_fires(alice_client):
    pause = paused_with(alice_client, "AUTO_REJECT")
    Schedule.objects.filter(pk=pause.schedule_id).delete()  # lost, or deleted by hand
    with at(pause.due_at + timedelta(seconds=1)):
        assert fire_due_batch() == 1
    assert Pause.objects.get(pk=pause.pk).verdict == "REJECTED"


def test_a_fire_that_failed_leaves_the_pause_pending_and_is_retried(alice_client, admin_client):
    pause = paused_with(alice_client, "AUTO_APPROVE")
    admin_client.post(f"/administration/production/undeploy/{deployed_agent_of(pause)}")
    with at(pause.due_at):
        assert fire_due_batch() == 1
        assert fire_due_batch() == 0  # not hammered
    failed = Pause.objects.get(pk=pause.pk)
    assert failed.status == PauseStatus.PENDING and failed.due_at == pause.due_at
    admin_client.post(f"/administration/production/deploy/{deployed_agent_of(pause)}")
    with at(pause.due_at + FAILED_FIRE_RETRY + timedelta(seconds=1)):
        assert fire_due_batch() == 1
    assert Pause.objects.get(pk=pause.pk).verdict == "APPROVED"


def deployed_agent_of(pause: Pause) -> str:
    return str(pause.agent_id)


@pytest.mark.usefixtures("continuations_queued")
def test_a_restored_pause_gets_a_live_timer_at_its_original_deadline(
    alice_client, approver_client, admin_client
):
    pause = paused_with(alice_client, "AUTO_REJECT")
    approver_client.post(f"/agents/{pause.subject_id}/resume", {"verdict": "APPROVED"}, format="json")
    admin_client.post(f"/administration/production/undeploy/{pause.agent_id}")
    run_queued_tasks()  # the continuation cannot start: the pause is restored
    restored = Pause.objects.get(pk=pause.pk)
    assert restored.status == PauseStatus.PENDING and restored.due_at == pause.due_at
    assert Schedule.objects.get(pk=restored.schedule_id).next_run == pause.due_at + BACKSTOP


def test_timeouts_fire_in_batches_each_failure_isolated(alice_client, settings, monkeypatch):
    pauses = [paused_with(alice_client, "AUTO_REJECT") for _ in range(5)]
    settings.HITL_TIMEOUT_BATCH_SIZE = 2
    import approvals.timers as timers

    original = timers.apply_timeout

    def flaky(pause):
        if pause.id == pauses[1].id:
            raise RuntimeError("boom")
        return original(pause)

    monkeypatch.setattr(timers, "apply_timeout", flaky)
    latest = max(p.due_at for p in pauses)
    with at(latest):
        assert [fire_due_batch(), fire_due_batch(), fire_due_batch(), fire_due_batch()] == [2, 2, 1, 0]
    statuses = [Pause.objects.get(pk=p.pk).verdict for p in pauses]
    assert statuses == ["REJECTED", "", "REJECTED", "REJECTED", "REJECTED"]


def fire_timers_of(*pauses: Pause) -> None:
    """Travel past the last deadline, fire every due timer and run the continuations."""
    with at(max(p.due_at for p in pauses) + timedelta(seconds=1)):
        assert fire_due_batch() == len(pauses)
        run_queued_tasks()
    assert {Pause.objects.get(pk=p.pk).decided_by for p in pauses} == {"system:timeout"}


def timed_out_tool_result(client, http_recorder, policy: str) -> dict:
    """The result the model reads for a gated transfer whose tool-level timeout fired under ``policy``."""
    agent = payments_agent(
        http_recorder.url,
        tool_approvals={
            "requireApproval": ["transfer_*"],
            "timeoutPolicy": policy,
            "approvalTimeout": "PT1M",
        },
    )
    conversation_id = start(client, deployed_agent(agent))
    assert say(client, conversation_id, "please transfer 100 to bob").json()["state"] == "AWAITING_HUMAN"
    fire_timers_of(Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING))
    snapshot = client.get(f"/agents/{conversation_id}").json()
    assert snapshot["state"] == "READY", snapshot
    (result,) = json.loads(snapshot["output"][-1].removeprefix("Done: "))
    return result


def test_timeout_output_says_no_reviewer_decided(alice_client, http_recorder):
    """An automated decision never claims a human: not in a rule pause's output, not in a tool result."""
    rule_rejected = paused_with(alice_client, "AUTO_REJECT")
    rule_approved = paused_with(alice_client, "AUTO_APPROVE")
    fire_timers_of(rule_rejected, rule_approved)
    tool_rejected = timed_out_tool_result(alice_client, http_recorder, "AUTO_REJECT")
    tool_approved = timed_out_tool_result(alice_client, http_recorder, "AUTO_APPROVE")

    rejected_output = alice_client.get(f"/agents/{rule_rejected.subject_id}").json()["output"]
    assert rejected_output == [
        "No reviewer decided in time; the request was rejected automatically (policy AUTO_REJECT)."
    ]
    assert alice_client.get(f"/agents/{rule_approved.subject_id}").json()["output"] == ["Deletion APPROVED."]
    assert tool_rejected["status"] == "REJECTED_BY_REVIEWER"  # the status EDDI fixes
    assert tool_rejected["result"] == {
        "status": "REJECTED_BY_REVIEWER",
        "tool": "transfer_funds",
        "note": "Automatic rejected due to timeout (policy: AUTO_REJECT)",
        "instruction": "No reviewer decided in time; the request was rejected automatically (policy AUTO_REJECT). "
        "Do not retry this exact call; explain the situation to the user and offer alternatives.",
    }
    assert tool_approved["status"] == "OK"
    assert (
        len([r for r in http_recorder.requests if r["path"] == "/transfers"]) == 1
    )  # only the approved one ran
    everything = json.dumps([rejected_output, tool_rejected, tool_approved])
    assert "human" not in everything and "The reviewer declined" not in everything


def test_a_human_rejection_keeps_the_reference_wording(alice_client, approver_client, http_recorder):
    rule = paused_with(alice_client, "AUTO_REJECT")
    approver_client.post(
        f"/agents/{rule.subject_id}/resume", {"verdict": "REJECTED", "note": "no"}, format="json"
    )
    run_queued_tasks()

    output = alice_client.get(f"/agents/{rule.subject_id}").json()["output"]
    assert output == ["This action was rejected by a human reviewer. Reason: no"]


def test_hitl_decision_automated_template_variable(alice_client, approver_client):
    """``{memory.current.hitlDecisionAutomated}`` is true for a timeout's decision, false for a human's."""
    document = account_bot(hitlConfig={"timeoutPolicy": "AUTO_APPROVE", "approvalTimeout": "PT15M"})
    document["workflows"][0]["tasks"][2]["outputs"][0]["texts"] = [
        "Deletion {memory.current.hitlDecision} (automated: {memory.current.hitlDecisionAutomated})."
    ]
    agent_id = deployed_agent(document)
    by_timer = Pause.objects.get(subject_id=paused_conversation(alice_client, agent_id))
    by_human = Pause.objects.get(subject_id=paused_conversation(alice_client, agent_id))
    rejected_by_timer = paused_with(alice_client, "AUTO_REJECT")

    approver_client.post(f"/agents/{by_human.subject_id}/resume", {"verdict": "APPROVED"}, format="json")
    run_queued_tasks()
    fire_timers_of(by_timer, rejected_by_timer)

    def output(pause: Pause) -> list[str]:
        return alice_client.get(f"/agents/{pause.subject_id}").json()["output"]

    def outputs_of_last_step(pause: Pause) -> dict:
        return (
            ConversationStep.objects.filter(conversation_id=pause.subject_id)
            .order_by("-index")
            .first()
            .outputs
        )

    assert output(by_timer) == ["Deletion APPROVED (automated: true)."]
    assert output(by_human) == ["Deletion APPROVED (automated: false)."]
    assert outputs_of_last_step(rejected_by_timer)["hitlDecisionAutomated"] is True
    assert outputs_of_last_step(by_human)["hitlDecisionAutomated"] is False


def test_an_automated_decider_other_than_a_timeout_is_named_not_passed_off_as_a_reviewer():
    guard = Pause(
        verdict="REJECTED",
        decided_by="system:no-progress",
        automated=True,
        note="Automatic reject-all: repeated tool-call pause made no progress",
    )
    person_over_mcp = Pause(verdict="REJECTED", decided_by="mcp:ops", automated=False, note="")

    assert rejection_text(guard) == (
        "The request was rejected automatically by system:no-progress, not by a "
        "reviewer. Reason: Automatic reject-all: repeated tool-call pause made no progress"
    )
    assert rejection_text(person_over_mcp) == "This action was rejected by a human reviewer."
