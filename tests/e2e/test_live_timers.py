"""Timeouts fired by real q-cluster processes: no time travel, no mocks, short deadlines.

- the ``live_stack`` fixture's timer cluster (default settings) decides a PT2S pause by its policy
  within a few seconds of the deadline;
- two timer clusters on the same database fire each of ~40 staggered timers exactly once;
- a backlog of work on the default cluster does not delay a deadline.
"""

from __future__ import annotations

import threading
from collections import Counter
from datetime import datetime, timedelta

import httpx
import pytest
from django.conf import settings
from django.db import connections
from django_q.models import OrmQ, Schedule
from django_q.tasks import async_task

from approvals.models import AuditEntry, Pause
from conversations.models import Conversation
from harnesses import clusters as live_clusters
from harnesses.clusters import Clusters, deploy_agent, paused_conversation
from harnesses.factories import account_bot
from harnesses.live_stack import api_user, eventually

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.long]

clusters = live_clusters.clusters  # fixture

REJECTED_BY_TIMEOUT = (
    "No reviewer decided in time; the request was rejected automatically (policy AUTO_REJECT)."
)
# "within a few seconds of its deadline": the drainer polls four times a second; the rest is slack
# for a loaded test machine.
LATENESS_LIMIT = timedelta(seconds=3)


def timed_agent(policy: str, timeout: str) -> dict:
    return account_bot(
        hitlConfig={
            "approvalTimeout": timeout,
            "timeoutPolicy": policy,
            "pauseReason": f"{policy} after {timeout}",
        }
    )


def due_at_of(pause: Pause) -> datetime:
    """The deadline as opened (a resolved or cancelled pause has its ``due_at`` cleared): the audit
    entry of the pause, checked against ``paused_at`` + the timeout."""
    entry = AuditEntry.objects.get(pause_id=pause.id, verb="hitl.pause")
    return datetime.fromisoformat(entry.detail["dueAt"])


def wait_for_state(client: httpx.Client, conversation_id: str, state: str, timeout: float = 30.0) -> dict:
    def current() -> dict | None:
        body = client.get(f"/agents/{conversation_id}").json()
        return body if body.get("state") == state else None

    return eventually(current, timeout=timeout, what=f"conversation {conversation_id} to become {state}")


def test_auto_approve_pt2s_is_decided_by_system_timeout_on_the_q_cluster(people):
    admin, alice = people["admin"], people["alice"]
    conversation_id = paused_conversation(alice, deploy_agent(admin, timed_agent("AUTO_APPROVE", "PT2S")))
    status = alice.get(f"/agents/{conversation_id}/approval-status").json()
    assert status["timeoutPolicy"] == "AUTO_APPROVE" and status["approvalTimeout"] == "PT2S"
    pause = Pause.objects.get(subject_id=conversation_id)
    shown = datetime.fromisoformat(status["deadline"].replace("Z", "+00:00"))  # milliseconds
    assert abs(shown - pause.due_at) < timedelta(milliseconds=1)
    assert pause.due_at - pause.paused_at == timedelta(seconds=2)
    assert Schedule.objects.filter(pk=pause.schedule_id).exists()  # the one-shot timer is armed

    finished = wait_for_state(alice, conversation_id, "READY")

    assert finished["output"] == ["Deletion APPROVED."]
    pause.refresh_from_db()
    assert pause.status == "RESOLVED" and pause.verdict == "APPROVED"
    assert pause.decided_by == "system:timeout" and pause.automated
    lateness = pause.decided_at - due_at_of(pause)
    assert timedelta(0) <= lateness <= LATENESS_LIMIT, lateness
    [decision] = AuditEntry.objects.filter(pause_id=pause.id, verb="hitl.approval")
    assert (decision.actor, decision.verdict, decision.automated) == ("system:timeout", "APPROVED", True)
    assert decision.note == "Automatic approved due to timeout (policy: AUTO_APPROVE)"
    assert not Schedule.objects.filter(pk=pause.schedule_id).exists()  # disarmed with the decision


def test_abort_pt2s_interrupts_the_conversation_audited_cancelled_by_system_timeout(people):
    admin, alice = people["admin"], people["alice"]
    conversation_id = paused_conversation(alice, deploy_agent(admin, timed_agent("ABORT", "PT2S")))
    pause = Pause.objects.get(subject_id=conversation_id)

    wait_for_state(alice, conversation_id, "EXECUTION_INTERRUPTED")

    pause.refresh_from_db()
    assert pause.status == "CANCELLED" and pause.verdict == "CANCELLED"
    assert pause.decided_by == "system:timeout" and pause.due_at is None
    lateness = pause.decided_at - due_at_of(pause)
    assert timedelta(0) <= lateness <= LATENESS_LIMIT, lateness
    [decision] = AuditEntry.objects.filter(pause_id=pause.id, verb="hitl.approval")
    assert (decision.actor, decision.verdict, decision.automated) == ("system:timeout", "CANCELLED", True)
    assert decision.detail["mode"] == "TIMEOUT_ABORT"
    assert not Schedule.objects.filter(pk=pause.schedule_id).exists()


PAUSES_PER_TIMEOUT = 8
TIMEOUTS = ("PT2S", "PT3S", "PT4S", "PT5S", "PT6S")  # 5 x 8 = 40 pauses


