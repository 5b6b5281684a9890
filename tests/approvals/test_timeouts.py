"""Timeout policies, fired by the timer drainer with time travel instead of sleeping."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django_q.models import Schedule

from approvals.models import AuditEntry, Pause, PauseStatus
from approvals.timers import FAILED_FIRE_RETRY, TIMER_FUNC, fire_due_batch, fire_timeout
from conversations.models import Conversation
from tests.factories import account_bot, deployed_agent, paused_conversation
from tests.queue_drain import run_queued_tasks

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
    assert (schedule.func, schedule.schedule_type, schedule.next_run) == (TIMER_FUNC, Schedule.ONCE, pause.due_at + BACKSTOP)
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
        "This action was rejected by a human reviewer. Reason: Automatic rejected due to timeout (policy: AUTO_REJECT)"
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
    assert (entry.verdict, entry.actor, entry.detail["mode"]) == ("CANCELLED", "system:timeout", "TIMEOUT_ABORT")


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


def test_a_restored_pause_gets_a_live_timer_at_its_original_deadline(alice_client, approver_client, admin_client):
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
