"""Escalation steps and reminders are told once with two timer q-clusters running (docs/approvals-routing.md).

Two timer clusters and a work cluster run as real processes on the test database. Paused conversations
routed to a group have an escalation step two seconds after they open and a reminder three seconds
after; the drainer's sweep (on whichever timer cluster holds the drain lock) queues each event as it
falls due, and each event's task is also queued three more times on the timer queue, becoming
deliverable over the half second after it is due, so both clusters take copies and race. Then: every
event has exactly one claimed notice, and the mail (Django's file backend) holds exactly one message per
recipient and event.
"""

from __future__ import annotations

import random
import re
import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from django.db import transaction
from django_q.models import OrmQ
from django_q.tasks import async_task

from approvals.models import Notice, Pause, PauseStatus
from approvals.notices import ESCALATED, REMINDER, SEND_TASK
from harnesses.clusters import Clusters
from harnesses.factories import account_bot, deployed_agent, paused_conversation
from harnesses.live_stack import LiveStack, eventually
from harnesses.users import client_for, make_user
from tests.e2e.test_live_timer_races import _cluster_env, _spawn

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.long]

PAUSES = 8
COPIES = 3
CONFIG = {
    "approvers": {"groups": ["finance"]},
    "escalation": [{"after": "PT2S", "approvers": {"groups": ["on-call"]}, "notify": True}],
    "timeoutPolicy": "AUTO_REJECT",
    "approvalTimeout": "PT60S",
    "remindBefore": "PT57S",
}


def person(username: str, group: str):
    user = make_user(username, "approver")
    user.email = f"{username}@example.org"
    user.save(update_fields=["email"])
    user.groups.add(Group.objects.get_or_create(name=group)[0])
    return user


def _queue_copies(pauses: list[Pause], rng: random.Random) -> None:
    """Each event's task, three more times on the timer queue, deliverable just after it is due."""
    timers = settings.HITL_TIMER_CLUSTER
    due: dict[str, object] = {}
    with transaction.atomic():
        for pause in pauses:
            events = ((ESCALATED, 1, pause.paused_at + timedelta(seconds=2)), (REMINDER, 0, pause.remind_at))
            for event, step, at in events:
                for _ in range(COPIES):
                    task_id = async_task(SEND_TASK, str(pause.pk), event, step, cluster=timers)
                    due[task_id] = at + timedelta(seconds=rng.uniform(0, 0.5))
    for row in OrmQ.objects.filter(key=timers):
        if row.task_id() in due:
            OrmQ.objects.filter(pk=row.pk).update(lock=due[row.task_id()])


def test_each_escalation_step_and_reminder_is_sent_once_by_two_timer_clusters(django_db_blocker, tmp_path):
    mail_dir = tmp_path / "mail"
    env = {**_cluster_env(), "EMAIL_URL": f"filemail://{mail_dir}", "HITL_LEASE_SWEEP_SECONDS": "0.5"}
    stack = LiveStack(env=env, log_dir=tmp_path, db_blocker=django_db_blocker)
    clusters = Clusters(stack=stack)
    timers = settings.HITL_TIMER_CLUSTER
    try:
        clusters.started += [
            _spawn(stack, "qcluster-timers-a", timers),
            _spawn(stack, "qcluster-timers-b", timers),
            _spawn(stack, "qcluster-work", None, HITL_Q_WORKERS="1"),
        ]
        person("fred", "finance")
        person("oscar", "on-call")
        for process in clusters.started:
            clusters.wait_working(process)
        agent = deployed_agent(account_bot(hitlConfig=CONFIG))
        owner = client_for(make_user("alice"))
        ids = [paused_conversation(owner, agent) for _ in range(PAUSES)]
        pauses = list(Pause.objects.filter(subject_id__in=ids, status=PauseStatus.PENDING))
        _queue_copies(pauses, random.Random(7))

        def told() -> bool:
            sent = Notice.objects.filter(
                pause__in=pauses, event__in=[ESCALATED, REMINDER], sent_at__isnull=False
            )
            return sent.count() == 2 * PAUSES

        eventually(told, timeout=60, interval=0.2, what="every escalation step and reminder sent")
        time.sleep(1.5)  # the copies still queued find the events claimed: nothing more is sent
    except BaseException:
        print(clusters.output())
        raise
    finally:
        clusters.stop_all()

    assert Notice.objects.filter(pause__in=pauses, event=ESCALATED, step=1).count() == PAUSES
    assert Notice.objects.filter(pause__in=pauses, event=REMINDER).count() == PAUSES
    written = "".join(path.read_text() for path in mail_dir.iterdir())
    subjects = re.findall(r"^Subject: (.*)$", written, flags=re.M)
    escalated = [s for s in subjects if s.startswith("[HITL] Escalated to you: ")]
    reminded = [s for s in subjects if s.startswith("[HITL] Reminder, due ")]
    assert len(escalated) == PAUSES  # oscar, once per pause
    assert len(reminded) == 2 * PAUSES  # fred and oscar (the step opened by then), once per pause
    assert re.findall(r"^To: (.*)$", written, flags=re.M).count("oscar@example.org") == 2 * PAUSES
