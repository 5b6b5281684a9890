"""Reply with guidance and cancel the request, from the decision page: both audited,
both stale-safe, guidance never empty, cancel only after a confirmation."""

from __future__ import annotations

import json

import pytest

from approvals.decision_input import GUIDANCE_REQUIRED
from approvals.models import AuditEntry, Pause, PauseStatus
from conversations.models import Conversation
from harnesses.agents import payments_agent
from harnesses.factories import account_bot, deployed_agent, say, start
from harnesses.queue_drain import run_queued_tasks
from harnesses.users import client_for
from tests.approvals.test_admin_inbox import INBOX, logged_in, page, paused_pause, snapshot
from toolgate.runtime.tool_continuation import REJECTION_INSTRUCTION

pytestmark = pytest.mark.django_db

GUIDANCE = "Ask for the account number first, then try again."


def respond(client, pause: Pause, guidance: str, **extra):
    body = {"expected_pause_id": str(pause.pk), "hitl_action": "respond", "guidance": guidance, **extra}
    return client.post(page(pause), body)


def cancel(client, pause: Pause, **extra):
    return client.post(page(pause), {"expected_pause_id": str(pause.pk), "hitl_action": "cancel", **extra})


def approvals_of(pause: Pause):
    return AuditEntry.objects.filter(pause_id=pause.pk, verb="hitl.approval")


@pytest.mark.parametrize("guidance", ["", "   \n "])
def test_reply_with_guidance_without_a_note_decides_nothing(alice, approver, guidance):
    pause = paused_pause(alice)
    response = respond(logged_in(approver), pause, guidance)
    assert response.status_code == 400
    assert GUIDANCE_REQUIRED in response.content.decode()
    pause.refresh_from_db()
    assert pause.status == PauseStatus.PENDING and not approvals_of(pause).exists()


def test_reply_with_guidance_tells_the_conversation_the_guidance_and_is_audited(alice, approver):
    pause = paused_pause(alice)
    client = logged_in(approver)
    response = respond(client, pause, GUIDANCE)
    assert response.status_code == 302 and response["Location"] == INBOX
    message = str(list(client.get(INBOX).context["messages"])[0])
    assert message.startswith("Replied with guidance: conversation") and "It has continued." in message
    run_queued_tasks()
    pause.refresh_from_db()
    assert (pause.verdict, pause.note, pause.decision_details) == ("REJECTED", GUIDANCE, {"guidance": True})
    assert snapshot(alice, pause)["output"] == [
        f"This action was rejected by a human reviewer. The reviewer declined and gave guidance: {GUIDANCE}"
    ]
    entry = approvals_of(pause).get()
    assert (entry.actor, entry.verdict, entry.note) == ("approver", "REJECTED", GUIDANCE)
    assert entry.detail["reviewerAction"] == "reply_with_guidance"


def test_the_model_sees_the_guidance_as_an_instruction(alice, approver, http_recorder):
    client = client_for(alice)
    conversation_id = start(client, deployed_agent(payments_agent(http_recorder.url)))
    assert say(client, conversation_id, "please transfer 100 to bob").json()["state"] == "AWAITING_HUMAN"
    pause = Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)
    assert respond(logged_in(approver), pause, GUIDANCE).status_code == 302
    run_queued_tasks()
    assert [r for r in http_recorder.requests if r["path"] == "/transfers"] == []
    output = client.get(f"/agents/{conversation_id}").json()["output"][-1]
    (result,) = json.loads(output.removeprefix("Done: "))
    assert result["status"] == "REJECTED_BY_REVIEWER"
    instruction = result["result"]["instruction"]
    assert instruction.startswith(f"The reviewer declined this call and gave guidance: {GUIDANCE}")
    assert "follow it" in instruction and instruction != REJECTION_INSTRUCTION


def test_a_plain_reject_keeps_the_plain_instruction(alice, approver, http_recorder):
    client = client_for(alice)
    conversation_id = start(client, deployed_agent(payments_agent(http_recorder.url)))
    say(client, conversation_id, "please transfer 100 to bob")
    pause = Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)
    logged_in(approver).post(
        page(pause), {"expected_pause_id": str(pause.pk), "verdict": "REJECTED", "note": "no"}
    )
    run_queued_tasks()
    output = client.get(f"/agents/{conversation_id}").json()["output"][-1]
    (result,) = json.loads(output.removeprefix("Done: "))
    assert result["result"]["instruction"] == REJECTION_INSTRUCTION


def test_reply_with_guidance_on_a_stale_page_changes_nothing(alice, approver, admin_user):
    pause = paused_pause(alice)
    logged_in(admin_user).post(page(pause), {"expected_pause_id": str(pause.pk), "verdict": "APPROVED"})
    response = respond(logged_in(approver), pause, GUIDANCE)
    assert response.status_code == 409 and 'id="hitl-stale"' in response.content.decode()
    pause.refresh_from_db()
    assert pause.verdict == "APPROVED" and approvals_of(pause).count() == 1


def test_a_response_posted_for_another_pause_changes_nothing(alice, approver):
    pause, other = paused_pause(alice), paused_pause(alice)
    client = logged_in(approver)
    for posted in (
        client.post(
            page(pause), {"expected_pause_id": str(other.pk), "hitl_action": "respond", "guidance": "x"}
        ),
        client.post(
            page(pause), {"expected_pause_id": str(other.pk), "hitl_action": "cancel", "confirm": "yes"}
        ),
    ):
        assert posted.status_code == 409
    for each in (pause, other):
        each.refresh_from_db()
        assert each.status == PauseStatus.PENDING and not approvals_of(each).exists()


