"""Editing a tool call on the admin decision page: an input per argument prefilled with the value as the
reviewer is shown it (as the model wrote it, a credential-shaped one with a warning); nothing changed is no
amendment; a changed field amends only itself and an untouched value keeps its real value; the JSON box
for adding and removing keys; a <REDACTED> marker copied from a redacted view is merged or refused as on
every surface; errors in reviewer words by the input they are about."""

from __future__ import annotations

import json

import pytest

from approvals.models import Pause, PauseStatus
from common.errors import BadRequest
from tests.approvals.test_admin_inbox import logged_in, make_tool_call_pause, page, paused_pause
from toolgate.models import PendingToolCall

pytestmark = pytest.mark.django_db

SECRET = "tok-live-9f8e7d6c5b4a"
NESTED_SECRET = "hunter2hunter2"
ARGUMENTS = {
    "amount": 250,
    "iban": "DE89 3704 0044 0532 0130 00",
    "api_token": SECRET,
    "urgent": False,
    "meta": {"ref": "r-1", "password": NESTED_SECRET},
    "tags": ["rent"],
}
# the per-argument inputs of call 0, in the order of the arguments
AMOUNT, IBAN, TOKEN, URGENT, META, TAGS = (f"call_0_arg_{i}" for i in range(6))
JSON_BOX = "call_0_amended"


def secret_call_pause(alice) -> Pause:
    calls = [
        {"callId": "call-1", "toolName": "transfer_funds", "source": "builtin", "arguments": ARGUMENTS},
        {
            "callId": "call-2",
            "toolName": "send_email",
            "source": "builtin",
            "arguments": {"to": "a@example.org"},
        },
    ]
    return make_tool_call_pause(paused_pause(alice), calls)


def as_shown(client, pause: Pause) -> dict[str, str]:
    """What a browser posts when the reviewer changes nothing: every field with the value it starts with."""
    form = client.get(page(pause)).context["form"]
    posted = {name: form[name].value() for name in form.fields if form[name].value() is not None}
    return {**posted, "expected_pause_id": str(pause.pk), "verdict": "APPROVED"}


def decided_call(pause: Pause) -> dict:
    pause.refresh_from_db()
    assert pause.status != PauseStatus.PENDING
    return pause.decision_details.get("toolDecisions", {}).get("call-1", {})


def test_the_amend_box_starts_with_the_values_as_the_model_wrote_them(alice, approver):
    pause = secret_call_pause(alice)
    response = logged_in(approver).get(page(pause))
    html = response.content.decode()
    form = response.context["form"]
    assert form[AMOUNT].value() == "250" and 'type="number"' in str(form[AMOUNT])
    assert form[IBAN].value() == ARGUMENTS["iban"]
    assert form[TOKEN].value() == SECRET and "hitl-credential-warning" in html
    assert form[URGENT].value() == "false" and "<select" in str(form[URGENT])
    assert json.loads(form[META].value()) == {"ref": "r-1", "password": NESTED_SECRET}
    assert json.loads(form[TAGS].value()) == ["rent"]
    assert json.loads(form[JSON_BOX].value())["api_token"] == SECRET
    assert 'id="hitl-amend-reset-0"' in html and "hitl_amend.js" in html


def test_an_unchanged_form_is_not_an_amendment(alice, approver):
    pause = secret_call_pause(alice)
    client = logged_in(approver)
    response = client.post(page(pause), as_shown(client, pause))
    assert response.status_code == 302, response.content.decode()[:2000]
    assert decided_call(pause) == {"verdict": "APPROVED"}


def test_a_changed_number_field_amends_only_that_field_and_the_untouched_secrets_keep_their_values(
    alice, approver
):
    pause = secret_call_pause(alice)
    client = logged_in(approver)
    response = client.post(page(pause), {**as_shown(client, pause), AMOUNT: "300"})
    assert response.status_code == 302, response.content.decode()[:2000]
    amended = json.loads(decided_call(pause)["amendedArguments"])
    assert amended == {**ARGUMENTS, "amount": 300}


def test_the_json_box_adds_and_removes_keys(alice, approver):
    pause = secret_call_pause(alice)
    client = logged_in(approver)
    shown = as_shown(client, pause)
    edited = json.loads(shown[JSON_BOX])
    del edited["tags"]
    edited["cc"] = "ops@example.org"
    response = client.post(page(pause), {**shown, JSON_BOX: json.dumps(edited, indent=2)})
    assert response.status_code == 302, response.content.decode()[:2000]
    expected = {key: value for key, value in ARGUMENTS.items() if key != "tags"}
    assert json.loads(decided_call(pause)["amendedArguments"]) == {**expected, "cc": "ops@example.org"}


def test_the_json_box_reformatted_but_equal_is_not_an_amendment(alice, approver):
    pause = secret_call_pause(alice)
    client = logged_in(approver)
    shown = as_shown(client, pause)
    compact = json.dumps(json.loads(shown[JSON_BOX]), separators=(",", ":"))
    assert client.post(page(pause), {**shown, JSON_BOX: compact}).status_code == 302
    assert decided_call(pause) == {"verdict": "APPROVED"}


