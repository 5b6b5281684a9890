"""Timers, recovery and maintenance run on their own django-q2 cluster; django-q2 keeps no successful task.

The rule: everything a deadline depends on is scheduled for, and enqueued on, ``HITL_TIMER_CLUSTER``,
so a backlog on the default queue (continuations, user schedules) never delays it. django-q2 routes
by the schedule's ``cluster`` and the task's queue (``OrmQ.key``); its scheduler only takes the
schedules of its own cluster (the default cluster also those naming none). The live proof that a
backlog does not delay a deadline is in tests/e2e/test_live_timers.py.
"""

from __future__ import annotations

from datetime import timedelta

import django_q.monitor
import django_q.scheduler
import pytest
import time_machine
from django.conf import settings
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.conf import Conf
from django_q.models import OrmQ, Schedule, Task

from approvals.apps import _on_worker_start
from approvals.models import Pause
from approvals.recovery import ensure_maintenance_schedules
from approvals.timers import BURST_FUNC, DRAIN_FUNC, TIMER_FUNC, drain_due_timers, ensure_timer_schedules
from harnesses.factories import account_bot, deployed_agent, paused_conversation, slow_account_bot
from toolgate.apps import _ensure_journal_schedule

pytestmark = pytest.mark.django_db
TIMERS = "hitl-timers"


def queued() -> list[tuple[str, str]]:
    """(queue, function) of every task waiting in the ORM broker."""
    return [(row.key, row.func()) for row in OrmQ.objects.order_by("id")]


def finite_pause(client) -> Pause:
    agent = deployed_agent(
        account_bot(hitlConfig={"timeoutPolicy": "AUTO_REJECT", "approvalTimeout": "PT30S"})
    )
    return Pause.objects.get(subject_id=paused_conversation(client, agent))


def test_the_timer_cluster_is_a_django_q2_alt_cluster():
    assert settings.HITL_TIMER_CLUSTER == TIMERS
    assert TIMERS in settings.Q_CLUSTER["ALT_CLUSTERS"]  # Q_CLUSTER_NAME=hitl-timers needs the entry
    assert Conf.PREFIX == settings.Q_CLUSTER["name"] != TIMERS  # both clusters sign with the same name


def test_timers_recovery_and_maintenance_are_scheduled_on_the_timer_cluster():
    ensure_timer_schedules()
    ensure_maintenance_schedules()
    _ensure_journal_schedule(sender=None)
    periodic = dict(
        Schedule.objects.filter(
            name__in=["hitl-timer-drain", "hitl-recovery", "hitl-retention", "hitl-journal-retention"]
        ).values_list("name", "cluster")
    )
    assert periodic == {
        "hitl-timer-drain": TIMERS,
        "hitl-recovery": TIMERS,
        "hitl-retention": TIMERS,
        "hitl-journal-retention": TIMERS,
    }


def test_a_pause_timer_is_armed_on_the_timer_cluster_and_old_ones_are_moved_there(alice_client):
    pause = finite_pause(alice_client)
    assert Schedule.objects.get(pk=pause.schedule_id).cluster == TIMERS
    Schedule.objects.filter(pk=pause.schedule_id).update(cluster=None)  # armed before the timer cluster
    ensure_timer_schedules()  # run after every migrate
    assert Schedule.objects.get(pk=pause.schedule_id).cluster == TIMERS


def test_the_drainer_and_worker_start_enqueue_only_on_the_timer_queue(alice_client, settings):
    settings.HITL_TIMEOUT_BATCH_SIZE = 1
    for _ in range(2):
        finite_pause(alice_client)
    OrmQ.objects.all().delete()
    _on_worker_start(sender=None)
    assert queued() == [(TIMERS, "approvals.recovery.run_recovery"), (TIMERS, DRAIN_FUNC)]
    OrmQ.objects.all().delete()

    Pause.objects.update(due_at=timezone.now() - timedelta(seconds=1))
    drain_due_timers(run_seconds=0.5, poll_seconds=0.05)  # fires both; a full batch asks for a burst

    mine = [(queue, func) for queue, func in queued() if func in (BURST_FUNC, DRAIN_FUNC)]
    assert (TIMERS, BURST_FUNC) in mine and mine[-1] == (TIMERS, DRAIN_FUNC)  # the hand-over
    assert {queue for queue, _ in mine} == {TIMERS}


