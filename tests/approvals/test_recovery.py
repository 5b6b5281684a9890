"""Crash recovery and retention: repair what a dead process left, never end a live pause."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
import time_machine
from django.core.management import call_command
from django.utils import timezone
from django_q.models import Schedule

from approvals.continuation_runs import run_continuation
from approvals.models import AuditEntry, Pause, PauseStatus
from approvals.recovery import run_recovery, run_retention
from conversations.models import Conversation
from harnesses.factories import account_bot, deployed_agent, paused_conversation
from harnesses.queue_drain import run_queued_tasks

pytestmark = pytest.mark.django_db
BACKSTOP = timedelta(seconds=120)  # HITL_TIMER_BACKSTOP_SECONDS: the schedule backs up the drainer


def paused(client, config=None) -> Pause:
    document = account_bot(hitlConfig=config) if config is not None else account_bot()
    return Pause.objects.get(subject_id=paused_conversation(client, deployed_agent(document)))


def decide(client, pause: Pause) -> None:
    assert (
        client.post(f"/agents/{pause.subject_id}/resume", {"verdict": "APPROVED"}, format="json").status_code
        == 200
    )


def test_missing_timers_of_finite_pauses_are_rearmed_at_their_original_deadline(alice_client):
    pause = paused(alice_client)
    Schedule.objects.filter(pk=pause.schedule_id).delete()
    assert run_recovery()["rearmedTimers"] == 1
    rearmed = Pause.objects.get(pk=pause.pk)
    assert Schedule.objects.get(pk=rearmed.schedule_id).next_run == pause.due_at + BACKSTOP
    assert run_recovery()["rearmedTimers"] == 0  # idempotent


def test_an_overdue_pause_without_a_timer_is_rearmed_to_fire_at_once(alice_client):
    pause = paused(alice_client)
    Schedule.objects.filter(pk=pause.schedule_id).delete()
    later = pause.due_at + timedelta(hours=1)
    with time_machine.travel(later, tick=False):
        run_recovery()
        assert (
            Schedule.objects.get(pk=Pause.objects.get(pk=pause.pk).schedule_id).next_run == later + BACKSTOP
        )


def test_wait_indefinitely_pauses_are_never_touched(alice_client):
    pause = paused(alice_client, config={})
    with time_machine.travel(timezone.now() + timedelta(days=30), tick=False):
        report = run_recovery()
    assert report == {"rearmedTimers": 0, "restoredContinuations": 0, "interruptedTurns": 0}
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING


@pytest.mark.usefixtures("continuations_queued")
def test_a_continuation_whose_worker_died_is_restored_to_pending_with_its_deadline(
    alice_client, approver_client
):
    pause = paused(alice_client)
    decide(approver_client, pause)
    # a worker claimed it and died: the lease is set, nothing was committed
    Pause.objects.filter(pk=pause.pk).update(lease_until=timezone.now() + timedelta(seconds=120))
    assert run_recovery()["restoredContinuations"] == 0  # a live lease is never touched
    with time_machine.travel(timezone.now() + timedelta(seconds=121), tick=False):
        assert run_recovery()["restoredContinuations"] == 1
    restored = Pause.objects.get(pk=pause.pk)
    assert restored.status == PauseStatus.PENDING and restored.due_at == pause.due_at
    assert Conversation.objects.get(pk=pause.subject_id).state == "AWAITING_HUMAN"
    assert AuditEntry.objects.filter(pause_id=pause.pk, verb="hitl.restored").count() == 1


@pytest.mark.usefixtures("continuations_queued")
def test_a_redelivered_continuation_after_its_worker_died_is_restored_not_run_again(
    alice_client, approver_client
):
    pause = paused(alice_client)
    decide(approver_client, pause)
    Pause.objects.filter(pk=pause.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert run_continuation(str(pause.pk)) == "restored"
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING
    assert run_continuation(str(pause.pk)) == "skipped"


@pytest.mark.usefixtures("continuations_queued")
def test_a_continuation_nobody_picked_up_for_too_long_is_restored(alice_client, approver_client, settings):
    pause = paused(alice_client)
    decide(approver_client, pause)
    assert run_recovery()["restoredContinuations"] == 0
    later = timezone.now() + timedelta(seconds=settings.HITL_CONTINUATION_START_TIMEOUT_SECONDS + 1)
    with time_machine.travel(later, tick=False):
        assert run_recovery()["restoredContinuations"] == 1
        assert run_queued_tasks() == 1  # the queued task finally runs: it finds nothing to do
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING


def test_a_turn_left_in_progress_without_a_pause_becomes_interrupted(alice_client, settings):
    from harnesses.factories import start

    conversation_id = start(alice_client, deployed_agent())
    Conversation.objects.filter(pk=conversation_id).update(
        state="IN_PROGRESS", turn_started_at=timezone.now()
    )
    assert run_recovery()["interruptedTurns"] == 0  # a running turn is left alone
    with time_machine.travel(
        timezone.now() + timedelta(seconds=settings.HITL_STALE_TURN_SECONDS + 1), tick=False
    ):
        assert run_recovery()["interruptedTurns"] == 1
    assert Conversation.objects.get(pk=conversation_id).state == "EXECUTION_INTERRUPTED"
    assert AuditEntry.objects.filter(subject_id=conversation_id, verb="hitl.turn.interrupted").count() == 1


def test_recover_in_progress_can_be_switched_off(alice_client, settings):
    from harnesses.factories import start

    settings.HITL_RECOVER_IN_PROGRESS = False
    conversation_id = start(alice_client, deployed_agent())
    Conversation.objects.filter(pk=conversation_id).update(
        state="IN_PROGRESS", turn_started_at=timezone.now()
    )
    with time_machine.travel(timezone.now() + timedelta(hours=2), tick=False):
        run_recovery()
    assert Conversation.objects.get(pk=conversation_id).state == "IN_PROGRESS"


def test_crash_recovery_can_be_switched_off(alice_client, settings):
    settings.HITL_CRASH_RECOVERY_ENABLED = False
    pause = paused(alice_client)
    Schedule.objects.filter(pk=pause.schedule_id).delete()
    assert run_recovery() == {"status": "disabled"}


def test_retention_is_off_by_default(alice_client):
    pause = paused(alice_client, config={})
    with time_machine.travel(timezone.now() + timedelta(days=3650), tick=False):
        assert run_retention() == 0
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING


def test_retention_cancels_pauses_older_than_max_age_as_system_retention(alice_client, settings):
    settings.HITL_PENDING_MAX_AGE = "P7D"
    old = paused(alice_client, config={})
    with time_machine.travel(timezone.now() + timedelta(days=6), tick=False):
        young = paused(alice_client, config={})
    with time_machine.travel(old.paused_at + timedelta(days=7), tick=False):
        assert run_retention() == 1
    assert Pause.objects.get(pk=old.pk).status == PauseStatus.CANCELLED
    assert Pause.objects.get(pk=young.pk).status == PauseStatus.PENDING
    entry = AuditEntry.objects.get(pause_id=old.pk, verb="hitl.approval")
    assert (entry.verdict, entry.actor, entry.automated, entry.detail["mode"]) == (
        "CANCELLED",
        "system:retention",
        True,
        "RETENTION",
    )


def test_hitl_recover_command_prints_its_report(alice_client):
    pause = paused(alice_client)
    Schedule.objects.filter(pk=pause.schedule_id).delete()
    out = StringIO()
    call_command("hitl_recover", stdout=out)
    assert '"rearmedTimers": 1' in out.getvalue()


def test_periodic_maintenance_schedules_exist_after_migrate():
    names = set(Schedule.objects.filter(name__startswith="hitl-").values_list("name", flat=True))
    assert {"hitl-timer-drain", "hitl-recovery", "hitl-retention"} <= names


@pytest.mark.usefixtures("continuations_queued")
def test_a_duplicate_delivery_never_runs_a_continuation_whose_claim_is_alive(alice_client, approver_client):
    from approvals.continuation_runs import ContinuationStillClaimed

    pause = paused(alice_client)
    decide(approver_client, pause)
    Pause.objects.filter(pk=pause.pk).update(lease_until=timezone.now() + timedelta(seconds=60))
    with pytest.raises(ContinuationStillClaimed):  # django-q2 will deliver it again later
        run_continuation(str(pause.pk))
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.RESOLVING
