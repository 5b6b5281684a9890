"""Approval gates of group discussions: PHASE and TASK pauses through the core, a decision running the
rest, a rejection failing it, TASK verdicts with RETRY, and the demo group (the guards are in
test_discussion_guards.py)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from approvals.models import AuditEntry, PauseStatus
from groups.models import Group, GroupConversation
from harnesses.members import PHASES, answering, approve, discuss, echoing, group, pause_of
from harnesses.queue_drain import run_queued_tasks

pytestmark = pytest.mark.django_db


def test_a_phase_gate_pauses_after_the_phase_and_an_approval_runs_the_rest(alice_client, approver_client):
    pat, carla = answering("pat", "Ship it."), answering("carla", "Not on a Friday.")
    group_id = group([(pat, "Optimist"), (carla, "Critic")], PHASES)

    paused = discuss(alice_client, group_id)

    assert paused["state"] == "AWAITING_APPROVAL" and paused["phaseIndex"] == 1
    assert [e["phase"] for e in paused["transcript"]] == ["Opinions"] * 2 + ["Challenge"] * 2
    pause = pause_of(paused)
    assert pause.status == PauseStatus.PENDING and pause.kind == "PHASE" and pause.surface == "group"
    assert pause.reason == "Requires human approval (PHASE) — phase: Challenge"
    assert str(pause.group_id) == group_id

    done = approve(approver_client, paused)

    assert done["state"] == "COMPLETED"
    assert [e["phase"] for e in done["transcript"]][-2:] == ["Decision", "Decision"]
    pause.refresh_from_db()
    assert pause.status == PauseStatus.RESOLVED and pause.verdict == "APPROVED"
    verbs = list(
        AuditEntry.objects.filter(subject_id=paused["discussionId"])
        .order_by("sequence")
        .values_list("verb", flat=True)
    )
    assert verbs == [
        "hitl.discussion.started",
        "hitl.pause",
        "hitl.approval",
        "hitl.discussion.resumed",
        "hitl.discussion.finished",
    ]


def test_a_top_level_rejection_fails_the_discussion(alice_client, approver_client):
    pat = answering("pat", "Ship it.")
    paused = discuss(alice_client, group([(pat, "Optimist")], PHASES))

    failed = approve(approver_client, paused, {"decision": {"verdict": "rejected", "note": "No."}})

    assert failed["state"] == "FAILED"
    assert failed["transcript"][-1]["status"] == "ERROR"
    assert "rejected by approver: No." in failed["transcript"][-1]["note"]
    assert GroupConversation.objects.get(pk=paused["discussionId"]).state == "FAILED"


def test_task_gates_submit_each_result_and_retry_sends_the_note_back(alice_client, approver_client):
    worker = echoing("worker")
    group_id = group(
        [(worker, "Worker")],
        [
            {
                "name": "Build",
                "type": "EXECUTE",
                "requiresApproval": True,
                "tasks": [
                    {"id": "a", "description": "do a", "assignee": worker},
                    {"id": "b", "description": "do b", "assignee": worker, "dependsOn": ["a"]},
                ],
            }
        ],
        hitlConfig={"granularity": "TASK", "onTaskRejection": "RETRY"},
    )

    first = discuss(alice_client, group_id)
    assert first["state"] == "AWAITING_APPROVAL"
    assert [(t["id"], t["status"]) for t in first["tasks"]] == [("a", "AWAITING_APPROVAL"), ("b", "PENDING")]
    assert pause_of(first).kind == "TASK" and pause_of(first).details["awaitingTaskIds"] == ["a"]

    again = approve(
        approver_client,
        first,
        {"decision": {"verdict": "APPROVED", "note": "cite sources"}, "taskApprovals": {"a": "rejected"}},
    )
    assert again["state"] == "AWAITING_APPROVAL"
    task_a = again["tasks"][0]
    assert task_a["status"] == "AWAITING_APPROVAL" and "cite sources" in task_a["result"]

    second = approve(approver_client, again, {"decision": {"verdict": "APPROVED"}, "taskApprovals": {}})
    assert [(t["id"], t["status"]) for t in second["tasks"]] == [
        ("a", "COMPLETED"),
        ("b", "AWAITING_APPROVAL"),
    ]
    done = approve(approver_client, second)
    assert done["state"] == "COMPLETED"
    assert [t["status"] for t in done["tasks"]] == ["COMPLETED", "COMPLETED"]


def test_the_demo_group_pauses_before_its_synthesis_is_accepted(alice_client, approver_client):
    call_command("hitl_demo", stdout=io.StringIO())
    demo = Group.objects.get(name="demo-discussion")

    paused = discuss(alice_client, str(demo.id), question="Adopt a four-day week?")

    assert paused["state"] == "AWAITING_APPROVAL" and paused["phaseIndex"] == 2
    assert len(paused["transcript"]) == 12
    pause = pause_of(paused)
    assert pause.reason == "Requires human approval (PHASE) — phase: Synthesis"
    assert pause.timeout_policy == "AUTO_REJECT" and pause.due_at is not None
    assert approve(approver_client, paused)["state"] == "COMPLETED"


def test_without_inline_continuations_the_decision_is_queued_and_a_worker_runs_the_rest(
    settings, alice_client, approver_client
):
    settings.HITL_CONTINUE_INLINE = False
    paused = discuss(alice_client, group([(answering("p", "Yes."), "Optimist")], PHASES))

    queued = approve(approver_client, paused, status=202, wait=1)  # nobody runs it while the answer waits

    assert queued["state"] == "IN_PROGRESS"
    assert run_queued_tasks() == 1
    assert GroupConversation.objects.get(pk=paused["discussionId"]).state == "COMPLETED"
    assert pause_of(paused).status == PauseStatus.RESOLVED
