"""The decision endpoint: check order, bad bodies that never consume a pause, and who may decide."""

from __future__ import annotations

import uuid

import pytest

from approvals.models import AuditEntry, Pause, PauseStatus
from harnesses.factories import paused_conversation
from harnesses.queue_drain import queued_count, run_queued_tasks

pytestmark = pytest.mark.django_db


def resume(client, conversation_id, body, **kwargs):
    return client.post(f"/agents/{conversation_id}/resume", body, format="json", **kwargs)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "verdict"),
        ({"verdict": "MAYBE"}, "verdict"),
        ({"verdict": 1}, "verdict"),
        ({"verdict": "APPROVED", "note": "x" * 4097}, "note"),
        ({"verdict": "APPROVED", "note": 42}, "note"),
        ({"verdict": "APPROVED", "toolDecisions": []}, "toolDecisions"),
        ({"verdict": "APPROVED", "toolDecisions": {"call-1": {"verdict": "APPROVED"}}}, "toolDecisions"),
        ({"verdict": "APPROVED", "surprise": True}, "surprise"),
    ],
)
def test_bad_body_is_400_naming_the_field_and_the_pause_stays_pending(
    alice_client, approver_client, body, field
):
    conversation_id = paused_conversation(alice_client)
    response = resume(approver_client, conversation_id, body)
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/problem+json"
    problem = response.json()
    assert problem["code"] == "BAD_REQUEST" and problem["status"] == 400
    assert field in [e["field"] for e in problem["errors"]]
    assert Pause.objects.get(subject_id=conversation_id).status == PauseStatus.PENDING
    assert queued_count() == 0


def test_non_json_body_is_400_and_the_pause_stays_pending(alice_client, approver_client):
    conversation_id = paused_conversation(alice_client)
    for content_type, data in [("application/json", "{not json"), ("text/plain", "APPROVED")]:
        response = approver_client.post(f"/agents/{conversation_id}/resume", data, content_type=content_type)
        assert response.status_code == 400, response.content
    assert Pause.objects.get(subject_id=conversation_id).status == PauseStatus.PENDING


def test_note_of_exactly_4096_characters_is_accepted(alice_client, approver_client):
    conversation_id = paused_conversation(alice_client)
    assert (
        resume(approver_client, conversation_id, {"verdict": "REJECTED", "note": "n" * 4096}).status_code
        == 200
    )


def test_decided_by_comes_from_the_authenticated_identity_and_a_body_field_is_ignored(
    alice_client, approver_client
):
    conversation_id = paused_conversation(alice_client)
    response = resume(
        approver_client, conversation_id, {"verdict": "APPROVED", "decidedBy": "system:timeout"}
    )
    assert response.status_code == 200
    assert response.json()["decidedBy"] == "approver"
    pause = Pause.objects.get(subject_id=conversation_id)
    assert pause.decided_by == "approver" and pause.automated is False
    entry = AuditEntry.objects.get(pause_id=pause.id, verb="hitl.approval")
    assert entry.actor == "approver" and entry.automated is False and entry.verdict == "APPROVED"


@pytest.mark.usefixtures("continuations_queued")
def test_check_order_is_body_then_access_then_existence_then_state(alice_client, bob_client, approver_client):
    conversation_id = paused_conversation(alice_client)
    unknown = uuid.uuid4()
    # body first: even a stranger with a bad body gets 400, and learns nothing about the conversation
    assert resume(bob_client, unknown, {}).status_code == 400
    # access: a plain user gets 403 both for someone else's conversation and for an unknown id
    assert resume(bob_client, conversation_id, {"verdict": "APPROVED"}).status_code == 403
    assert resume(bob_client, unknown, {"verdict": "APPROVED"}).status_code == 403
    # existence: approvers and admins get 404 for an unknown id
    assert resume(approver_client, unknown, {"verdict": "APPROVED"}).status_code == 404
    # state: a decided pause answers 409 naming the current state
    assert resume(approver_client, conversation_id, {"verdict": "APPROVED"}).status_code == 200
    again = resume(approver_client, conversation_id, {"verdict": "APPROVED"})
    assert again.status_code == 409
    assert again.json()["code"] == "WRONG_STATE"
    assert again.json()["currentState"] == "IN_PROGRESS"
    assert "IN_PROGRESS" in again.json()["detail"]


