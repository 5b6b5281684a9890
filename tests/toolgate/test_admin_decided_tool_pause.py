"""A decided tool pause reads as decided on the admin decision page: who decided what and when, the
reviewer's amended arguments beside the model's, what each call returned (redacted), and the turns up to
the decision for the reviewer who decided it. A real agent, the scripted model, a gated http tool on a
real loopback server, decided through the admin form."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.models import Pause, PauseStatus
from approvals.timers import fire_timeout
from harnesses.factories import say
from harnesses.queue_drain import run_queued_tasks
from harnesses.users import make_user
from tests.approvals.test_admin_inbox import logged_in, make_tool_call_pause, page, paused_pause
from tests.toolgate.test_tool_pauses import paused_transfer, transfers
from toolgate.gate.journal import claim, mark_executed

pytestmark = pytest.mark.django_db

SECRET = "sk-live-4f9a8b7c6d5e4f3a2b1c"


def decide_in_admin(reviewer, pause: Pause, **fields) -> None:
    response = logged_in(reviewer).post(page(pause), {"expected_pause_id": str(pause.pk), **fields})
    assert response.status_code == 302, response.content.decode()[:3000]
    run_queued_tasks()


def opened(reviewer, pause: Pause) -> str:
    response = logged_in(reviewer).get(page(pause))
    assert response.status_code == 200
    return response.content.decode()


def test_a_decided_tool_pause_shows_who_approved_the_edit_and_what_the_call_returned(
    alice_client, approver, http_recorder
):
    conversation_id, pause = paused_transfer(alice_client, http_recorder)
    decide_in_admin(
        approver, pause, verdict="APPROVED", note="half now", call_0_amended='{"amount": 50, "to": "bob"}'
    )
    assert [json.loads(r["body"])["amount"] for r in transfers(http_recorder)] == ["50"]

    html = opened(approver, pause)
    assert 'id="hitl-stale"' not in html and 'id="hitl-approve"' not in html  # no question, no buttons
    assert "Approved with an edit by approver at " in html and "Note: “half now”" in html
    assert "Ran once, at " in html
    # the model's arguments beside the reviewer's, the changed one marked
    assert (
        '<tr class="hitl-argument hitl-argument-changed" data-key="amount"><th><code>amount</code></th>'
        "<td><pre>100</pre></td><td><pre>50</pre> <strong" in html
    )
    assert '<tr class="hitl-argument" data-key="to">' in html
    assert "&quot;ok&quot;: true" in html.split('id="hitl-call-result-0"')[1]  # what the call returned
    # the reviewer who decided reads the turn the decision continued, with what it went on to say
    assert "Turns up to your decision" in html and "please transfer 100 to bob" in html
    assert "Done: " in html


def test_a_rejected_call_did_not_run_and_a_timeout_names_its_policy_not_the_stored_note(
    alice_client, approver, http_recorder
):
    conversation_id, pause = paused_transfer(
        alice_client,
        http_recorder,
        hitl_config={"approvalTimeout": "PT5M", "timeoutPolicy": "AUTO_REJECT"},
    )
    fire_timeout(str(pause.pk), now=timezone.now() + timedelta(minutes=6))
    run_queued_tasks()
    pause.refresh_from_db()
    assert pause.status != PauseStatus.PENDING and pause.note.startswith("Automatic rejected")

    html = opened(approver, pause)
    assert "Nobody decided before the deadline: its timeout policy (AUTO_REJECT) rejected it at " in html
    assert "Automatic rejected" not in html
    assert "Did not run: rejected." in html and transfers(http_recorder) == []
    history = logged_in(approver).get("/admin/approvals/decidedapproval/?decided_by=all").content.decode()
    assert "Nobody decided in time: rejected by its policy (AUTO_REJECT)." in history
    assert "Automatic rejected" not in history


def test_what_a_call_returned_is_shown_redacted(alice, approver):
    pause = make_tool_call_pause(paused_pause(alice))
    claim(
        conversation_id=pause.subject_id,
        pause_epoch=pause.epoch,
        call_id="call-1",
        tool_name="transfer_funds",
        decided_by="approver",
    )
    mark_executed(
        pause_epoch=pause.epoch,
        call_id="call-1",
        result=json.dumps({"status": 201, "body": {"api_key": SECRET, "auth": f"Bearer {SECRET}xyz"}}),
    )
    Pause.objects.filter(pk=pause.pk).update(
        status=PauseStatus.RESOLVED,
        verdict="APPROVED",
        decided_by="approver",
        decided_by_user=approver,
        decided_at=timezone.now(),
        decision_details={"toolDecisions": {"call-2": {"verdict": "REJECTED", "note": "no emails"}}},
    )
    html = opened(approver, pause)
    assert SECRET not in html and "&lt;REDACTED&gt;" in html
    assert 'id="hitl-call-result-0"' in html and 'id="hitl-call-result-1"' not in html
    assert "Did not run: rejected." in html and "Note: “no emails”" in html


def test_the_reviewer_who_decided_reads_the_turns_up_to_the_decision_and_no_later(
    alice, alice_client, approver, admin_user, http_recorder
):
    conversation_id, pause = paused_transfer(alice_client, http_recorder)
    decide_in_admin(approver, pause, verdict="REJECTED", note="not today")
    say(alice_client, conversation_id, "what about my savings plan")

    decider = opened(approver, pause)
    assert "please transfer 100 to bob" in decider and "savings plan" not in decider
    assert "Rejected by approver at " in decider and "Note: “not today”" in decider

    other = make_user("other-approver", "approver")
    assert "please transfer 100 to bob" not in opened(other, pause)  # approvers read only while it waits

    as_admin = opened(admin_user, pause)
    assert "savings plan" in as_admin  # admins (and the owner) read every turn
    asked = as_admin[as_admin.index('id="hitl-requester-input"') :][:300]
    assert "please transfer 100 to bob" in asked  # what was asked is the paused turn's, not the latest
