"""Amending a call from a redacted view of its arguments (the owner's approval-status here; a Slack card or an
inbox likewise — only the decision views show them as sent): a value left as shown keeps the original, a
replaced value takes the new one, a marker anywhere else is refused with nothing decided. The rule is
toolgate.gate.amendments'; here through the REST resume endpoint against a real tool on loopback, and directly
on the merge."""

from __future__ import annotations

import hashlib
import json

import pytest

from approvals.models import AuditEntry, Pause, PauseStatus
from harnesses.agents import AFTER_TOOLS, payments_agent
from harnesses.factories import deployed_agent, say, start
from harnesses.queue_drain import run_queued_tasks
from toolgate.gate.amendments import AmendmentRefused, merged_amendment
from toolgate.models import PendingToolCall
from toolgate.outbound.redaction import REDACTED, redact

SECRET = "tok-live-9f8e7d6c5b4a"
ARGUMENTS = {"amount": 100, "to": "bob", "api_token": SECRET}


def secret_payments_agent(server_url: str) -> dict:
    """transfer_funds with an ``api_token`` argument the tool sends in its body."""
    script = [
        AFTER_TOOLS,
        {
            "when": {"inputContains": "transfer"},
            "toolCalls": [{"id": "call-1", "name": "transfer_funds", "arguments": ARGUMENTS}],
        },
        {"reply": "How can I help?"},
    ]
    agent = payments_agent(server_url, script=script)
    (payments,) = [task for task in agent["workflows"][0]["tasks"] if task["id"] == "payments"]
    transfer = payments["calls"][0]
    transfer["parameters"]["properties"]["api_token"] = {"type": "string"}
    transfer["request"]["body"]["token"] = "{args.api_token}"
    return agent


def paused(alice_client, server) -> tuple[str, dict]:
    conversation_id = start(alice_client, deployed_agent(secret_payments_agent(server.url)))
    assert (
        say(alice_client, conversation_id, "please transfer 100 to bob").json()["state"] == "AWAITING_HUMAN"
    )
    return conversation_id, ARGUMENTS


def shown_arguments(client, conversation_id: str) -> dict:
    details = client.get(f"/agents/{conversation_id}/approval-status").json()["pauseDetails"]
    (call,) = details["calls"]
    assert SECRET not in call["arguments"]
    return json.loads(call["arguments"])


def resume(client, conversation_id: str, amended: dict, *, as_text: bool = True):
    """Approve call-1 with ``amended``: its JSON text (the default), or the object itself."""
    sent = json.dumps(amended) if as_text else amended
    body = {
        "verdict": "APPROVED",
        "toolDecisions": {"call-1": {"verdict": "APPROVED", "amendedArguments": sent}},
    }
    response = client.post(f"/agents/{conversation_id}/resume", body, format="json")
    if response.status_code == 200:
        run_queued_tasks()
    return response


def sent_bodies(server) -> list[dict]:
    return [json.loads(r["body"]) for r in server.requests if r["path"] == "/transfers"]


def decided_arguments(conversation_id: str) -> str:
    pause = Pause.objects.get(subject_id=conversation_id)
    return pause.decision_details["toolDecisions"]["call-1"]["amendedArguments"]


def audit_digest(conversation_id: str) -> str:
    entry = AuditEntry.objects.get(verb="hitl.approval", subject_id=conversation_id)
    (call,) = entry.detail["toolDecisions"]
    assert call["amended"] is True
    assert SECRET not in json.dumps(entry.detail)
    return call["argsDigest"]


@pytest.mark.django_db
def test_a_redacted_field_left_as_shown_keeps_its_original_value(
    alice_client, approver_client, http_recorder
):
    conversation_id, _ = paused(alice_client, http_recorder)
    shown = shown_arguments(alice_client, conversation_id)
    assert shown["api_token"] == REDACTED
    response = resume(approver_client, conversation_id, {**shown, "amount": 50})
    assert response.status_code == 200, response.content
    assert sent_bodies(http_recorder) == [{"amount": "50", "to": "bob", "token": SECRET}]
    stored = decided_arguments(conversation_id)
    assert json.loads(stored) == {"amount": 50, "to": "bob", "api_token": SECRET}
    assert REDACTED not in stored
    assert audit_digest(conversation_id) == hashlib.sha256(stored.encode("utf-8")).hexdigest()


@pytest.mark.django_db
def test_a_replaced_redacted_field_takes_the_new_value(alice_client, approver_client, http_recorder):
    conversation_id, _ = paused(alice_client, http_recorder)
    shown = shown_arguments(alice_client, conversation_id)
    amended = {**shown, "api_token": "tok-rotated-0000000000"}
    assert resume(approver_client, conversation_id, amended).status_code == 200
    assert sent_bodies(http_recorder) == [{"amount": "100", "to": "bob", "token": "tok-rotated-0000000000"}]
    stored = decided_arguments(conversation_id)
    assert stored == json.dumps(amended)  # no marker left: the reviewer's text as sent
    assert audit_digest(conversation_id) == hashlib.sha256(stored.encode("utf-8")).hexdigest()


