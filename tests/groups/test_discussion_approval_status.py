"""A discussion's approval status: the pause summary while it awaits approval, the last decision after,
``detail=full`` for those who may read its transcript, and the one access rule (no existence oracle)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from approvals.models import Pause, SubjectType
from groups.models import GroupConversation
from harnesses.members import answering, discuss, echoing, group

pytestmark = pytest.mark.django_db

PHASES = [
    {"name": "Opinions", "type": "OPINION"},
    {"name": "Challenge", "type": "CHALLENGE", "requiresApproval": True},
    {"name": "Decision", "type": "SYNTHESIS"},
]
SUMMARY_FIELDS = {
    "discussionId",
    "groupId",
    "state",
    "pauseId",
    "pausedAt",
    "phaseIndex",
    "phaseName",
    "pauseType",
    "reason",
    "timeoutPolicy",
    "approvalTimeout",
    "deadline",
    "awaitingTaskIds",
    "pauseDetails",
    "lastDecision",
    # EDDI's names of discussionId, phaseName, reason and awaitingTaskIds (docs/eddi-compatibility.md)
    "groupConversationId",
    "pausedPhaseName",
    "pauseReason",
    "awaitingApprovalTaskIds",
}
PAUSE_FIELDS = SUMMARY_FIELDS - {"discussionId", "groupId", "state", "lastDecision", "groupConversationId"}


def status_url(body: dict[str, Any], detail: str = "") -> str:
    url = f"/groups/{body['groupId']}/conversations/{body['discussionId']}/approval-status"
    return f"{url}?detail={detail}" if detail else url


def status_of(client, body: dict[str, Any], detail: str = "", expected: int = 200) -> dict[str, Any]:
    response = client.get(status_url(body, detail))
    assert response.status_code == expected, response.content
    return response.json()


def approve(client, body: dict[str, Any], verdict: str = "APPROVED") -> dict[str, Any]:
    response = client.post(
        f"/groups/{body['groupId']}/conversations/{body['discussionId']}/approve?wait=60",
        {"decision": {"verdict": verdict, "note": "looks fine"}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def instant(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


@pytest.fixture
def paused(alice_client) -> dict[str, Any]:
    """alice's discussion paused at the PHASE gate after "Challenge" (it waits indefinitely)."""
    pat = answering("pat", "Ship it.")
    return discuss(alice_client, group([(pat, "Optimist")], PHASES))


def test_a_phase_pause_is_summarised_with_its_phase_and_no_deadline(paused, approver_client):
    status = status_of(approver_client, paused)

    assert set(status) == SUMMARY_FIELDS
    pause = Pause.objects.get(subject_type=SubjectType.DISCUSSION, subject_id=paused["discussionId"])
    assert status["discussionId"] == paused["discussionId"] and status["groupId"] == paused["groupId"]
    assert (status["state"], status["pauseId"], status["pauseType"]) == (
        "AWAITING_APPROVAL",
        str(pause.id),
        "PHASE",
    )
    assert (status["phaseIndex"], status["phaseName"]) == (1, "Challenge")
    assert status["reason"] == "Requires human approval (PHASE) — phase: Challenge"
    assert abs(instant(status["pausedAt"]) - pause.paused_at) < timedelta(milliseconds=1)
    assert (status["timeoutPolicy"], status["approvalTimeout"], status["deadline"]) == (
        "WAIT_INDEFINITELY",
        None,
        None,
    )
    assert status["awaitingTaskIds"] == []
    assert status["pauseDetails"] == {
        "type": "PHASE",
        "reason": status["reason"],
        "phaseIndex": 1,
        "phaseName": "Challenge",
        "phaseType": "CHALLENGE",
        "granularity": "PHASE",
        "awaitingTaskIds": [],
        "awaitingTasks": [],
    }
    assert status["lastDecision"] is None
    assert "discussion" not in status  # only with detail=full


def test_a_task_pause_names_the_tasks_awaiting_approval_and_its_deadline(alice_client, approver_client):
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
                    {"id": "b", "description": "do b", "assignee": worker},
                    {"id": "c", "description": "do c", "assignee": worker, "dependsOn": ["a"]},
                ],
            }
        ],
        hitlConfig={"granularity": "TASK", "timeoutPolicy": "AUTO_APPROVE", "approvalTimeout": "PT5M"},
    )
    paused = discuss(alice_client, group_id)

    status = status_of(approver_client, paused)

    assert (status["pauseType"], status["phaseIndex"], status["phaseName"]) == ("TASK", 0, "Build")
    assert status["awaitingTaskIds"] == ["a", "b"]
    assert status["pauseDetails"]["awaitingTasks"] == [
        {"id": "a", "description": "do a", "assignee": worker},
        {"id": "b", "description": "do b", "assignee": worker},
    ]
    assert "result" not in str(status["pauseDetails"])  # results are for those who may read the turns
    assert (status["timeoutPolicy"], status["approvalTimeout"]) == ("AUTO_APPROVE", "PT5M")
    assert instant(status["deadline"]) - instant(status["pausedAt"]) == timedelta(minutes=5)


