"""The decision page says what each button will do, from what the pause holds, shows
what the requester asked, and bulk confirmation rows tell their pauses apart without a query per row."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals.admin.outlook import short_input
from approvals.decision_notices import HUMAN_REJECTION_TEXT
from approvals.models import Pause, PauseStatus
from conversations.approval_outlook import remaining_step_labels
from harnesses.factories import account_bot, deployed_agent, say, start
from harnesses.members import discuss, echoing, group
from harnesses.users import client_for, make_user
from tests.approvals.test_admin_inbox import (
    INBOX,
    logged_in,
    make_tool_call_pause,
    page,
    paused_pause,
    staff,
)

pytestmark = pytest.mark.django_db

NOTIFY = {
    "id": "notify",
    "type": "httpcalls",
    "targetServerUrl": "https://ops:hunter2@hooks.example",
    "calls": [
        {
            "name": "call_confirm_deletion",
            "actions": ["confirm_deletion"],
            "request": {
                "method": "post",
                "path": "/notify?token=${vault:HOOK_TOKEN}",
                "headers": {"Authorization": "Bearer s3cr3t-value"},
                "body": '{"password": "p4ss"}',
            },
        },
        {"name": "never_fired", "actions": ["other_action"], "request": {"method": "GET", "path": "/x"}},
    ],
}


def notifying_agent() -> str:
    """The account bot with an http call its paused rule's action fires after the pause."""
    document = account_bot()
    document["workflows"][0]["tasks"].insert(2, NOTIFY)
    return deployed_agent(document)


def outlook_of(response):
    return response.context["outlook"]


def test_a_rule_pause_says_which_remaining_steps_run_on_approve(alice, approver):
    pause = paused_pause(alice, notifying_agent())
    outlook = outlook_of(logged_in(approver).get(page(pause)))
    assert outlook.approve == (
        "Approve: the turn goes on: it calls call_confirm_deletion (POST /notify), then sends the reply "
        "written for confirm_deletion."
    )


def test_the_steps_never_show_a_host_credential_query_header_or_body(alice, approver):
    pause = paused_pause(alice, notifying_agent())
    html = logged_in(approver).get(page(pause)).content.decode()
    outlook = html[html.index('id="hitl-outlook"') :]
    for secret in (
        "hunter2",
        "hooks.example",
        "HOOK_TOKEN",
        "s3cr3t",
        "Authorization",
        "p4ss",
        "never_fired",
    ):
        assert secret not in outlook, secret


def test_remaining_steps_follow_the_paused_task_and_its_actions_only():
    document = {
        "workflows": [
            {
                "id": "main",
                "tasks": [
                    {"id": "rules", "type": "behavior_rules"},
                    NOTIFY,
                    {"id": "later-rules", "type": "behavior_rules"},
                    {"id": "assistant", "type": "llm"},
                    {"id": "templating", "type": "templating"},
                ],
            }
        ]
    }
    labels = remaining_step_labels(
        document, workflow_id="main", task_index=0, actions=["PAUSE_CONVERSATION", "confirm_deletion"]
    )
    assert labels == [
        "calls call_confirm_deletion (POST /notify)",
        "checks its rules again (task later-rules; what they add runs too)",
        "asks the model (task assistant)",
    ]
    assert remaining_step_labels(document, workflow_id="gone", task_index=0, actions=[]) == []


def test_a_rule_pause_says_reject_skips_the_steps_and_tells_the_conversation(alice, approver):
    pause = paused_pause(alice, notifying_agent())
    outlook = outlook_of(logged_in(approver).get(page(pause)))
    assert outlook.reject.startswith("Reject: none of that runs; the conversation is told")
    assert HUMAN_REJECTION_TEXT in outlook.reject and "with your note" in outlook.reject


def test_a_tool_call_pause_names_the_request_each_call_would_send(alice, approver):
    pause = make_tool_call_pause(paused_pause(alice))
    outlook = outlook_of(logged_in(approver).get(page(pause)))
    transfer, email = outlook.calls
    assert transfer.approve == (
        "Approve: sends POST https://payments.example/transfers "
        "(pinned: it is sent only if the request is still exactly this one)."
    )
    assert email.approve == "Approve: runs the builtin tool send_email."
    assert "REJECTED_BY_REVIEWER" in transfer.reject and "with the note" in transfer.reject
    assert outlook.reject.startswith("Reject: no call runs; the model gets a rejection for each")