@pytest.mark.django_db
def test_a_partly_edited_redacted_value_is_refused_and_nothing_is_decided(
    alice_client, approver_client, http_recorder
):
    conversation_id, _ = paused(alice_client, http_recorder)
    shown = shown_arguments(alice_client, conversation_id)
    response = resume(approver_client, conversation_id, {**shown, "api_token": f"x{REDACTED}"})
    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert error["field"] == "toolDecisions.call-1.amendedArguments"
    assert error["argumentPath"] == ["api_token"]
    assert "api_token still contains <REDACTED>" in error["message"]
    assert "replace the whole redacted value or leave it as shown" in error["message"]
    pause = Pause.objects.get(subject_id=conversation_id)
    assert pause.status == PauseStatus.PENDING and pause.decision_details == {}
    assert sent_bodies(http_recorder) == []
    assert not AuditEntry.objects.filter(verb="hitl.approval", subject_id=conversation_id).exists()


# --- the merge itself -------------------------------------------------------------------------------

NESTED = {
    "to": "bob",
    "memo": {"ref": "r-1", "password": "hunter2hunter2"},
    "keys": [{"api_key": "k-1234567890"}, "plain"],
    "client_secret": 123456789012,
}


def call_with(arguments: dict) -> PendingToolCall:
    """A call as the gate stores it: raw arguments, and their redaction (never saved here)."""
    raw = json.dumps(arguments)
    return PendingToolCall(call_id="c", tool_name="t", arguments_raw=raw, arguments_redacted=redact(raw))


def merged(amended: dict, arguments: dict = NESTED) -> dict:
    return json.loads(merged_amendment(json.dumps(amended), amended, call_with(arguments)))


def shown_of(arguments: dict = NESTED) -> dict:
    return json.loads(redact(json.dumps(arguments)))


def test_nested_redacted_values_left_as_shown_keep_their_originals():
    shown = shown_of()
    assert shown["memo"]["password"] == REDACTED and shown["keys"][0]["api_key"] == REDACTED
    assert shown["client_secret"] == REDACTED  # a number shown as the marker comes back a number
    amended = {**shown, "memo": {**shown["memo"], "ref": "r-2"}, "to": "carol"}
    assert merged(amended) == {**NESTED, "memo": {"ref": "r-2", "password": "hunter2hunter2"}, "to": "carol"}


def test_arguments_sent_back_whole_as_shown_are_the_original_arguments():
    assert merged(shown_of()) == NESTED


def test_a_removed_key_is_removed_and_an_added_one_without_the_marker_is_added():
    shown = shown_of()
    del shown["memo"]
    assert merged({**shown, "cc": "ops"}) == {
        "to": "bob",
        "keys": NESTED["keys"],
        "client_secret": NESTED["client_secret"],
        "cc": "ops",
    }


def test_an_amendment_without_the_marker_is_kept_as_written():
    text = '{"to":  "carol"}'
    assert merged_amendment(text, json.loads(text), call_with(NESTED)) == text


REFUSED = {
    "a partly edited nested value": (
        lambda shown: {**shown, "memo": {"ref": "r-1", "password": f"{REDACTED}!"}},
        ["memo", "password"],
        "replace the whole redacted value or leave it as shown",
    ),
    "a new key holding the marker": (
        lambda shown: {**shown, "cc": REDACTED},
        ["cc"],
        "a new value cannot carry the marker",
    ),
    "a key holding the marker": (
        lambda shown: {**shown, f"x{REDACTED}": 1},
        [f"x{REDACTED}"],
        "a new value cannot carry the marker",
    ),
    "a redacted item moved in a list": (
        lambda shown: {**shown, "keys": ["plain", shown["keys"][0]]},
        ["keys", 1],
        "a new value cannot carry the marker",
    ),
    "a marker where a plain value was shown": (
        lambda shown: {**shown, "to": REDACTED},
        ["to"],
        "a new value cannot carry the marker",
    ),
}


@pytest.mark.parametrize("case", REFUSED.values(), ids=REFUSED.keys())
def test_a_marker_that_is_not_a_value_left_as_shown_is_refused(case):
    change, path, words = case
    with pytest.raises(AmendmentRefused) as refused:
        merged(change(shown_of()))
    assert list(refused.value.path) == path and words in str(refused.value)


def test_a_marker_is_refused_when_the_shown_arguments_are_no_json():
    call = PendingToolCall(arguments_raw=json.dumps(NESTED), arguments_redacted='{"to": "bob", "memo"')
    with pytest.raises(AmendmentRefused):
        merged_amendment(json.dumps({"to": REDACTED}), {"to": REDACTED}, call)


@pytest.mark.django_db
def test_amended_arguments_as_an_object_are_taken_as_its_json_text(
    alice_client, approver_client, http_recorder
):
    conversation_id, _ = paused(alice_client, http_recorder)
    shown = shown_arguments(alice_client, conversation_id)
    response = resume(approver_client, conversation_id, {**shown, "amount": 60}, as_text=False)
    assert response.status_code == 200, response.content
    assert sent_bodies(http_recorder) == [{"amount": "60", "to": "bob", "token": SECRET}]
    stored = decided_arguments(conversation_id)
    assert isinstance(stored, str) and json.loads(stored) == {"amount": 60, "to": "bob", "api_token": SECRET}
    assert audit_digest(conversation_id) == hashlib.sha256(stored.encode("utf-8")).hexdigest()


@pytest.mark.django_db
def test_amended_arguments_that_are_neither_an_object_nor_its_text_are_refused(
    alice_client, approver_client, http_recorder
):
    conversation_id, _ = paused(alice_client, http_recorder)
    body = {
        "verdict": "APPROVED",
        "toolDecisions": {"call-1": {"verdict": "APPROVED", "amendedArguments": [1]}},
    }
    response = approver_client.post(f"/agents/{conversation_id}/resume", body, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "toolDecisions.call-1.amendedArguments"
    assert Pause.objects.get(subject_id=conversation_id).status == PauseStatus.PENDING
