"""A group pause's timeout fired by the real timer cluster: no time travel, no mocks, a short deadline.

The discussion is started over HTTP on the live server and pauses at its PHASE gate with AUTO_REJECT
after PT2S; the timer cluster decides it as system:timeout and the default cluster runs the queued
continuation, which fails the discussion, all within a hard cap.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django_q.models import Schedule

from approvals.models import AuditEntry, Pause
from groups.demo_group import demo_member_document
from harnesses.clusters import deploy_agent
from harnesses.live_stack import LiveStack, api_user, eventually

pytestmark = pytest.mark.django_db(transaction=True)

HARD_CAP_SECONDS = 30.0  # the deadline is 2 s away; the rest is slack for a loaded machine
LATENESS_LIMIT = timedelta(seconds=3)  # as tests/e2e/test_live_timers.py: the drainer polls 4x a second


def test_a_pt2s_auto_reject_group_pause_is_failed_by_the_timer_cluster(live_stack: LiveStack):
    with (
        live_stack.client(api_user("admin", "admin")) as admin,
        live_stack.client(api_user("alice")) as alice,
        live_stack.client(api_user("approver", "approver")) as approver,
    ):
        member = deploy_agent(admin, demo_member_document("pat", "Ship it."))
        document = {
            "name": "timed-panel",
            "members": [{"agentId": member, "role": "Optimist"}],
            "phases": [
                {"name": "Opinions", "type": "OPINION", "requiresApproval": True},
                {"name": "Decision", "type": "SYNTHESIS"},
            ],
            "hitlConfig": {"timeoutPolicy": "AUTO_REJECT", "approvalTimeout": "PT2S"},
        }
        created = admin.post("/groupstore/groups", json=document)
        assert created.status_code == 201, created.text
        group_id = created.json()["id"]
        started = alice.post(f"/groups/{group_id}/conversations", json={"question": "Ship on Friday?"})
        assert started.status_code == 201, started.text
        assert started.json()["state"] == "AWAITING_APPROVAL", started.json()
        discussion_id = started.json()["discussionId"]
        base = f"/groups/{group_id}/conversations"

        status = alice.get(f"{base}/{discussion_id}/approval-status").json()
        assert (status["timeoutPolicy"], status["approvalTimeout"], status["pauseType"]) == (
            "AUTO_REJECT",
            "PT2S",
            "PHASE",
        )
        [row] = approver.get(f"{base}/pending-approvals").json()
        assert row["conversationId"] == discussion_id and row["deadline"] == status["deadline"]

        def failed() -> dict | None:
            body = alice.get(f"{base}/{discussion_id}").json()
            return body if body["state"] == "FAILED" else None

        body = eventually(failed, timeout=HARD_CAP_SECONDS, what="the timer to fail the discussion")

        assert body["transcript"][-1]["note"] == (
            "Discussion failed: the approval was rejected by system:timeout: "
            "Automatic rejected due to timeout (policy: AUTO_REJECT)"
        )
        assert [e["phase"] for e in body["transcript"][:-1]] == ["Opinions"]
        after = alice.get(f"{base}/{discussion_id}/approval-status").json()
        assert after["pauseId"] is None
        assert (after["lastDecision"]["verdict"], after["lastDecision"]["decidedBy"]) == (
            "REJECTED",
            "system:timeout",
        )
        assert approver.get(f"{base}/pending-approvals").json() == []

    pause = Pause.objects.get(subject_id=discussion_id)
    assert (pause.status, pause.verdict, pause.decided_by, pause.automated) == (
        "RESOLVED",
        "REJECTED",
        "system:timeout",
        True,
    )
    opened = AuditEntry.objects.get(pause_id=pause.id, verb="hitl.pause")
    lateness = pause.decided_at - datetime.fromisoformat(opened.detail["dueAt"])
    assert timedelta(0) <= lateness <= LATENESS_LIMIT, lateness
    [decision] = AuditEntry.objects.filter(pause_id=pause.id, verb="hitl.approval")
    assert (decision.actor, decision.verdict, decision.automated) == ("system:timeout", "REJECTED", True)
    assert not Schedule.objects.filter(pk=pause.schedule_id).exists()
