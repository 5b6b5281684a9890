"""The timer drainer: one at a time across clusters, and a backlog shared with idle workers."""

from __future__ import annotations

import threading

import pytest
import time_machine
from django.db import connections

from approvals.models import Pause
from approvals.timers import BURST_FUNC, drain_due_timers, fire_due_burst
from harnesses.factories import account_bot, deployed_agent, paused_conversation
from harnesses.queue_drain import queued_functions
from harnesses.users import client_for, make_user


def _paused(client, count):
    agent_id = deployed_agent(
        account_bot(hitlConfig={"timeoutPolicy": "AUTO_REJECT", "approvalTimeout": "PT1M"})
    )
    return [Pause.objects.get(subject_id=paused_conversation(client, agent_id)) for _ in range(count)]


@pytest.mark.django_db(transaction=True)
def test_only_one_drainer_runs_at_a_time(settings):
    settings.HITL_TIMER_DRAIN_CHAIN = False
    results = {}
    first_running = threading.Event()

    def first():
        try:
            from approvals import timers

            original_sleep = timers.time.sleep

            def signalling_sleep(seconds):
                first_running.set()
                original_sleep(seconds)

            timers.time.sleep = signalling_sleep
            try:
                results["first"] = drain_due_timers(run_seconds=1.5, poll_seconds=0.05)
            finally:
                timers.time.sleep = original_sleep
        finally:
            connections.close_all()

    thread = threading.Thread(target=first)
    thread.start()
    assert first_running.wait(10)
    results["second"] = drain_due_timers(run_seconds=1.0)
    thread.join(10)
    assert results["second"] == {"status": "another drainer is running"}
    assert results["first"]["status"] == "drained"


@pytest.mark.django_db
def test_a_full_batch_hands_the_backlog_to_idle_workers(settings):
    settings.HITL_TIMER_DRAIN_CHAIN = False
    settings.HITL_TIMEOUT_BATCH_SIZE = 2
    pauses = _paused(client_for(make_user("alice")), 5)
    with time_machine.travel(max(p.due_at for p in pauses), tick=True):
        report = drain_due_timers(run_seconds=0.3, poll_seconds=0.05)
    assert report["fired"] == 5
    assert BURST_FUNC in queued_functions()
    assert {p.verdict for p in Pause.objects.filter(pk__in=[p.pk for p in pauses])} == {"REJECTED"}


@pytest.mark.django_db
def test_a_burst_fires_until_nothing_is_overdue(settings):
    settings.HITL_TIMEOUT_BATCH_SIZE = 2
    pauses = _paused(client_for(make_user("alice")), 5)
    with time_machine.travel(max(p.due_at for p in pauses), tick=False):
        assert fire_due_burst() == 5
        assert fire_due_burst() == 0
