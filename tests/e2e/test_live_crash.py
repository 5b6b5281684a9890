"""SIGKILL in the middle of a continuation, for real: a q-cluster worker dies while the approved turn's
HTTP call is in flight to a slow target. After recovery the pause is PENDING again (restored, audited),
never lost, never continued twice, and the target never sees a second request -- not even when
django-q2 re-delivers the task.

Settings of the q-clusters here, and why:

- ``HITL_CONTINUATION_LEASE_SECONDS=2``: the lease is written by the worker that claims the
  continuation, with ITS cluster's setting, so the cluster that gets killed needs the short lease
  for the lease to run out during the test (default 120 s).
- ``HITL_Q_RETRY=6``: django-q2 re-delivers a task whose worker died once the broker's lock (taken
  at dequeue: now + retry) has passed; 6 s keeps the wait short. ``HITL_Q_TIMEOUT=5`` because
  django-q2 wants timeout < retry. The target holds its answer 10 s, longer than the timeout: that is
  fine because we do not want the call to finish -- the test kills the worker as soon as the request
  has arrived (and if it failed to, django-q2 would kill it at 5 s; the test checks that it killed
  the worker itself first). The re-delivered attempt is quick (it restores or skips), well within 5 s.
- ``HITL_TIMER_DRAIN_SECONDS=3``: the timer drainer is a task too and must hand over before the 5 s
  task timeout, or django-q2 would kill the drainer's worker every 5 s.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from django.utils import timezone
from django_q.models import OrmQ, Task

from approvals.continuation_runs import INTERRUPTED
from approvals.models import AuditEntry, Pause
from conversations.models import Conversation
from harnesses import clusters as live_clusters
from harnesses.clusters import (
    Clusters,
    SlowTarget,
    deploy_agent,
    paused_conversation,
    pid_of_connection,
    pids_in_group,
    with_http_call,
)
from harnesses.factories import account_bot
from harnesses.live_stack import PROJECT_ROOT, LiveStack, eventually

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.long]

clusters = live_clusters.clusters  # fixtures
slow_target = live_clusters.slow_target

CONTINUATION = "approvals.continuation_runs.run_continuation"
RETRY_SECONDS = 6
CRASH_ENV = {
    "HITL_CONTINUATION_LEASE_SECONDS": 2,
    "HITL_Q_TIMEOUT": 5,
    "HITL_Q_RETRY": RETRY_SECONDS,
    "HITL_TIMER_DRAIN_SECONDS": 3,
    "HITL_HTTP_TIMEOUT_SECONDS": 30,  # the call is cut by the kill, not by the HTTP client
}
REJECTED_TEXT = "This action was rejected by a human reviewer."


def approve_and_catch_the_call(people, target: SlowTarget) -> tuple[str, Pause]:
    """A paused conversation whose approved action calls ``target``; approved; returns once the
    worker's request has reached the target (the continuation is then in the middle of its turn)."""
    agent_id = deploy_agent(people["admin"], with_http_call(account_bot(), target.url))
    conversation_id = paused_conversation(people["alice"], agent_id)
    assert target.requests == []
    decided = people["approver"].post(
        f"/agents/{conversation_id}/resume", json={"verdict": "APPROVED", "note": "go"}
    )
    assert decided.status_code == 200, decided.text
    assert target.received.wait(30), "the continuation never called the target"
    pause = Pause.objects.get(subject_id=conversation_id)
    assert pause.status == "RESOLVING" and pause.lease_until is not None  # claimed by the worker
    return conversation_id, pause


def worker_calling(target: SlowTarget, cluster_pgid: int) -> int:
    """The q-cluster process that holds the client end of the request the target received."""
    client_port = target.requests[0]["client_port"]
    pid = pid_of_connection(client_port, target.port, pids_in_group(cluster_pgid))
    assert pid is not None, "no process of the q-cluster holds the connection to the target"
    assert pid != cluster_pgid, "the connection belongs to the qcluster parent, not a worker"
    return pid


def redelivered_continuation_results() -> list[str] | None:
    """Results of the continuation's task once django-q2 re-delivered and finished it (the killed
    attempt never saved a result); None while the broker still holds the task."""
    if any(q.func() == CONTINUATION for q in OrmQ.objects.all()):
        return None
    results = list(Task.objects.filter(func=CONTINUATION).values_list("result", flat=True))
    return results or None


