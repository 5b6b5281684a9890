"""Tool-call pauses on the admin decision page: each call with its pinning badge and warnings, whatever the
gate stored, per-call verdicts and amended arguments, and where the service's errors land."""

from __future__ import annotations

import pytest

from approvals.models import Pause, PauseStatus
from tests.approvals.test_admin_inbox import logged_in, make_tool_call_pause, page, paused_pause
from toolgate.gate.journal import claim
from toolgate.models import UNRESOLVED_FINGERPRINT, PendingToolBatch, PendingToolCall

pytestmark = pytest.mark.django_db


def test_a_tool_call_page_shows_each_call_with_its_pinning_badge_and_warnings(alice, approver):
    pause = make_tool_call_pause(
        paused_pause(alice), outcome_unknown=["call-1"], executed_ungated=["lookup_balance"]
    )
    response = logged_in(approver).get(page(pause))
    html = response.content.decode()
    for text in (
        "transfer_funds",
        "send_email",
        "DE** redacted **",
        "transfer_*",
        "send_*",
        "POST https://payments.example/transfers",
        "PINNED",
        "NOT PINNED",
        "Outcome unknown",
        "the outcome is unknown",
        "lookup_balance",
    ):
        assert text in html, text
    calls = {call.call_id: call for call in response.context["review"].calls}
    assert calls["call-1"].pinned and not calls["call-2"].pinned
    assert 'name="call_0_amended"' in html and 'name="call_1_verdict"' in html


def stored_calls(pause: Pause):
    return PendingToolCall.objects.filter(batch__pause=pause)


# What the tool gate's details provider reads (toolgate.gate.pause_details): the stored batch, its calls and
# the journal. Each case stores something unusual there and names what the page must then show.
STORED_BATCHES = {
    "no batch": (
        lambda pause: PendingToolBatch.objects.filter(pause=pause).delete(),
        lambda review: review.calls == [] and review.executed_ungated == [],
    ),
    "a batch without calls": (
        lambda pause: stored_calls(pause).delete(),
        lambda review: (
            review.calls == [] and [n.tool_name for n in review.executed_ungated] == ["lookup_balance"]
        ),
    ),
    "a request unresolved at the gate": (
        lambda pause: (
            stored_calls(pause)
            .filter(call_id="call-1")
            .update(request_fingerprint=UNRESOLVED_FINGERPRINT, request_preview=None)
        ),
        lambda review: not review.calls[0].pinned and review.calls[0].request_preview == "",
    ),
    "truncated arguments": (
        lambda pause: (
            stored_calls(pause)
            .filter(call_id="call-1")
            .update(args_truncated=True, arguments_raw='{"amount": 25', arguments_redacted='{"amount": 25')
        ),
        lambda review: review.calls[0].args_truncated and review.calls[0].arguments == '{"amount": 25',
    ),
    "no matched rule": (
        lambda pause: stored_calls(pause).filter(call_id="call-1").update(matched_rule=""),
        lambda review: review.calls[0].matched_rule == "" and review.calls[0].gate_reason == "transfer_*",
    ),
    "ungated calls that ran first": (
        lambda pause: PendingToolBatch.objects.filter(pause=pause).update(
            executed_ungated_calls=["lookup_balance", "lookup_rates"]
        ),
        lambda review: [n.tool_name for n in review.executed_ungated] == ["lookup_balance", "lookup_rates"],
    ),
    "a claim never recorded": (
        lambda pause: claim(
            conversation_id=pause.subject_id,
            pause_epoch=pause.epoch,
            call_id="call-2",
            tool_name="send_email",
            decided_by="approver",
        ),
        lambda review: (
            [(n.call_id, n.tool_name) for n in review.outcome_unknown] == [("call-2", "send_email")]
        ),
    ),
}


@pytest.mark.parametrize("stored", STORED_BATCHES.values(), ids=STORED_BATCHES.keys())
def test_a_tool_call_page_shows_whatever_the_gate_stored(alice, approver, stored):
    change, shown = stored
    pause = make_tool_call_pause(paused_pause(alice), executed_ungated=["lookup_balance"])
    change(pause)
    response = logged_in(approver).get(page(pause))
    assert response.status_code == 200
    assert shown(response.context["review"]), response.context["review"]


def test_per_call_verdicts_and_amended_arguments_reach_the_service(alice, approver):
    pause = make_tool_call_pause(paused_pause(alice))
    response = logged_in(approver).post(
        page(pause),
        {
            "expected_pause_id": str(pause.pk),
            "verdict": "APPROVED",
            "note": "one of two",
            "call_0_verdict": "",
            "call_0_amended": '{"amount": 100, "iban": "DE00"}',
            "call_1_verdict": "REJECTED",
            "call_1_note": "no emails today",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    pause.refresh_from_db()
    assert pause.status != PauseStatus.PENDING
    assert pause.decision_details == {
        "toolDecisions": {
            "call-1": {"verdict": "APPROVED", "amendedArguments": '{"amount": 100, "iban": "DE00"}'},
            "call-2": {"verdict": "REJECTED", "note": "no emails today"},
        }
    }


@pytest.mark.parametrize(
    ("amended", "verdict", "error"),
    [
        ("{not json", "", "Call transfer_funds: the edited arguments are not valid JSON (line 1, column 2)."),
        ("[1, 2]", "", "Call transfer_funds: the edited arguments must be a JSON object"),
        ('{"amount": 1}', "REJECTED", "Call transfer_funds: only an approved call can be edited."),
    ],
)
def test_bad_amended_arguments_are_kept_on_the_form_with_the_error(alice, approver, amended, verdict, error):
    pause = make_tool_call_pause(paused_pause(alice))
    response = logged_in(approver).post(
        page(pause),
        {
            "expected_pause_id": str(pause.pk),
            "verdict": "APPROVED",
            "call_0_verdict": verdict,
            "call_0_amended": amended,
        },
    )
    assert response.status_code == 200
    form = response.context["form"]
    assert error in str(form.errors["call_0_amended"])
    assert form["call_0_amended"].value() == amended
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING


def test_service_field_errors_land_on_the_call_they_name(alice, approver, monkeypatch):
    from approvals.admin import decision as admin_decision
    from common.errors import BadRequest

    pause = make_tool_call_pause(paused_pause(alice))

    def refuse(**kwargs):
        raise BadRequest(
            "bad amendment",
            errors=[{"field": "toolDecisions.call-2.amendedArguments", "message": "unknown argument 'cc'"}],
        )

    monkeypatch.setattr(admin_decision, "decide_and_continue", refuse)
    response = logged_in(approver).post(
        page(pause),
        {"expected_pause_id": str(pause.pk), "verdict": "APPROVED", "call_1_amended": '{"cc": "x"}'},
    )
    assert response.status_code == 200
    assert response.context["form"].errors["call_1_amended"] == [
        "Call send_email: the edited arguments cannot be used: unknown argument 'cc'"
    ]
