"""The deciding process runs the continuation, under a short lease its heartbeat keeps alive.

A process that dies lets the lease expire: the drainer's sweep puts the pause back in the inbox (or
interrupts the dead turn) within one lease plus one sweep, audited, never run twice.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
import time_machine
from django.db import connections
from django.utils import timezone

from approvals.actors import actor_for_user
from approvals.continuation_runs import decide_and_continue, run_claimed_continuation
from approvals.decision_input import DecisionInput
from approvals.decisions import record_decision
from approvals.leases import kept_alive
from approvals.models import AuditEntry, Engine, Pause, PauseStatus, SubjectType
from approvals.recovery import recover_expired_leases
from approvals.timers import drain_due_timers
from conversations.models import Conversation, ConversationState
from harnesses.factories import account_bot, deployed_agent, paused_conversation, slow_account_bot
from harnesses.queue_drain import queued_functions, run_queued_tasks

CONTINUATION = "approvals.continuation_runs.run_continuation"


def paused(client, document=None) -> Pause:
    return Pause.objects.get(
        subject_id=paused_conversation(client, deployed_agent(document or account_bot()))
    )


def continued_by_the_q_cluster(pause: Pause) -> None:
    """The continuation is waiting in the q-cluster's queue, and running the queue continues the conversation."""
    assert queued_functions() == [CONTINUATION]
    run_queued_tasks()
    assert Conversation.objects.get(pk=pause.subject_id).state == ConversationState.READY


def decision_for(pause: Pause, user) -> dict:
    return {
        "surface": Engine.REGULAR,
        "subject_type": SubjectType.CONVERSATION,
        "subject_id": pause.subject_id,
        "decision": DecisionInput(verdict="APPROVED"),
        "actor": actor_for_user(user),
    }


@pytest.mark.django_db
def test_the_heartbeat_renews_a_lease_while_the_work_runs(settings):
    settings.HITL_CONTINUATION_LEASE_SECONDS = 1
    settings.HITL_LEASE_RENEW_SECONDS = 0.05
    renewals: list[object] = []
    with kept_alive(renewals.append, what="test"):
        time.sleep(0.4)
    count = len(renewals)
    assert count >= 3
    time.sleep(0.2)
    assert len(renewals) == count  # the heartbeat stops with the work


@pytest.mark.django_db
def test_work_shorter_than_one_renewal_never_renews(settings):
    settings.HITL_LEASE_RENEW_SECONDS = 5
    renewals: list[object] = []
    with kept_alive(renewals.append, what="test"):
        pass
    assert renewals == []


@pytest.mark.django_db
def test_resume_wait_runs_the_continuation_in_the_deciding_process(alice_client, approver_client):
    pause = paused(alice_client)
    response = approver_client.post(
        f"/agents/{pause.subject_id}/resume?wait=10", {"verdict": "APPROVED"}, format="json"
    )
    assert response.status_code == 200
    body = response.json()
    assert body["state"] == "READY" and body["output"] == ["Deletion APPROVED."]
    assert body["lastDecision"]["decidedBy"] == "approver"
    assert queued_functions() == []  # nothing was handed to the q-cluster
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.RESOLVED


@pytest.mark.django_db
@pytest.mark.usefixtures("continuations_queued")
def test_resume_without_wait_hands_the_continuation_to_the_q_cluster(alice_client, approver_client):
    pause = paused(alice_client)
    response = approver_client.post(
        f"/agents/{pause.subject_id}/resume", {"verdict": "APPROVED"}, format="json"
    )
    assert response.json()["state"] == "IN_PROGRESS"
    assert queued_functions() == [CONTINUATION]
    assert Pause.objects.get(pk=pause.pk).lease_until is None  # not claimed: a worker will claim it
    run_queued_tasks()
    assert Conversation.objects.get(pk=pause.subject_id).state == ConversationState.READY


@pytest.mark.django_db
@pytest.mark.usefixtures("continuations_queued")
def test_a_continuation_queued_under_its_pre_rename_dotted_path_still_runs(alice_client, approver_client):
    """Queues of deployed databases hold ``approvals.continuations.run_continuation``; it still resolves."""
    from django_q.models import OrmQ
    from django_q.tasks import async_task

    pause = paused(alice_client)
    approver_client.post(f"/agents/{pause.subject_id}/resume", {"verdict": "APPROVED"}, format="json")
    OrmQ.objects.all().delete()
    async_task("approvals.continuations.run_continuation", str(pause.id), group="hitl")
    assert run_queued_tasks() == 1
    assert Conversation.objects.get(pk=pause.subject_id).state == ConversationState.READY


@pytest.mark.django_db
def test_resume_without_wait_runs_a_quick_continuation_once_its_answer_is_sent(alice_client, approver_client):
    """The answer is the decision (IN_PROGRESS, as it was when sent); the server closes the response
    and the same process runs the continuation: nothing is queued, the conversation is READY after."""
    pause = paused(alice_client)
    response = approver_client.post(
        f"/agents/{pause.subject_id}/resume", {"verdict": "APPROVED"}, format="json"
    )
    assert response.status_code == 200 and response.json()["state"] == "IN_PROGRESS"
    assert queued_functions() == []
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.RESOLVED
    snapshot = alice_client.get(f"/agents/{pause.subject_id}").json()
    assert snapshot["state"] == "READY" and snapshot["output"] == ["Deletion APPROVED."]


@pytest.mark.django_db
def test_resume_without_wait_queues_a_continuation_that_may_be_slow(alice_client, approver_client):
    """An agent with an httpcalls task: its continuation may take as long as a call, so it is never run
    by the web process after the answer; the q-cluster runs it."""
    pause = paused(alice_client, slow_account_bot())
    response = approver_client.post(
        f"/agents/{pause.subject_id}/resume", {"verdict": "APPROVED"}, format="json"
    )
    assert response.json()["state"] == "IN_PROGRESS"
    continued_by_the_q_cluster(pause)