def target_never_called_again(target: SlowTarget, seconds: float) -> None:
    """Watch the target for ``seconds`` (past the re-delivery): a second request fails at once."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert len(target.requests) == 1, target.requests
        time.sleep(0.2)


def assert_restored_once(pause: Pause) -> None:
    restored = list(AuditEntry.objects.filter(pause_id=pause.id, verb="hitl.restored"))
    assert len(restored) == 1, restored
    assert restored[0].actor == "system:recovery"
    assert restored[0].detail["reason"] == INTERRUPTED
    assert restored[0].detail["previousDecision"] == {"verdict": "APPROVED", "decidedBy": "approver"}
    after = Pause.objects.get(pk=pause.pk)
    assert after.status == "PENDING" and after.verdict == "" and after.lease_until is None
    assert after.due_at == pause.due_at  # the original deadline, timer re-armed
    assert after.schedule_id is not None
    assert Conversation.objects.get(pk=pause.subject_id).state == "AWAITING_HUMAN"


def test_sigkill_of_the_worker_mid_call_restores_the_pause_and_redelivery_does_not_call_again(
    people, clusters: Clusters, slow_target: SlowTarget
):
    cluster = clusters.start("crash", **CRASH_ENV)
    conversation_id, pause = approve_and_catch_the_call(people, slow_target)

    worker = worker_calling(slow_target, cluster.popen.pid)
    os.kill(worker, signal.SIGKILL)  # only the worker: its cluster lives on and reincarnates it
    killed_at = time.monotonic()

    # the continuation task comes back after the broker's lock (retry) and finds the lease expired
    results = eventually(
        redelivered_continuation_results,
        timeout=RETRY_SECONDS + 30,
        interval=0.2,
        what="django-q2 to re-deliver the continuation task",
    )
    assert results in (["restored"], ["skipped"]), results  # restored by it, or by recovery before it
    print(
        f"\nworker {worker} killed; the re-delivered continuation task: {results[0]} "
        f"{time.monotonic() - killed_at:.1f} s later"
    )
    assert_restored_once(pause)
    assert slow_target.requests[0]["method"] == "DELETE"
    target_never_called_again(slow_target, max(0.0, killed_at + 2 * RETRY_SECONDS - time.monotonic()))
    assert cluster.running
    clusters.wait_working(cluster)  # the reincarnated worker takes tasks

    status = people["approver"].get(f"/agents/{conversation_id}/approval-status").json()
    assert status["state"] == "AWAITING_HUMAN" and status["pauseId"] == str(pause.id)
    # a human decides again; a rejection skips the call, so the target still saw one request
    rejected = people["approver"].post(
        f"/agents/{conversation_id}/resume?wait=20", json={"verdict": "REJECTED", "note": "decided again"}
    )
    assert rejected.status_code == 200, rejected.text
    assert rejected.json()["state"] == "READY"
    assert rejected.json()["output"] == [f"{REJECTED_TEXT} Reason: decided again"]
    assert len(slow_target.requests) == 1
    decisions = AuditEntry.objects.filter(pause_id=pause.id, verb="hitl.approval").order_by("sequence")
    assert [(e.actor, e.verdict) for e in decisions] == [("approver", "APPROVED"), ("approver", "REJECTED")]
    assert Pause.objects.get(pk=pause.pk).status == "RESOLVED"
    outputs = [step["output"] for step in people["alice"].get(f"/agents/{conversation_id}").json()["steps"]]
    assert ["Deletion APPROVED."] not in outputs  # the interrupted turn was never applied


def test_sigkill_of_the_whole_q_cluster_then_hitl_recover_and_a_new_cluster(
    live_stack: LiveStack, people, clusters: Clusters, slow_target: SlowTarget
):
    first = clusters.start("doomed", **CRASH_ENV)
    conversation_id, pause = approve_and_catch_the_call(people, slow_target)
    worker = worker_calling(slow_target, first.popen.pid)

    group = pids_in_group(first.popen.pid)
    os.killpg(first.popen.pid, signal.SIGKILL)  # parent, sentinel, pusher, monitor and workers at once
    first.popen.wait(timeout=10)
    assert worker in group
    eventually(lambda: not pids_in_group(first.popen.pid), timeout=10, what="the killed group to be gone")
    queued = [q for q in OrmQ.objects.all() if q.func() == CONTINUATION]
    assert len(queued) == 1 and queued[0].args() == (str(pause.id),)  # never acknowledged

    claimed = Pause.objects.get(pk=pause.pk)
    assert claimed.status == "RESOLVING"
    eventually(
        lambda: timezone.now() > claimed.lease_until, timeout=10, what="the dead worker's lease to run out"
    )
    recover = subprocess.run(
        [sys.executable, "manage.py", "hitl_recover"],
        cwd=PROJECT_ROOT,
        env=live_stack.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert recover.returncode == 0, recover.stderr
    assert json.loads(recover.stdout.strip().splitlines()[-1])["restoredContinuations"] == 1
    assert_restored_once(pause)

    # a new cluster picks the orphaned task up once the dead pusher's lock passed: nothing to do
    clusters.start("after", **CRASH_ENV)
    results = eventually(
        redelivered_continuation_results,
        timeout=RETRY_SECONDS + 30,
        interval=0.2,
        what="the new q-cluster to re-deliver the continuation task",
    )
    assert results == ["skipped"]
    target_never_called_again(slow_target, RETRY_SECONDS)
    assert_restored_once(pause)  # still exactly one restore, the new cluster's recovery found nothing
    inbox = people["approver"].get("/agents/pending-approvals").json()
    assert [row["pauseId"] for row in inbox if row["conversationId"] == conversation_id] == [str(pause.id)]