def test_cancel_needs_confirmation(alice, approver):
    pause = paused_pause(alice)
    client = logged_in(approver)
    asked = cancel(client, pause)
    assert asked.status_code == 200
    html = asked.content.decode()
    assert 'id="hitl-cancel-confirm-form"' in html and 'name="confirm" value="yes"' in html
    assert "Cancel this request?" in html
    pause.refresh_from_db()
    assert pause.status == PauseStatus.PENDING and not approvals_of(pause).exists()
    for not_yes in ("no", "", "YES "):
        cancel(client, pause, confirm=not_yes)
        pause.refresh_from_db()
        assert pause.status == PauseStatus.PENDING


def test_a_confirmed_cancel_is_the_rest_cancel_and_says_so_in_the_audit(alice, approver):
    pause = paused_pause(alice)
    response = cancel(logged_in(approver), pause, confirm="yes")
    assert response.status_code == 302 and response["Location"] == INBOX
    pause.refresh_from_db()
    assert (pause.status, pause.verdict, pause.decided_by) == ("CANCELLED", "CANCELLED", "approver")
    assert Conversation.objects.get(pk=pause.subject_id).state == "EXECUTION_INTERRUPTED"
    entry = approvals_of(pause).get()
    assert (entry.actor, entry.verdict) == ("approver", "CANCELLED")
    assert entry.detail["mode"] == "CANCEL_GRACEFUL" and entry.detail["reviewerAction"] == "cancel_request"


def test_a_confirmed_cancel_on_a_stale_page_changes_nothing(alice, approver, admin_user):
    pause = paused_pause(alice)
    logged_in(admin_user).post(page(pause), {"expected_pause_id": str(pause.pk), "verdict": "REJECTED"})
    run_queued_tasks()
    response = cancel(logged_in(approver), pause, confirm="yes")
    assert response.status_code == 409 and 'id="hitl-stale"' in response.content.decode()
    pause.refresh_from_db()
    assert pause.verdict == "REJECTED" and approvals_of(pause).count() == 1


def test_the_requester_who_may_not_approve_gets_the_cancel_button_and_may_cancel(approver):
    from tests.approvals.test_admin_inbox import staff

    owner = staff("owner")
    document = account_bot()
    document["hitlConfig"]["allowSelfApproval"] = False
    pause = paused_pause(owner, deployed_agent(document))
    client = logged_in(owner)
    html = client.get(page(pause)).content.decode()
    assert 'id="hitl-only-cancel"' in html and 'id="hitl-cancel-request"' in html
    assert 'id="hitl-reply-guidance"' not in html and 'id="hitl-approve"' not in html
    assert 'id="hitl-outlook-cancel"' in html and 'id="hitl-outlook-approve"' not in html
    refused = respond(client, pause, GUIDANCE)  # guidance is a decision: she may not make it
    assert refused.status_code == 403
    pause.refresh_from_db()
    assert pause.status == PauseStatus.PENDING
    assert cancel(client, pause, confirm="yes").status_code == 302
    pause.refresh_from_db()
    assert (pause.status, pause.decided_by) == ("CANCELLED", "owner")


def test_someone_elses_pause_cannot_be_cancelled_from_the_page(alice):
    from tests.approvals.test_admin_inbox import staff

    pause = paused_pause(alice)
    response = cancel(logged_in(staff("mallory")), pause, confirm="yes")
    assert response.status_code == 404
    pause.refresh_from_db()
    assert pause.status == PauseStatus.PENDING


def test_a_group_pause_is_cancelled_like_the_discussion_cancel_and_takes_no_guidance(approver):
    from groups.models import GroupConversation
    from harnesses.members import discuss, echoing, group
    from harnesses.users import make_user

    group_id = group(
        [(echoing("worker"), "Writer")],
        [{"name": "Ideas", "type": "OPINION", "requiresApproval": True}],
        hitlConfig={"granularity": "PHASE"},
    )
    body = discuss(client_for(make_user("alice")), group_id, "Draft the release notes")
    pause = Pause.objects.get(subject_id=body["discussionId"], status=PauseStatus.PENDING)
    client = logged_in(approver)
    assert 'id="hitl-reply-guidance"' not in client.get(page(pause)).content.decode()
    refused = respond(client, pause, GUIDANCE)
    assert (
        refused.status_code == 400 and "Reply with guidance is for a conversation" in refused.content.decode()
    )
    assert cancel(client, pause, confirm="yes").status_code == 302
    pause.refresh_from_db()
    assert pause.status == PauseStatus.CANCELLED
    assert GroupConversation.objects.get(pk=pause.subject_id).state == "CANCELLED"
    assert approvals_of(pause).get().detail["reviewerAction"] == "cancel_request"


def test_a_rule_pause_does_not_say_a_model_reads_the_guidance(alice, approver):
    html = logged_in(approver).get(page(paused_pause(alice))).content.decode()
    guidance = html[html.index('<label for="hitl-guidance">') :]
    guidance = guidance[: guidance.index("</label>")]
    assert "the conversation is told it" in guidance and "the model reads" not in guidance