@pytest.mark.django_db
def test_a_continuation_claimed_for_after_the_answer_but_never_run_is_back_in_the_inbox(
    alice_client, approver
):
    """The web process died after sending its answer and before running the continuation."""
    from approvals.continuation_runs import decide_and_continue_later

    pause = paused(alice_client)
    claimed = decide_and_continue_later(**decision_for(pause, approver))
    assert claimed.outcome == "claimed" and claimed.then is not None and queued_functions() == []
    with time_machine.travel(claimed.pause.lease_until + timedelta(seconds=1), tick=False):
        assert recover_expired_leases()["restoredContinuations"] == 1
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING
    assert AuditEntry.objects.filter(pause_id=pause.pk, verb="hitl.restored").count() == 1


@pytest.mark.django_db
def test_q_cluster_only_deployment_hands_every_continuation_to_the_q_cluster(
    alice_client, approver_client, settings
):
    settings.HITL_CONTINUE_INLINE = False
    pause = paused(alice_client)
    response = approver_client.post(
        f"/agents/{pause.subject_id}/resume?wait=0.3", {"verdict": "APPROVED"}, format="json"
    )
    assert response.status_code == 200 and response.json()["state"] == "IN_PROGRESS"  # nobody ran it here
    continued_by_the_q_cluster(pause)


@pytest.mark.django_db
def test_a_decision_claimed_here_but_never_run_is_back_in_the_inbox_after_one_lease(alice_client, approver):
    """The deciding process died between the decision's commit and its continuation."""
    pause = paused(alice_client)
    decided = record_decision(**decision_for(pause, approver), continue_here=True)
    claimed = decided.pause
    assert decided.claimed_here and queued_functions() == []
    assert recover_expired_leases() == {"restoredContinuations": 0, "interruptedTurns": 0}  # lease alive
    with time_machine.travel(claimed.lease_until + timedelta(seconds=1), tick=False):
        assert recover_expired_leases()["restoredContinuations"] == 1
    restored = Pause.objects.get(pk=pause.pk)
    assert (restored.status, restored.due_at) == (PauseStatus.PENDING, pause.due_at)
    assert Conversation.objects.get(pk=pause.subject_id).state == ConversationState.AWAITING_HUMAN
    entry = AuditEntry.objects.get(pause_id=pause.pk, verb="hitl.restored")
    assert entry.detail["previousDecision"] == {"verdict": "APPROVED", "decidedBy": "approver"}
    assert run_claimed_continuation(claimed).outcome in ("restored", "continued")
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING  # the late runner changed nothing


@pytest.mark.django_db
def test_a_turn_whose_heartbeat_stopped_is_interrupted_when_its_lease_expires(alice_client):
    conversation_id = paused_conversation(alice_client, deployed_agent(account_bot(hitlConfig={})))
    Pause.objects.filter(subject_id=conversation_id).delete()
    now = timezone.now()
    Conversation.objects.filter(pk=conversation_id).update(
        state=ConversationState.IN_PROGRESS, turn_started_at=now, turn_alive_until=now + timedelta(seconds=15)
    )
    assert recover_expired_leases()["interruptedTurns"] == 0
    with time_machine.travel(now + timedelta(seconds=16), tick=False):
        assert recover_expired_leases()["interruptedTurns"] == 1
    assert Conversation.objects.get(pk=conversation_id).state == ConversationState.EXECUTION_INTERRUPTED


@pytest.mark.django_db
def test_the_drainer_sweeps_expired_leases(alice_client, approver):
    pause = paused(alice_client)
    record_decision(**decision_for(pause, approver), continue_here=True)
    Pause.objects.filter(pk=pause.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    drain_due_timers(run_seconds=0.2)
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING


@pytest.mark.django_db(transaction=True)
def test_a_long_continuation_keeps_its_short_claim_alive(alice_client, approver, settings, loopback_server):
    settings.HITL_CONTINUATION_LEASE_SECONDS = 1
    settings.HITL_LEASE_RENEW_SECONDS = 0.2
    loopback_server.respond("/slow", json_body={"ok": True}, delay_seconds=2.5)
    document = account_bot()
    document["workflows"][0]["tasks"][1]["rules"][0]["actions"].append("slow")
    document["workflows"][0]["tasks"].insert(
        2,
        {
            "id": "slow",
            "type": "httpcalls",
            "targetServerUrl": loopback_server.url,
            "calls": [{"name": "slow", "actions": ["slow"], "request": {"method": "POST", "path": "/slow"}}],
        },
    )
    pause = paused(alice_client, document)
    sweeps: list[dict] = []

    def sweep_while_it_runs() -> None:
        try:
            while not loopback_server.received:
                time.sleep(0.02)
            for _ in range(8):  # 2 s of sweeps during the 2.5 s call: four leases' worth
                sweeps.append(recover_expired_leases())
                time.sleep(0.25)
        finally:
            connections.close_all()

    sweeper = threading.Thread(target=sweep_while_it_runs)
    sweeper.start()
    decide_and_continue(**decision_for(pause, approver))
    continued = Pause.objects.get(pk=pause.pk)
    sweeper.join(10)
    assert continued.status == PauseStatus.RESOLVED
    assert sweeps and all(report["restoredContinuations"] == 0 for report in sweeps)
    assert [r.path for r in loopback_server.received] == ["/slow"]
    assert not AuditEntry.objects.filter(pause_id=pause.pk, verb="hitl.restored").exists()