def test_a_group_pause_says_what_its_own_buttons_do(approver):
    alice = make_user("alice")
    worker = echoing("worker")
    group_id = group(
        [(worker, "Writer")],
        [{"name": "Ideas", "type": "OPINION", "requiresApproval": True}],
        hitlConfig={"granularity": "PHASE"},
    )
    body = discuss(client_for(alice), group_id, "Draft the release notes")
    pause = Pause.objects.get(subject_id=body["discussionId"], status=PauseStatus.PENDING)
    response = logged_in(approver).get(page(pause))
    outlook = outlook_of(response)
    assert outlook.approve == "Approve: complete the discussion (this is its last phase)."
    assert outlook.reject.startswith("Reject: fail the discussion.")
    assert outlook.guidance == "" and response.context["takes_guidance"] is False
    assert response.context["requester_input"] == "Draft the release notes"
    assert "a rejected task" not in response.content.decode()  # a PHASE gate has no tasks


def test_a_phase_gate_before_the_last_phase_continues_the_discussion(approver):
    alice = make_user("alice")
    group_id = group(
        [(echoing("worker"), "Writer")],
        [
            {"name": "Ideas", "type": "OPINION", "requiresApproval": True},
            {"name": "Challenge", "type": "CHALLENGE"},
        ],
        hitlConfig={"granularity": "PHASE"},
    )
    body = discuss(client_for(alice), group_id, "Draft the release notes")
    pause = Pause.objects.get(subject_id=body["discussionId"], status=PauseStatus.PENDING)
    assert outlook_of(logged_in(approver).get(page(pause))).approve == "Approve: continue the discussion."


def test_the_requester_input_is_shown_first_on_the_page(alice, approver):
    pause = paused_pause(alice)
    html = logged_in(approver).get(page(pause)).content.decode()
    box = html.index('id="hitl-requester-input"')
    assert box < html.index('id="hitl-details"')
    assert "What the requester asked" in html[box:] and "please delete my account" in html[box:]


def test_an_approver_sees_no_requester_input_once_the_pause_is_decided(alice, approver, admin_user):
    pause = paused_pause(alice)
    logged_in(admin_user).post(page(pause), {"expected_pause_id": str(pause.pk), "verdict": "APPROVED"})
    response = logged_in(approver).get(page(pause))
    assert response.context["requester_input"] is None and response.context["outlook"] is None
    assert 'id="hitl-requester-input"' not in response.content.decode()


# --- bulk confirmation ----------------------------------------------------------------------------------


def paused_with(owner, agent_id: str, text: str) -> Pause:
    client = client_for(owner)
    conversation_id = start(client, agent_id)
    assert say(client, conversation_id, text).json()["state"] == "AWAITING_HUMAN"
    return Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)


def confirm(client, pauses: list[Pause]):
    return client.post(
        INBOX, {"action": "approve_selected", "_selected_action": [str(p.pk) for p in pauses], "index": 0}
    )


def test_bulk_rows_show_requester_input_and_agent_not_one_reason_repeated(approver):
    agent_id = deployed_agent()
    owners = [staff("ann"), staff("ben")]
    pauses = [
        paused_with(owners[0], agent_id, "please delete my account, I moved to Berlin"),
        paused_with(owners[1], agent_id, "delete my account now"),
    ]
    response = confirm(logged_in(approver), pauses)
    assert response.status_code == 200
    rows = {row.pause.pk: row for row in response.context["rows"]}
    assert rows[pauses[0].pk].requester_input == "please delete my account, I moved to Berlin"
    assert rows[pauses[1].pk].requester_input == "delete my account now"
    assert {row.agent for row in rows.values()} == {"account-bot v1"}
    html = response.content.decode()
    assert "ann" in html and "ben" in html and "I moved to Berlin" in html
    assert html.count("Account deletion requires manager sign-off</td>") == 1  # then "same as above"
    assert "same as above" in html


def test_bulk_confirmation_reads_inputs_and_names_without_a_query_per_row(approver):
    agent_id = deployed_agent()
    owner = staff("ann")
    client = logged_in(approver)
    few = [paused_with(owner, agent_id, f"delete my account {i}") for i in range(2)]
    many = few + [paused_with(owner, agent_id, f"delete my account {i}") for i in range(2, 8)]
    counts = []
    for pauses in (few, many):
        with CaptureQueriesContext(connection) as queries:
            assert confirm(client, pauses).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1], counts


def test_a_long_input_is_one_clamped_line():
    assert short_input("a\n  b") == "a b"
    clamped = short_input("x" * 500, limit=20)
    assert len(clamped) == 20 and clamped.endswith("…")