def posted_with_error(client, pause: Pause, changes: dict[str, str]):
    response = client.post(page(pause), {**as_shown(client, pause), **changes})
    assert response.status_code == 200
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING
    return response.context["form"]


def test_fields_and_a_json_that_disagree_are_refused(alice, approver):
    pause = secret_call_pause(alice)
    client = logged_in(approver)
    form = posted_with_error(client, pause, {AMOUNT: "1", JSON_BOX: '{"amount": 2}'})
    assert "the fields and the JSON say different things" in str(form.errors[JSON_BOX])


def test_fields_and_a_json_that_agree_are_one_edit(alice, approver):
    """What the page's script posts: a field changed, and the JSON it wrote from it (a key added too)."""
    pause = secret_call_pause(alice)
    client = logged_in(approver)
    shown = as_shown(client, pause)
    edited = {**json.loads(shown[JSON_BOX]), "amount": 90, "cc": "ops@example.org"}
    response = client.post(page(pause), {**shown, AMOUNT: "90", JSON_BOX: json.dumps(edited, indent=2)})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert json.loads(decided_call(pause)["amendedArguments"]) == {
        **ARGUMENTS,
        "amount": 90,
        "cc": "ops@example.org",
    }


BAD_FIELDS = {
    "a number that is none": ({AMOUNT: "lots"}, AMOUNT, "Call transfer_funds: amount must be a number."),
    "an object that is no JSON": (
        {META: '{"ref": '},
        META,
        "Call transfer_funds: meta is not valid JSON (line 1, column 9).",
    ),
    "a partly edited secret": (
        {TOKEN: "x<REDACTED>"},
        TOKEN,
        "Call transfer_funds: api_token still shows <REDACTED> but was edited. Replace the whole value, "
        "or leave it exactly as shown (Reset) to keep the real one.",
    ),
    "a secret partly edited inside an object": (
        {META: '{"ref": "r-1", "password": "<REDACTED>!"}'},
        META,
        "Call transfer_funds: meta.password still shows <REDACTED>",
    ),
    "a new key carrying the marker": (
        {JSON_BOX: '{"amount": 1, "cc": "<REDACTED>"}'},
        JSON_BOX,
        "Call transfer_funds: cc holds <REDACTED>, which only stands for a secret where one was shown.",
    ),
    "an edit of a call set to Reject": (
        {AMOUNT: "1", "call_0_verdict": "REJECTED"},
        AMOUNT,
        "Call transfer_funds: only an approved call can be edited. Set this call to Approve, "
        "or leave its arguments as shown.",
    ),
}


@pytest.mark.parametrize("case", BAD_FIELDS.values(), ids=BAD_FIELDS.keys())
def test_a_bad_edit_is_said_in_reviewer_words_by_its_input_and_decides_nothing(alice, approver, case):
    changes, field, words = case
    pause = secret_call_pause(alice)
    client = logged_in(approver)
    form = posted_with_error(client, pause, changes)
    assert words in " ".join(form.errors[field]), form.errors
    assert "toolDecisions" not in json.dumps(form.errors)


def test_a_rejected_request_with_an_approved_call_says_what_to_choose(alice, approver):
    pause = secret_call_pause(alice)
    client = logged_in(approver)
    form = posted_with_error(client, pause, {"verdict": "REJECTED", "call_1_verdict": "APPROVED"})
    assert form.errors["call_1_verdict"] == [
        "You rejected the request, so send_email cannot be approved on its own. Choose Approve, "
        "or set this call to Reject."
    ]


def test_the_services_contradiction_error_is_said_in_reviewer_words(alice, approver, monkeypatch):
    from approvals.admin import decision as admin_decision

    def refuse(**kwargs):
        message = (
            "top-level verdict is REJECTED but toolDecisions contains an APPROVED call; set the top-level"
        )
        raise BadRequest(message, errors=[{"field": "toolDecisions", "message": message}])

    monkeypatch.setattr(admin_decision, "decide_and_continue", refuse)
    pause = secret_call_pause(alice)
    client = logged_in(approver)
    form = posted_with_error(client, pause, {})
    assert form.non_field_errors() == [
        "You rejected the request, so transfer_funds, send_email cannot be approved on its own. "
        "Choose Approve, or set this call to Reject."
    ]


def test_a_truncated_call_has_no_inputs_and_says_it_cannot_be_edited(alice, approver):
    pause = secret_call_pause(alice)
    PendingToolCall.objects.filter(batch__pause=pause, call_id="call-1").update(
        args_truncated=True, arguments_redacted='{"amount": 250'
    )
    response = logged_in(approver).get(page(pause))
    assert "cannot be edited: approve or reject it as it is" in response.content.decode()
    assert JSON_BOX not in response.context["form"].fields and AMOUNT not in response.context["form"].fields
    assert "call_1_amended" in response.context["form"].fields
