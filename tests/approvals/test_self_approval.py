"""Separation of duties: with hitlConfig.allowSelfApproval false, the owner of the conversation and the
user whose turn raised the pause may cancel it but not approve or reject it, on every surface."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
import time_machine
from django.core.management import call_command
from django.test import Client

from approvals.models import AuditEntry, Pause, PauseStatus
from approvals.self_approval import SELF_APPROVAL_DETAIL, effective_allow_self_approval
from approvals.timers import fire_due_batch
from conversations.models import Conversation
from harnesses.agents import payments_agent
from harnesses.chat_stub import running_chat_stub
from harnesses.factories import account_bot, deployed_agent, paused_conversation, say, start
from harnesses.queue_drain import queued_count, run_queued_tasks
from harnesses.users import client_for, make_user

pytestmark = pytest.mark.django_db

INBOX = "/admin/approvals/pendingapproval/"
BULK = f"{INBOX}bulk-decide/"
MANAGER_SIGN_OFF = {
    "approvalTimeout": "PT15M",
    "timeoutPolicy": "AUTO_REJECT",
    "pauseReason": "Account deletion requires manager sign-off",
    "allowSelfApproval": False,
}


def sign_off_agent(**hitl_config) -> str:
    return deployed_agent(account_bot(hitlConfig={**MANAGER_SIGN_OFF, **hitl_config}))


def resume(client, conversation_id, verdict="APPROVED"):
    return client.post(
        f"/agents/{conversation_id}/resume", {"verdict": verdict, "note": "fine by me"}, format="json"
    )


def pending_pause(conversation_id) -> Pause:
    return Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)


def assert_refused(response) -> None:
    assert response.status_code == 403, response.content
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "FORBIDDEN"
    assert response.json()["detail"] == SELF_APPROVAL_DETAIL


def assert_nothing_consumed(conversation_id, audit_before: int) -> None:
    pause = Pause.objects.get(subject_id=conversation_id)
    assert pause.status == PauseStatus.PENDING
    assert (pause.verdict, pause.decided_by, pause.decided_at) == ("", "", None)
    assert Conversation.objects.get(pk=conversation_id).state == "AWAITING_HUMAN"
    assert queued_count() == 0
    assert AuditEntry.objects.count() == audit_before  # a refused attempt changed nothing, so no entry


def staff(username: str, role: str = "user"):
    user = make_user(username, role)
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    return user


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


# --- REST ------------------------------------------------------------------------------------------


def test_self_approval_refused_when_allow_self_approval_false(alice_client, approver_client):
    conversation_id = paused_conversation(alice_client, sign_off_agent())
    pause = pending_pause(conversation_id)
    assert pause.allow_self_approval is False and pause.raised_by.username == "alice"
    audit_before = AuditEntry.objects.count()
    for verdict in ("APPROVED", "REJECTED"):
        assert_refused(resume(alice_client, conversation_id, verdict))
    assert_nothing_consumed(conversation_id, audit_before)
    # someone else decides it as usual
    assert resume(approver_client, conversation_id).status_code == 200
    run_queued_tasks()
    assert alice_client.get(f"/agents/{conversation_id}").json()["output"] == ["Deletion APPROVED."]


def test_self_approval_refused_consumes_nothing_even_with_a_body_that_names_tool_decisions(alice_client):
    conversation_id = paused_conversation(alice_client, sign_off_agent())
    audit_before = AuditEntry.objects.count()
    response = alice_client.post(
        f"/agents/{conversation_id}/resume",
        {"verdict": "APPROVED", "toolDecisions": {"call-1": {"verdict": "APPROVED"}}},
        format="json",
    )
    assert_refused(response)  # who may decide comes before what the decision says about this pause
    assert_nothing_consumed(conversation_id, audit_before)


def test_self_approval_refused_for_an_admin_who_owns_the_conversation(admin_user, approver_client):
    admin_client = client_for(admin_user)
    conversation_id = paused_conversation(admin_client, sign_off_agent())
    assert_refused(resume(admin_client, conversation_id))
    other_admin = client_for(make_user("other-admin", "admin"))
    assert resume(other_admin, conversation_id).status_code == 200


def test_self_approval_refused_for_the_user_whose_turn_raised_the_pause(
    alice_client, admin_client, approver_client
):
    conversation_id = start(alice_client, sign_off_agent())
    assert say(admin_client, conversation_id, "please delete my account").json()["state"] == "AWAITING_HUMAN"
    pause = pending_pause(conversation_id)
    assert (pause.owner.username, pause.raised_by.username) == ("alice", "admin")
    assert_refused(resume(admin_client, conversation_id))  # she raised it
    assert_refused(resume(alice_client, conversation_id))  # it is her conversation
    assert resume(approver_client, conversation_id).status_code == 200


@pytest.mark.parametrize("verb", ["cancel", "endConversation"])
def test_cancel_still_allowed_when_self_approval_is_refused(alice_client, verb):
    conversation_id = paused_conversation(alice_client, sign_off_agent())
    assert_refused(resume(alice_client, conversation_id))
    response = alice_client.post(f"/agents/{conversation_id}/{verb}")
    assert response.status_code == 200, response.content
    pause = Pause.objects.get(subject_id=conversation_id)
    assert (pause.status, pause.verdict, pause.decided_by) == (PauseStatus.CANCELLED, "CANCELLED", "alice")
    assert (
        AuditEntry.objects.filter(pause_id=pause.id, verb="hitl.approval", verdict="CANCELLED").count() == 1
    )


def test_self_approval_allowed_by_default_as_in_the_reference(alice_client):
    conversation_id = paused_conversation(alice_client, deployed_agent(account_bot()))
    assert pending_pause(conversation_id).allow_self_approval is True
    assert resume(alice_client, conversation_id).status_code == 200


def test_self_approval_setting_default_applies_when_the_agent_does_not_say(alice_client, settings):
    settings.HITL_ALLOW_SELF_APPROVAL = False
    silent = paused_conversation(alice_client, deployed_agent(account_bot()))
    assert_refused(resume(alice_client, silent))
    # an agent that says so explicitly overrides the global default
    explicit = paused_conversation(alice_client, sign_off_agent(allowSelfApproval=True))
    assert resume(alice_client, explicit).status_code == 200


def test_self_approval_rule_is_frozen_on_the_pause_when_it_opens(alice_client, settings):
    settings.HITL_ALLOW_SELF_APPROVAL = False
    strict = paused_conversation(alice_client, deployed_agent(account_bot()))
    settings.HITL_ALLOW_SELF_APPROVAL = True
    lenient = paused_conversation(alice_client, deployed_agent(account_bot()))
    settings.HITL_ALLOW_SELF_APPROVAL = False
    # neither a later setting nor the entry in the audit ledger changes who may decide a pending pause
    assert_refused(resume(alice_client, strict))
    assert resume(alice_client, lenient).status_code == 200
    entry = AuditEntry.objects.get(pause_id=pending_pause(strict).id, verb="hitl.pause")
    assert entry.detail["allowSelfApproval"] is False


def test_self_approval_rule_does_not_stop_timers(alice_client):
    conversation_id = paused_conversation(alice_client, sign_off_agent())
    pause = pending_pause(conversation_id)
    with time_machine.travel(pause.due_at + timedelta(milliseconds=100), tick=False):
        assert fire_due_batch() == 1
    decided = Pause.objects.get(pk=pause.pk)
    assert (decided.verdict, decided.decided_by, decided.automated) == ("REJECTED", "system:timeout", True)


# --- tool rules ------------------------------------------------------------------------------------


def paused_transfer(client, server, document: dict | None = None, **agent_kwargs) -> tuple[str, Pause]:
    conversation_id = start(client, deployed_agent(document or payments_agent(server.url, **agent_kwargs)))
    response = say(client, conversation_id, "please transfer 100 to bob")
    assert response.json()["state"] == "AWAITING_HUMAN", response.json()
    return conversation_id, pending_pause(conversation_id)


def test_self_approval_tool_rule_strictest_wins(alice_client, approver_client, http_recorder):
    # The most specific rule (transfer_funds) tunes the call, but the broader one that forbids
    # self-approval matches it too: the strictest statement wins.
    approvals = {
        "requireApproval": ["transfer_*"],
        "rules": [
            {"match": "transfer_*", "allowSelfApproval": False},
            {
                "match": "transfer_funds",
                "pauseReason": "Money leaves: {toolNames}",
                "allowSelfApproval": True,
            },
        ],
    }
    conversation_id, pause = paused_transfer(alice_client, http_recorder, tool_approvals=approvals)
    assert pause.reason == "Money leaves: transfer_funds" and pause.allow_self_approval is False
    audit_before = AuditEntry.objects.count()
    assert_refused(resume(alice_client, conversation_id))
    assert_nothing_consumed(conversation_id, audit_before)
    assert [r for r in http_recorder.requests if r["path"] == "/transfers"] == []
    assert resume(approver_client, conversation_id).status_code == 200
    run_queued_tasks()
    assert len([r for r in http_recorder.requests if r["path"] == "/transfers"]) == 1


def test_self_approval_a_tool_rule_cannot_allow_what_the_agent_forbids(alice_client, http_recorder):
    approvals = {
        "requireApproval": ["transfer_*"],
        "rules": [{"match": "transfer_*", "allowSelfApproval": True}],
    }
    conversation_id, pause = paused_transfer(
        alice_client, http_recorder, tool_approvals=approvals, hitl_config={"allowSelfApproval": False}
    )
    assert pause.allow_self_approval is False
    assert_refused(resume(alice_client, conversation_id))


def test_self_approval_a_tool_rule_that_matches_no_gated_call_changes_nothing(alice_client, http_recorder):
    approvals = {
        "requireApproval": ["transfer_*", "get_balance"],
        "rules": [{"match": "get_balance", "allowSelfApproval": False}],
    }
    conversation_id, pause = paused_transfer(alice_client, http_recorder, tool_approvals=approvals)
    assert pause.allow_self_approval is True
    assert resume(alice_client, conversation_id).status_code == 200


def test_self_approval_a_second_pause_of_the_same_turn_is_still_raised_by_the_turns_user(
    alice_client, approver_client, http_recorder
):
    with running_chat_stub() as stub:
        stub.reply("How can I help?")  # the start of the conversation is a turn too
        stub.call_tools({"id": "call-1", "name": "transfer_funds", "arguments": {"amount": 100, "to": "bob"}})
        stub.call_tools({"id": "call-2", "name": "transfer_funds", "arguments": {"amount": 200, "to": "bob"}})
        stub.reply("Both transfers are done.")
        document = payments_agent(http_recorder.url, hitl_config={"allowSelfApproval": False})
        document["workflows"][0]["tasks"][0]["provider"] = {
            "type": "openai",
            "baseUrl": f"{stub.url}/v1",
            "apiKey": "sk-test",
            "model": "gpt-test",
        }
        conversation_id, first = paused_transfer(alice_client, http_recorder, document=document)
        assert resume(approver_client, conversation_id).status_code == 200
        run_queued_tasks()
        second = pending_pause(conversation_id)
        # the approver's decision continued alice's turn; the new pause is still alice's request
        assert second.pk != first.pk and second.raised_by.username == "alice"
        assert_refused(resume(alice_client, conversation_id))
        assert resume(approver_client, conversation_id).status_code == 200
        run_queued_tasks()
    assert alice_client.get(f"/agents/{conversation_id}").json()["output"][-1] == "Both transfers are done."


def test_self_approval_effective_value_strictest_wins(settings):
    settings.HITL_ALLOW_SELF_APPROVAL = True
    assert effective_allow_self_approval(None) is True
    assert effective_allow_self_approval({"allowSelfApproval": False}) is False
    assert (
        effective_allow_self_approval({}, [{"match": "a"}, {"match": "b", "allowSelfApproval": False}])
        is False
    )
    assert effective_allow_self_approval({"allowSelfApproval": False}, [{"allowSelfApproval": True}]) is False
    assert effective_allow_self_approval({"allowSelfApproval": "yes"}) is False  # unreadable fails closed
    settings.HITL_ALLOW_SELF_APPROVAL = False
    assert effective_allow_self_approval({}) is False
    assert effective_allow_self_approval({"allowSelfApproval": True}) is True
    assert effective_allow_self_approval({"allowSelfApproval": True}, [{"allowSelfApproval": False}]) is False


# --- admin -----------------------------------------------------------------------------------------


def test_self_approval_refused_on_the_admin_decision_page(approver):
    carol = staff("carol")  # staff, no role: she decides only her own conversations' pauses
    pause = pending_pause(paused_conversation(client_for(carol), sign_off_agent()))
    page = f"{INBOX}{pause.pk}/change/"
    client = logged_in(carol)
    html = client.get(page).content.decode()
    assert 'id="hitl-only-cancel"' in html and SELF_APPROVAL_DETAIL in html
    assert 'id="hitl-approve"' not in html and 'id="hitl-reject"' not in html
    audit_before = AuditEntry.objects.count()
    for verdict in ("APPROVED", "REJECTED"):
        response = client.post(page, {"expected_pause_id": str(pause.pk), "verdict": verdict, "note": "mine"})
        assert response.status_code == 403
        assert SELF_APPROVAL_DETAIL in response.content.decode()
    assert_nothing_consumed(pause.subject_id, audit_before)
    # the approver's page is the usual one, and deciding works
    approver_page = logged_in(approver).get(page).content.decode()
    assert 'id="hitl-approve"' in approver_page and 'id="hitl-only-cancel"' not in approver_page
    response = logged_in(approver).post(page, {"expected_pause_id": str(pause.pk), "verdict": "APPROVED"})
    assert response.status_code == 302
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.RESOLVED


def test_self_approval_refused_in_admin_bulk(alice):
    rita = staff("rita", "approver")  # an approver who asked for a deletion herself
    agent_id = sign_off_agent()
    hers = pending_pause(paused_conversation(client_for(rita), agent_id))
    alices = pending_pause(paused_conversation(client_for(alice), agent_id))
    client = logged_in(rita)
    confirmation = client.post(
        INBOX,
        {"action": "approve_selected", "index": "0", "_selected_action": [str(hers.pk), str(alices.pk)]},
    )
    assert confirmation.status_code == 200
    assert confirmation.context["to_decide"] == [alices]
    assert confirmation.context["only_cancel"] == [hers]
    assert f'name="pause_ids" value="{hers.pk}"' not in confirmation.content.decode()
    # a hand-made POST naming her own pause does not decide it either
    audit_before = AuditEntry.objects.filter(pause_id=hers.pk).count()
    response = client.post(
        BULK, {"verdict": "APPROVED", "pause_ids": [str(hers.pk), str(alices.pk)]}, follow=True
    )
    html = response.content.decode()
    assert "Approved 1 pause(s)" in html and SELF_APPROVAL_DETAIL in html
    assert Pause.objects.get(pk=hers.pk).status == PauseStatus.PENDING
    assert AuditEntry.objects.filter(pause_id=hers.pk).count() == audit_before
    assert Pause.objects.get(pk=alices.pk).status == PauseStatus.RESOLVING


# --- validation ------------------------------------------------------------------------------------


def error_fields(response) -> list[str]:
    assert response.status_code == 400, response.content
    return [error["field"] for error in response.json()["errors"]]


@pytest.mark.parametrize("value", ["false", 0, 1, [], {}])
def test_allow_self_approval_must_be_a_boolean(admin_client, value):
    document = account_bot(hitlConfig={**MANAGER_SIGN_OFF, "allowSelfApproval": value})
    response = admin_client.post("/agentstore/agents", document, format="json")
    assert error_fields(response) == ["hitlConfig.allowSelfApproval"]
    assert "hitlConfig.allowSelfApproval must be true or false" in response.json()["detail"]


def test_allow_self_approval_of_a_tool_rule_must_be_a_boolean(admin_client, http_recorder):
    approvals = {
        "requireApproval": ["transfer_*"],
        "rules": [{"match": "transfer_*", "allowSelfApproval": "no"}],
    }
    response = admin_client.post(
        "/agentstore/agents", payments_agent(http_recorder.url, tool_approvals=approvals), format="json"
    )
    assert error_fields(response) == ["hitlConfig.toolApprovals.rules[0].allowSelfApproval"]
    task_level = payments_agent(
        http_recorder.url,
        task_approvals={
            "requireApproval": ["transfer_*"],
            "rules": [{"match": "transfer_*", "allowSelfApproval": 1}],
        },
    )
    response = admin_client.post("/agentstore/agents", task_level, format="json")
    assert error_fields(response) == ["workflows[0].tasks[0].toolApprovals.rules[0].allowSelfApproval"]


def test_allow_self_approval_booleans_are_accepted(admin_client, http_recorder):
    for value in (True, False):
        approvals = {
            "requireApproval": ["transfer_*"],
            "rules": [{"match": "transfer_*", "allowSelfApproval": value}],
        }
        document = payments_agent(
            http_recorder.url, tool_approvals=approvals, hitl_config={"allowSelfApproval": value}
        )
        assert admin_client.post("/agentstore/agents", document, format="json").status_code == 201


# --- the demo ----------------------------------------------------------------------------------------


def test_the_demo_agent_forbids_self_approval_and_the_first_session_still_works(
    alice_client, approver_client
):
    out = io.StringIO()
    call_command("hitl_demo", stdout=out)
    agent_id = out.getvalue().strip().splitlines()[-1]
    conversation_id = paused_conversation(alice_client, agent_id)
    assert_refused(resume(alice_client, conversation_id))
    assert resume(approver_client, conversation_id).status_code == 200
    run_queued_tasks()
    assert alice_client.get(f"/agents/{conversation_id}").json()["output"] == ["Deletion APPROVED."]