def test_the_default_cluster_never_takes_a_timer_schedule_and_the_timer_cluster_does(
    alice_client, monkeypatch
):
    pause = finite_pause(alice_client)
    Schedule.objects.exclude(pk=pause.schedule_id).delete()
    Schedule.objects.create(
        func="approvals.maintenance_tasks.noop",
        name="user-job",
        schedule_type=Schedule.ONCE,
        next_run=timezone.now() - timedelta(seconds=1),
    )
    Schedule.objects.filter(pk=pause.schedule_id).update(next_run=timezone.now() - timedelta(seconds=1))
    OrmQ.objects.all().delete()
    # a q-cluster's scheduler first drops stale connections; here that would close the test's transaction
    monkeypatch.setattr(django_q.scheduler, "close_old_django_connections", lambda: None)

    django_q.scheduler.scheduler(broker=get_broker())  # as the default cluster's scheduler runs
    assert queued() == [(settings.Q_CLUSTER["name"], "approvals.maintenance_tasks.noop")]
    assert Schedule.objects.filter(pk=pause.schedule_id).exists()

    monkeypatch.setattr(Conf, "CLUSTER_NAME", TIMERS)  # as the cluster started with Q_CLUSTER_NAME
    django_q.scheduler.scheduler(broker=get_broker(TIMERS))
    assert queued()[1:] == [(TIMERS, TIMER_FUNC)]


def test_the_monitor_keeps_no_successful_task_and_every_failure(monkeypatch):
    assert Conf.SAVE_LIMIT == -1  # save_limit: nothing reads successes; pruning them cost a lock per task
    monkeypatch.setattr(django_q.monitor, "close_old_django_connections", lambda: None)  # as above
    now = timezone.now()
    package = {
        "name": "t",
        "func": "math.floor",
        "args": (1.5,),
        "kwargs": {},
        "started": now,
        "stopped": now,
        "group": None,
        "cluster": "hitl",
    }
    django_q.monitor.save_task({**package, "id": "ok", "success": True, "result": 1}, get_broker())
    django_q.monitor.save_task({**package, "id": "failed", "success": False, "result": "boom"}, get_broker())
    # only this test's two: a live stack's q-cluster on the same database commits tasks of its own
    saved = Task.objects.filter(id__in=["ok", "failed"]).values_list("id", "success")
    assert list(saved) == [("failed", False)]


def slow_finite_pause(client) -> Pause:
    """A timed pause of an agent with an httpcalls task: its continuation may take as long as a call."""
    document = slow_account_bot(hitlConfig={"timeoutPolicy": "AUTO_REJECT", "approvalTimeout": "PT30S"})
    return Pause.objects.get(subject_id=paused_conversation(client, deployed_agent(document)))


def test_a_timeouts_slow_continuation_runs_on_the_work_cluster_not_the_timer_cluster(
    alice_client, monkeypatch
):
    """The drainer decides on the timer cluster; a continuation that may be slow is queued on the work
    cluster, so it never waits on, or holds, the timers."""
    from approvals.timers import fire_timeout

    pause = slow_finite_pause(alice_client)
    monkeypatch.setattr(Conf, "CLUSTER_NAME", TIMERS)  # as in the process started with Q_CLUSTER_NAME
    OrmQ.objects.all().delete()
    with time_machine.travel(pause.due_at + timedelta(seconds=1), tick=False):
        assert fire_timeout(str(pause.pk)) == "REJECTED"
    assert queued() == [(settings.Q_CLUSTER["name"], "approvals.continuation_runs.run_continuation")]


def test_a_timeouts_quick_continuation_runs_in_the_timers_process(alice_client, monkeypatch):
    """A continuation of local tasks only takes milliseconds: the timer runs it in place, nothing is queued."""
    from approvals.models import PauseStatus
    from approvals.timers import fire_timeout
    from conversations.models import Conversation

    pause = finite_pause(alice_client)
    monkeypatch.setattr(Conf, "CLUSTER_NAME", TIMERS)
    OrmQ.objects.all().delete()
    with time_machine.travel(pause.due_at + timedelta(seconds=1), tick=False):
        assert fire_timeout(str(pause.pk)) == "REJECTED"
    assert queued() == []
    pause.refresh_from_db()
    assert pause.status == PauseStatus.RESOLVED and pause.automated
    conversation = Conversation.objects.get(pk=pause.subject_id)
    assert conversation.state == "READY"
    snapshot = alice_client.get(f"/agents/{conversation.pk}").json()
    assert snapshot["output"][-1].startswith("No reviewer decided in time; the request was rejected")
