"""The no-progress guard and the cap on automated approvals per turn."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine

from approvals.models import AuditEntry, Pause, PauseStatus
from approvals.timers import fire_due_batch
from conversations.models import Conversation
from harnesses.agents import payments_agent
from harnesses.factories import deployed_agent, say, start
from harnesses.queue_drain import run_queued_tasks
from toolgate.models import PendingToolBatch

pytestmark = pytest.mark.django_db

SAME_AGAIN = {"amount": 100, "to": "bob"}


def looping_agent(url, *, args_after=SAME_AGAIN, **approvals):
    """A model that asks for the same transfer again after every tool result (a new call id each time)."""
    script = [
        {
            "when": {"afterToolResults": True},
            "toolCalls": [{"id": "", "name": "transfer_funds", "arguments": args_after}],
        },
        {
            "when": {"inputContains": "transfer"},
            "toolCalls": [{"id": "", "name": "transfer_funds", "arguments": SAME_AGAIN}],
        },
    ]
    return payments_agent(
        url,
        script=script,
        tool_approvals={
            "requireApproval": ["transfer_*"],
            "timeoutPolicy": "AUTO_APPROVE",
            "approvalTimeout": "PT1M",
            **approvals,
        },
    )


def timer_decides(pause: Pause) -> None:
    with time_machine.travel(pause.due_at + timedelta(seconds=1), tick=False):
        assert fire_due_batch() == 1
        run_queued_tasks()


def test_no_progress_after_an_automated_approval_waits_for_a_human(alice_client, http_recorder):
    conversation_id = start(alice_client, deployed_agent(looping_agent(http_recorder.url)))
    say(alice_client, conversation_id, "transfer")
    first = Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)
    timer_decides(first)
    second = Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)
    assert second.timeout_policy == "WAIT_INDEFINITELY" and second.due_at is None
    entry = AuditEntry.objects.get(pause_id=second.id, verb="hitl.tool.no_progress")
    assert entry.actor == "system:no-progress" and entry.detail["action"] == "WAIT_FOR_HUMAN"


def test_argument_reordering_cannot_defeat_the_no_progress_guard(alice_client, http_recorder):
    reordered = {"to": "bob", "amount": 100}
    conversation_id = start(
        alice_client, deployed_agent(looping_agent(http_recorder.url, args_after=reordered))
    )
    say(alice_client, conversation_id, "transfer")
    timer_decides(Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING))
    second = Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)
    assert AuditEntry.objects.filter(pause_id=second.id, verb="hitl.tool.no_progress").exists()


@pytest.mark.django_db(transaction=True)  # the guard acts once the re-pause committed
def test_on_no_progress_auto_reject_rejects_the_repeat_at_once(alice_client, http_recorder):
    conversation_id = start(
        alice_client, deployed_agent(looping_agent(http_recorder.url, onNoProgress="AUTO_REJECT"))
    )
    say(alice_client, conversation_id, "transfer")
    timer_decides(Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING))
    first, second = Pause.objects.filter(subject_id=conversation_id).order_by("paused_at")[:2]
    assert (first.verdict, first.decided_by) == ("APPROVED", "system:timeout")
    assert (second.verdict, second.decided_by) == ("REJECTED", "system:no-progress")
    run_queued_tasks()
    # only the automated approval ran the tool; the repeat was rejected without running
    assert len([r for r in http_recorder.requests if r["path"] == "/transfers"]) == 1


@pytest.mark.django_db(transaction=True)  # the guard acts once the re-pause committed
def test_on_no_progress_abort_cancels_the_repeat(alice_client, http_recorder):
    conversation_id = start(
        alice_client, deployed_agent(looping_agent(http_recorder.url, onNoProgress="ABORT"))
    )
    say(alice_client, conversation_id, "transfer")
    timer_decides(Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING))
    second = Pause.objects.filter(subject_id=conversation_id).order_by("-paused_at").first()
    assert (second.status, second.decided_by) == (PauseStatus.CANCELLED, "system:no-progress")
    assert Conversation.objects.get(pk=conversation_id).state == "EXECUTION_INTERRUPTED"


def test_max_auto_approvals_per_turn_means_what_it_says(alice_client, http_recorder):
    """With a maximum of 2, exactly two automated approvals happen in the turn, then a human must decide."""
    script = [
        {
            "when": {"afterToolResults": True},
            "toolCalls": [{"id": "", "name": "transfer_funds", "arguments": {"amount": 2, "to": "bob"}}],
        },
        {
            "when": {"inputContains": "transfer"},
            "toolCalls": [{"id": "", "name": "transfer_funds", "arguments": {"amount": 1, "to": "bob"}}],
        },
    ]
    agent = payments_agent(
        http_recorder.url,
        script=script,
        tool_approvals={
            "requireApproval": ["transfer_*"],
            "timeoutPolicy": "AUTO_APPROVE",
            "approvalTimeout": "PT1M",
            "maxAutoApprovalsPerTurn": 1,
        },
    )
    conversation_id = start(alice_client, deployed_agent(agent))
    say(alice_client, conversation_id, "transfer")
    first = Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)
    assert first.timeout_policy == "AUTO_APPROVE"
    timer_decides(first)  # automated approval number 1 (the maximum)
    second = Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)
    assert PendingToolBatch.objects.get(pause=second).auto_approve_count == 1
    assert second.timeout_policy == "WAIT_INDEFINITELY"
    assert AuditEntry.objects.filter(pause_id=second.id, verb="hitl.tool.auto_approve_cap").exists()


def test_zero_auto_approvals_means_a_tool_pause_is_never_auto_approved(alice_client, http_recorder):
    agent = payments_agent(
        http_recorder.url,
        tool_approvals={
            "requireApproval": ["transfer_*"],
            "timeoutPolicy": "AUTO_APPROVE",
            "approvalTimeout": "PT1M",
            "maxAutoApprovalsPerTurn": 0,
        },
    )
    conversation_id = start(alice_client, deployed_agent(agent))
    say(alice_client, conversation_id, "transfer")
    pause = Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)
    assert pause.timeout_policy == "WAIT_INDEFINITELY"


def test_a_human_approval_resets_the_automated_count(alice_client, approver_client, http_recorder):
    conversation_id = start(alice_client, deployed_agent(looping_agent(http_recorder.url)))
    say(alice_client, conversation_id, "transfer")
    approver_client.post(f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json")
    run_queued_tasks()
    second = Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)
    assert PendingToolBatch.objects.get(pause=second).auto_approve_count == 0
    assert second.timeout_policy == "AUTO_APPROVE"
    assert not AuditEntry.objects.filter(pause_id=second.id, verb__startswith="hitl.tool.").exists()