@pytest.mark.parametrize(
    "cluster_env",
    [
        pytest.param({}, id="default-settings"),
        # small batches (every due second overflows one, so burst tasks run on both clusters beside the
        # drainer) and a drainer that hands over every 2 s (to whichever cluster takes the task)
        pytest.param(
            {"HITL_TIMEOUT_BATCH_SIZE": 3, "HITL_TIMER_DRAIN_SECONDS": 2}, id="bursts-and-handovers"
        ),
    ],
)
def test_two_q_clusters_at_once_fire_each_timer_once(live_stack, people, clusters: Clusters, cluster_env):
    first = clusters.start("timers-a", cluster=settings.HITL_TIMER_CLUSTER, **cluster_env)
    second = clusters.start("timers-b", cluster=settings.HITL_TIMER_CLUSTER, **cluster_env)
    clusters.start("work")  # the default cluster: the continuations of the decisions
    admin = people["admin"]
    agents = [deploy_agent(admin, timed_agent("AUTO_REJECT", timeout)) for timeout in TIMEOUTS]
    owners = [api_user(f"owner{i}") for i in range(4)]
    owned: dict[str, list[str]] = {token: [] for token in owners}
    errors: list[BaseException] = []

    def create(token: str, index: int) -> None:
        try:
            with live_stack.client(token) as owner:
                for n in range(index, len(agents) * PAUSES_PER_TIMEOUT, len(owners)):
                    owned[token].append(paused_conversation(owner, agents[n % len(agents)]))
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=create, args=(token, i)) for i, token in enumerate(owners)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    conversation_ids = [c for ids in owned.values() for c in ids]
    assert len(conversation_ids) == len(TIMEOUTS) * PAUSES_PER_TIMEOUT
    pauses = {p.id: p for p in Pause.objects.filter(subject_id__in=conversation_ids)}
    assert len(pauses) == len(conversation_ids)

    def all_finished() -> bool:
        return not Pause.objects.filter(pk__in=pauses, status__in=["PENDING", "RESOLVING"]).exists()

    eventually(all_finished, timeout=60, interval=0.25, what="every pause to be decided and continued")
    assert first.running and second.running
    clusters.wait_working(first)  # both clusters still take work after the storm
    clusters.wait_working(second)

    decisions = AuditEntry.objects.filter(pause_id__in=pauses, verb="hitl.approval")
    per_pause = Counter(entry.pause_id for entry in decisions)
    assert set(per_pause) == set(pauses), "a pause without a decision entry"
    assert [pid for pid, n in per_pause.items() if n != 1] == [], per_pause
    assert {(e.actor, e.verdict, e.note) for e in decisions} == {
        ("system:timeout", "REJECTED", "Automatic rejected due to timeout (policy: AUTO_REJECT)")
    }
    assert not AuditEntry.objects.filter(pause_id__in=pauses, verb="hitl.restored").exists()
    finished = list(Pause.objects.filter(pk__in=pauses))
    assert {p.status for p in finished} == {"RESOLVED"}
    assert {p.decided_by for p in finished} == {"system:timeout"}
    assert not Schedule.objects.filter(pk__in=[p.schedule_id for p in pauses.values()]).exists()
    assert set(Conversation.objects.filter(pk__in=conversation_ids).values_list("state", flat=True)) == {
        "READY"
    }
    for token, ids in owned.items():
        with live_stack.client(token) as owner:
            for conversation_id in ids:
                body = owner.get(f"/agents/{conversation_id}").json()
                assert (body["state"], body["output"]) == ("READY", [REJECTED_BY_TIMEOUT]), body
    lateness = sorted((p.decided_at - due_at_of(p)).total_seconds() for p in finished)
    print(
        f"\n{cluster_env or 'defaults'}: {len(finished)} timers, lateness "
        f"min {lateness[0]:.3f} s, median {lateness[len(lateness) // 2]:.3f} s, max {lateness[-1]:.3f} s"
    )
    assert lateness[0] >= 0, "a timer fired before its deadline"


BACKLOG_TASK = "time.sleep"


def test_a_backlog_of_work_on_the_default_cluster_does_not_delay_a_deadline(people, clusters: Clusters):
    """Timers have their own queue and cluster: a drainer handing over every 2 s is re-enqueued on the
    timer queue, never behind the default queue's backlog (50 s of work here). When timers shared the
    default queue, a handed-over drainer waited at least behind the tasks the cluster had prefetched
    (its pusher holds up to workers² of them: here 4 x 5 s on two workers)."""
    clusters.start("work", HITL_TIMER_DRAIN_SECONDS=2)
    clusters.start("timers", cluster=settings.HITL_TIMER_CLUSTER, HITL_TIMER_DRAIN_SECONDS=2)
    for _ in range(20):
        async_task(BACKLOG_TASK, 5, group="e2e-backlog")
    try:
        admin, alice = people["admin"], people["alice"]
        conversation_id = paused_conversation(alice, deploy_agent(admin, timed_agent("AUTO_REJECT", "PT4S")))
        pause = Pause.objects.get(subject_id=conversation_id)

        eventually(
            lambda: Pause.objects.filter(pk=pause.pk).exclude(status="PENDING").exists(),
            timeout=20,
            interval=0.1,
            what="the timer to decide the pause",
        )

        decided = Pause.objects.get(pk=pause.pk)
        assert decided.decided_by == "system:timeout" and decided.verdict == "REJECTED"
        lateness = decided.decided_at - due_at_of(decided)
        assert timedelta(0) <= lateness <= LATENESS_LIMIT, lateness
        still_queued = [q for q in OrmQ.objects.all() if q.func() == BACKLOG_TASK]
        assert len(still_queued) > 10, "the backlog was worked off already: the test proves nothing"
    finally:
        for queued in OrmQ.objects.all():
            if queued.func() == BACKLOG_TASK:
                queued.delete()