def test_anonymous_caller_gets_401(alice_client, anon_client):
    conversation_id = paused_conversation(alice_client)
    response = resume(anon_client, conversation_id, {"verdict": "APPROVED"})
    assert response.status_code == 401
    assert response.json()["code"] == "UNAUTHENTICATED"


@pytest.mark.parametrize("role_client", ["alice_client", "approver_client", "admin_client"])
def test_owner_admin_and_approver_may_decide(request, alice_client, role_client):
    conversation_id = paused_conversation(alice_client)
    client = request.getfixturevalue(role_client)
    assert resume(client, conversation_id, {"verdict": "approved"}).status_code == 200


def test_a_plain_user_cannot_see_someone_elses_conversation_anywhere(alice_client, bob_client):
    conversation_id = paused_conversation(alice_client)
    for path in ("", "/approval-status", "/approval-status?detail=full"):
        assert bob_client.get(f"/agents/{conversation_id}{path}").status_code == 403
    for verb in ("cancel", "endConversation", "undo", "redo"):
        assert bob_client.post(f"/agents/{conversation_id}/{verb}").status_code == 403
    assert bob_client.post(f"/agents/{conversation_id}", {"input": "hi"}, format="json").status_code == 403
    assert bob_client.get("/agents/pending-approvals").json() == []


def test_approval_status_summary_shapes_pause_details_for_a_rule_pause(alice_client, approver_client):
    conversation_id = paused_conversation(alice_client)
    status = approver_client.get(f"/agents/{conversation_id}/approval-status").json()
    assert status["state"] == "AWAITING_HUMAN"
    assert status["pauseType"] == "RULE"
    assert status["timeoutPolicy"] == "AUTO_REJECT" and status["approvalTimeout"] == "PT15M"
    assert status["deadline"].endswith("Z") and status["pausedAt"].endswith("Z")
    assert status["pauseDetails"] == {
        "type": "RULE",
        "reason": "Account deletion requires manager sign-off",
        "actions": ["PAUSE_CONVERSATION", "confirm_deletion"],
        "outcomeUnknown": [],
    }
    assert "conversation" not in status


def test_approval_status_is_empty_once_decided(alice_client, approver_client):
    conversation_id = paused_conversation(alice_client)
    resume(approver_client, conversation_id, {"verdict": "APPROVED"})
    run_queued_tasks()
    status = alice_client.get(f"/agents/{conversation_id}/approval-status").json()
    assert status["state"] == "READY"
    assert status["pausedAt"] is None and status["pauseReason"] is None and status["pauseDetails"] is None
    assert status["lastDecision"]["verdict"] == "APPROVED"
    assert status["lastDecision"]["decidedBy"] == "approver"


def test_full_status_is_for_approvers_only_while_paused(alice_client, approver_client, admin_client):
    conversation_id = paused_conversation(alice_client)
    full = approver_client.get(f"/agents/{conversation_id}/approval-status?detail=full")
    assert full.status_code == 200
    assert full.json()["conversation"]["steps"][-1]["input"] == "please delete my account"
    resume(approver_client, conversation_id, {"verdict": "APPROVED"})
    run_queued_tasks()
    assert approver_client.get(f"/agents/{conversation_id}/approval-status?detail=full").status_code == 403
    assert approver_client.get(f"/agents/{conversation_id}/approval-status").status_code == 200
    assert alice_client.get(f"/agents/{conversation_id}/approval-status?detail=full").status_code == 200
    assert admin_client.get(f"/agents/{conversation_id}/approval-status?detail=full").status_code == 200


