"""The journal's promise under a real crash: a q-cluster is SIGKILLed while an approved tool call is in
flight to a slow target. After recovery and a second approval the model is told the outcome is unknown,
and the target saw one request in total, never two.

Live uvicorn and real q-clusters (``manage.py qcluster``) on the test database. The cluster that dies
runs with a 2 s continuation lease (the lease is written by the worker that claims the continuation,
with its cluster's setting), so recovery finds it expired within the test; django-q2's retry is 6 s so
the killed cluster's task is re-delivered quickly, and found to have nothing to do. The target holds
each request 10 s: the kill lands while the call is still waiting for its answer, after the journal
claim committed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest
from django.utils import timezone
from django_q.models import OrmQ, Task

from approvals.models import AuditEntry, Pause
from harnesses import clusters as live_clusters
from harnesses.agents import payments_agent
from harnesses.clusters import Clusters, SlowTarget, deploy_agent, pid_of_connection, pids_in_group
from harnesses.live_stack import PROJECT_ROOT, LiveStack, eventually
from toolgate.models import JournalEntry

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.long]

clusters = live_clusters.clusters  # fixtures
slow_target = live_clusters.slow_target

CONTINUATION = "approvals.continuation_runs.run_continuation"
RETRY_SECONDS = 6
QUEUE_ENV = {"HITL_Q_TIMEOUT": 5, "HITL_Q_RETRY": RETRY_SECONDS, "HITL_TIMER_DRAIN_SECONDS": 3}
DOOMED_ENV = {**QUEUE_ENV, "HITL_CONTINUATION_LEASE_SECONDS": 2, "HITL_HTTP_TIMEOUT_SECONDS": 30}


def continuation_results() -> list[Any] | None:
    """The results of the continuation tasks once the broker holds none any more (else None)."""
    if any(q.func() == CONTINUATION for q in OrmQ.objects.all()):
        return None
    return (
        list(Task.objects.filter(func=CONTINUATION).order_by("started").values_list("result", flat=True))
        or None
    )


def test_sigkill_during_an_approved_tool_call_then_recovery_and_reapproval_reports_outcome_unknown(
    live_stack: LiveStack, people, clusters: Clusters, slow_target: SlowTarget
):
    doomed = clusters.start("doomed", **DOOMED_ENV)
    agent_id = deploy_agent(people["admin"], payments_agent(slow_target.url))
    started = people["alice"].post(f"/agents/{agent_id}/start")
    assert started.status_code == 201, started.text
    conversation_id = started.json()["conversationId"]
    said = people["alice"].post(f"/agents/{conversation_id}", json={"input": "please transfer 100 to bob"})
    assert said.json()["state"] == "AWAITING_HUMAN", said.text
    assert slow_target.requests == []

    approved = people["approver"].post(f"/agents/{conversation_id}/resume", json={"verdict": "APPROVED"})
    assert approved.status_code == 200, approved.text
    assert slow_target.received.wait(30), "the continuation never called the target"
    pause = Pause.objects.get(subject_id=conversation_id)
    assert pause.status == "RESOLVING" and pause.lease_until is not None
    claim = JournalEntry.objects.get(pause_epoch=pause.epoch, call_id="call-1")
    assert claim.status == "EXECUTING"  # claimed and committed before the request left

    caller = pid_of_connection(
        slow_target.requests[0]["client_port"], slow_target.port, pids_in_group(doomed.popen.pid)
    )
    assert caller is not None and caller != doomed.popen.pid, "no worker of the cluster holds the call"
    os.killpg(doomed.popen.pid, signal.SIGKILL)  # the whole q-cluster, mid-call
    assert time.time() - slow_target.requests[0]["at"] < 5, (
        "django-q2's timeout, not the test, may have killed it"
    )
    killed_at = time.monotonic()
    doomed.popen.wait(timeout=10)
    eventually(lambda: not pids_in_group(doomed.popen.pid), timeout=10, what="the killed group to be gone")
    assert len(slow_target.requests) == 1

    eventually(
        lambda: timezone.now() > pause.lease_until, timeout=10, what="the dead worker's lease to run out"
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
    restored = Pause.objects.get(pk=pause.pk)
    assert restored.status == "PENDING" and restored.epoch == pause.epoch

    status = people["approver"].get(f"/agents/{conversation_id}/approval-status").json()
    assert status["state"] == "AWAITING_HUMAN"
    assert status["pauseDetails"]["outcomeUnknown"] == ["call-1"]
    assert [c["callId"] for c in status["pauseDetails"]["calls"]] == ["call-1"]

    # a fresh cluster (default lease) takes the killed cluster's task once its lock passed: nothing to do
    clusters.start("after", **QUEUE_ENV)
    assert eventually(
        continuation_results,
        timeout=RETRY_SECONDS + 30,
        interval=0.2,
        what="the orphaned continuation task to be re-delivered",
    ) == ["skipped"]

    reapproved = people["approver"].post(
        f"/agents/{conversation_id}/resume?wait=30", json={"verdict": "APPROVED", "note": "once more"}
    )
    assert reapproved.status_code == 200, reapproved.text
    snapshot = reapproved.json()
    assert snapshot["state"] == "READY", snapshot
    (result,) = json.loads(snapshot["output"][-1].removeprefix("Done: "))
    assert result["name"] == "transfer_funds"
    assert result["status"] == "EXECUTION_OUTCOME_UNKNOWN"
    assert "verify externally before retrying" in result["result"]["message"]

    # watch past any re-delivery: the target saw the one request of the killed attempt, never a second
    deadline = killed_at + 2 * RETRY_SECONDS
    while time.monotonic() < deadline:
        assert len(slow_target.requests) == 1, slow_target.requests
        time.sleep(0.2)
    assert [(r["method"], r["path"]) for r in slow_target.requests] == [("POST", "/transfers")]

    assert JournalEntry.objects.get(pause_epoch=pause.epoch, call_id="call-1").status == "EXECUTING"
    verbs = list(
        AuditEntry.objects.filter(pause_id=pause.id).order_by("sequence").values_list("verb", "actor")
    )
    assert verbs == [
        ("hitl.pause", "system:pipeline"),
        ("hitl.approval", "approver"),
        ("hitl.restored", "system:recovery"),
        ("hitl.approval", "approver"),
        ("hitl.tool.outcome_unknown", "system:toolgate"),
    ]
    assert Pause.objects.get(pk=pause.pk).status == "RESOLVED"