def test_after_the_decision_every_pause_field_is_null_and_the_last_decision_is_shown(paused, approver_client):
    approve(approver_client, paused)

    status = status_of(approver_client, paused)

    assert status["state"] == "COMPLETED"
    assert {field: status[field] for field in PAUSE_FIELDS} == dict.fromkeys(PAUSE_FIELDS)
    decision = status["lastDecision"]
    assert (decision["verdict"], decision["decidedBy"], decision["automated"], decision["note"]) == (
        "APPROVED",
        "approver",
        False,
        "looks fine",
    )
    assert decision["decidedAt"] and decision["cancelledBy"] is None


def test_a_cancelled_pause_shows_who_cancelled_it(paused, alice_client):
    url = f"/groups/{paused['groupId']}/conversations/{paused['discussionId']}/cancel"
    assert alice_client.post(url).status_code == 200

    status = status_of(alice_client, paused)

    assert status["state"] == "CANCELLED" and status["pauseId"] is None
    assert (status["lastDecision"]["verdict"], status["lastDecision"]["cancelledBy"]) == (
        "CANCELLED",
        "alice",
    )


def test_a_discussion_that_never_paused_has_no_last_decision(alice_client):
    ungated = group([(answering("pat", "Yes."), "Optimist")], [{"name": "Opinions", "type": "OPINION"}])
    done = discuss(alice_client, ungated)

    status = status_of(alice_client, done)

    assert status["state"] == "COMPLETED" and status["lastDecision"] is None


# --- detail=full ----------------------------------------------------------------------------------


def test_full_adds_the_discussion_with_its_transcript(paused, approver_client):
    full = status_of(approver_client, paused, "full")

    discussion = full["discussion"]
    assert discussion["discussionId"] == paused["discussionId"]
    assert discussion["transcript"] == paused["transcript"]
    assert [e["content"] for e in discussion["transcript"]] == ["Ship it.", "Ship it."]
    assert full["pauseId"] == status_of(approver_client, paused)["pauseId"]


def test_an_approver_reads_the_full_status_only_while_the_discussion_awaits_approval(
    paused, alice_client, approver_client, admin_client
):
    approve(approver_client, paused)

    refused = status_of(approver_client, paused, "full", expected=403)

    assert refused["code"] == "FORBIDDEN"
    assert refused["detail"] == (
        "Full approval status is available to approvers only while the discussion is awaiting approval "
        "- use the summary view"
    )
    assert status_of(approver_client, paused)["state"] == "COMPLETED"  # the summary stays open to them
    for reader in (alice_client, admin_client):  # the owner and admins always
        assert status_of(reader, paused, "full")["discussion"]["state"] == "COMPLETED"


def test_any_other_detail_value_is_the_summary(paused, approver_client):
    for detail in ("summary", "FULL", "everything"):
        assert "discussion" not in status_of(approver_client, paused, detail)


# --- who may read it ------------------------------------------------------------------------------


def test_owner_admin_and_approver_read_the_status_and_nobody_else(
    paused, alice_client, bob_client, admin_client, approver_client, anon_client
):
    for reader in (alice_client, admin_client, approver_client):
        assert status_of(reader, paused)["state"] == "AWAITING_APPROVAL"
    assert anon_client.get(status_url(paused)).status_code == 401
    assert status_of(bob_client, paused, expected=403)["code"] == "FORBIDDEN"
    assert status_of(bob_client, paused, "full", expected=403)["code"] == "FORBIDDEN"


def test_no_existence_oracle_unknown_malformed_and_other_groups_ids_are_refused_alike(
    paused, alice_client, bob_client, approver_client, admin_client
):
    other_group = group([(answering("carla", "No."), "Critic")], [{"name": "Other", "type": "OPINION"}])
    unknown = "00000000-0000-4000-8000-000000000000"
    probes = [
        {"groupId": other_group, "discussionId": paused["discussionId"]},
        {"groupId": paused["groupId"], "discussionId": unknown},
        {"groupId": paused["groupId"], "discussionId": "not-a-uuid"},
        {"groupId": "not-a-uuid", "discussionId": paused["discussionId"]},
    ]
    ownerless = discuss(alice_client, paused["groupId"])
    GroupConversation.objects.filter(pk=ownerless["discussionId"]).update(owner=None)
    for client, expected in ((bob_client, 403), (approver_client, 404), (admin_client, 404)):
        answers = [status_of(client, probe, expected=expected) for probe in probes]
        assert all(answer == answers[0] for answer in answers), answers
        if expected == 403:  # a plain user cannot tell another's or an ownerless discussion from none
            for existing in (paused, ownerless):
                assert status_of(client, existing, expected=403) == answers[0]
                assert status_of(client, existing, "full", expected=403) == answers[0]
        else:  # the roles that decide every discussion decide ownerless ones too
            assert status_of(client, ownerless)["state"] == "AWAITING_APPROVAL"