def test_approver_reads_the_snapshot_only_while_paused(alice_client, approver_client):
    conversation_id = paused_conversation(alice_client)
    assert approver_client.get(f"/agents/{conversation_id}").status_code == 200
    resume(approver_client, conversation_id, {"verdict": "APPROVED"})
    run_queued_tasks()
    assert approver_client.get(f"/agents/{conversation_id}").status_code == 403


def test_cancel_ends_a_pending_pause_through_the_audited_path(alice_client, approver_client):
    conversation_id = paused_conversation(alice_client)
    response = approver_client.post(f"/agents/{conversation_id}/cancel")
    assert response.status_code == 200
    assert response.json()["state"] == "EXECUTION_INTERRUPTED"
    pause = Pause.objects.get(subject_id=conversation_id)
    assert pause.status == PauseStatus.CANCELLED and pause.due_at is None
    entry = AuditEntry.objects.get(pause_id=pause.id, verb="hitl.approval")
    assert (entry.verdict, entry.actor, entry.detail["mode"]) == ("CANCELLED", "approver", "CANCEL_GRACEFUL")
    # nothing left to cancel
    again = approver_client.post(f"/agents/{conversation_id}/cancel")
    assert again.status_code == 409 and again.json()["currentState"] == "EXECUTION_INTERRUPTED"
    # an interrupted conversation takes input again
    assert (
        alice_client.post(f"/agents/{conversation_id}", {"input": "hello"}, format="json").json()["state"]
        == "READY"
    )


def test_end_conversation_cancels_a_pending_pause_and_audits_it(alice_client, approver_client):
    conversation_id = paused_conversation(alice_client)
    assert approver_client.post(f"/agents/{conversation_id}/endConversation").status_code == 403
    response = alice_client.post(f"/agents/{conversation_id}/endConversation")
    assert response.status_code == 200 and response.json()["state"] == "ENDED"
    pause = Pause.objects.get(subject_id=conversation_id)
    assert pause.status == PauseStatus.CANCELLED
    entry = AuditEntry.objects.get(pause_id=pause.id, verb="hitl.approval")
    assert (entry.verdict, entry.actor, entry.detail["mode"]) == ("CANCELLED", "alice", "END_CONVERSATION")
    assert resume(approver_client, conversation_id, {"verdict": "APPROVED"}).status_code == 409


@pytest.mark.usefixtures("continuations_queued")
def test_cancel_before_the_continuation_starts_means_it_never_runs(alice_client, approver_client):
    conversation_id = paused_conversation(alice_client)
    resume(approver_client, conversation_id, {"verdict": "APPROVED"})
    response = alice_client.post(f"/agents/{conversation_id}/cancel")
    assert response.status_code == 200 and response.json()["state"] == "EXECUTION_INTERRUPTED"
    assert "cancelRequested" not in response.json()  # nothing of the turn runs any more
    run_queued_tasks()  # the worker finds the continuation taken by the cancel: nothing is written
    pause = Pause.objects.get(subject_id=conversation_id)
    assert pause.status == PauseStatus.RESOLVED
    snapshot = alice_client.get(f"/agents/{conversation_id}").json()
    assert snapshot["state"] == "EXECUTION_INTERRUPTED" and snapshot["output"] == []
    last = approver_client.get(f"/agents/{conversation_id}/approval-status").json()["lastDecision"]
    assert (last["verdict"], last["decidedBy"], last["cancelledBy"]) == ("APPROVED", "approver", "alice")
    verbs = list(
        AuditEntry.objects.filter(subject_id=conversation_id)
        .order_by("sequence")
        .values_list("verb", flat=True)
    )
    assert verbs == ["hitl.pause", "hitl.approval", "hitl.turn.interrupted", "hitl.continuation.cancelled"]
