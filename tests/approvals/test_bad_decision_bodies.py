"""Bad decision bodies on every surface: a 400 naming the field, and the pause stays PENDING.

Bodies with NUL or lone surrogates are sent as raw JSON text with escapes (``\\u0000``, ``\\ud800``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from approvals.decision_input import VERDICT_REQUIRED
from approvals.models import AuditEntry, Pause, PauseStatus
from harnesses.factories import paused_conversation
from harnesses.queue_drain import queued_count
from tests.approvals.test_admin_inbox import BULK, logged_in, paused_pause
from tests.toolgate.test_tool_pauses import paused_transfer, transfers

pytestmark = pytest.mark.django_db


def resume_raw(client: Any, conversation_id: str, text: str) -> Any:
    return client.generic("POST", f"/agents/{conversation_id}/resume", text, content_type="application/json")


def assert_nothing_consumed(conversation_id: Any) -> None:
    pause = Pause.objects.get(subject_id=conversation_id)
    assert pause.status == PauseStatus.PENDING and pause.verdict == ""
    assert not AuditEntry.objects.filter(pause_id=pause.id, verb="hitl.approval").exists()
    assert queued_count() == 0


@pytest.mark.parametrize("note", ["a\\u0000b", "\\ud800", "ok \\udc00 ok"])
def test_nul_byte_in_resume_note_is_400_naming_note_and_the_pause_stays_pending(
    alice_client, approver_client, note
):
    conversation_id = paused_conversation(alice_client)
    response = resume_raw(approver_client, conversation_id, f'{{"verdict": "APPROVED", "note": "{note}"}}')
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/problem+json"
    assert [e["field"] for e in response.json()["errors"]] == ["note"]
    assert_nothing_consumed(conversation_id)
    assert (
        resume_raw(approver_client, conversation_id, '{"verdict": "APPROVED", "note": "fine"}').status_code
        == 200
    )


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"verdict": "MAYBE"}, "verdict 'MAYBE' must be APPROVED or REJECTED"),
        ({"verdict": ""}, "verdict '' must be APPROVED or REJECTED"),
        ({"verdict": "APPROVE"}, "verdict 'APPROVE' must be APPROVED or REJECTED"),
        ({"verdict": 1}, "verdict must be the string APPROVED or REJECTED, not a number"),
        ({"verdict": True}, "verdict must be the string APPROVED or REJECTED, not a boolean"),
        ({"verdict": ["APPROVED"]}, "verdict must be the string APPROVED or REJECTED, not a list"),
        ({"verdict": None}, VERDICT_REQUIRED),
        ({}, VERDICT_REQUIRED),
        ({"note": "no verdict"}, VERDICT_REQUIRED),
    ],
)
def test_bad_verdict_detail_names_value(alice_client, approver_client, body, detail):
    conversation_id = paused_conversation(alice_client)
    response = approver_client.post(f"/agents/{conversation_id}/resume", body, format="json")
    assert response.status_code == 400, response.content
    problem = response.json()
    assert problem["detail"] == detail
    assert [e["field"] for e in problem["errors"]] == ["verdict"]
    assert_nothing_consumed(conversation_id)


def test_a_long_bad_verdict_is_quoted_short_and_escaped(alice_client, approver_client):
    conversation_id = paused_conversation(alice_client)
    response = resume_raw(approver_client, conversation_id, json.dumps({"verdict": "\n" + "X" * 500}))
    detail = response.json()["detail"]
    assert detail.startswith("verdict '\\u000a" + "X" * 39 + "…'") and len(detail) < 100


@pytest.mark.parametrize(
    ("call_decision", "field", "message"),
    [
        ('{"verdict": "APPROVED", "note": "\\u0000"}', "toolDecisions.call-1.note", "NUL"),
        ('{"verdict": "REJECTED", "note": "\\ud800"}', "toolDecisions.call-1.note", "lone surrogate"),
        # The text is fine; what it decodes to is not: NUL, a number too large, nesting too deep.
        (
            '{"verdict": "APPROVED", "amendedArguments": "{\\"to\\": \\"bob\\\\u0000\\"}"}',
            "toolDecisions.call-1.amendedArguments",
            "arguments.to contains a NUL",
        ),
        (
            '{"verdict": "APPROVED", "amendedArguments": "{\\"amount\\": 1e400}"}',
            "toolDecisions.call-1.amendedArguments",
            "arguments.amount is a number too large",
        ),
        (
            json.dumps({"verdict": "APPROVED", "amendedArguments": '{"a": ' + "[" * 100 + "]" * 100 + "}"}),
            "toolDecisions.call-1.amendedArguments",
            "nested deeper than 64 levels",
        ),
        (
            json.dumps(
                {"verdict": "APPROVED", "amendedArguments": '{"a": ' + "[" * 10_000 + "]" * 10_000 + "}"}
            ),
            "toolDecisions.call-1.amendedArguments",
            "nested too deeply",
        ),
    ],
)
def test_unstorable_tool_decision_is_400_naming_the_call_field(
    alice_client, approver_client, http_recorder, call_decision, field, message
):
    conversation_id, pause = paused_transfer(alice_client, http_recorder)
    response = resume_raw(
        approver_client,
        conversation_id,
        f'{{"verdict": "APPROVED", "toolDecisions": {{"call-1": {call_decision}}}}}',
    )
    assert response.status_code == 400, response.content
    problem = response.json()
    assert problem["errors"][0]["field"] == field
    assert message in problem["detail"]
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING
    assert transfers(http_recorder) == []


def test_bulk_decision_refuses_a_nul_note_before_deciding_anything(alice, approver):
    pause = paused_pause(alice)
    response = logged_in(approver).post(
        BULK, {"verdict": "APPROVED", "note": "a\x00b", "pause_ids": [str(pause.pk)]}
    )
    assert response.status_code == 400
    assert "NUL character" in response.content.decode()
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING


def test_every_bad_field_of_a_decision_is_named_at_once_unknown_fields_first(alice_client, approver_client):
    conversation_id = paused_conversation(alice_client)
    response = approver_client.post(
        f"/agents/{conversation_id}/resume",
        {"verdict": "APPROVED", "note": 5, "toolDecisions": [], "notes": "x"},
        format="json",
    )
    assert response.status_code == 400, response.content
    assert response.json()["errors"] == [
        {"field": "notes", "message": "unknown field"},
        {"field": "note", "message": "must be a string"},
        {"field": "toolDecisions", "message": "must be an object keyed by call id"},
    ]
    assert_nothing_consumed(conversation_id)


def test_a_note_over_4096_utf16_units_is_refused_though_it_has_fewer_characters(
    alice_client, approver_client
):
    conversation_id = paused_conversation(alice_client)
    response = approver_client.post(
        f"/agents/{conversation_id}/resume",
        {"verdict": "APPROVED", "note": "\U0001f600" * 2049},
        format="json",
    )
    assert response.status_code == 400, response.content
    assert response.json()["detail"] == "Decision note exceeds the maximum length of 4096 characters"
    assert_nothing_consumed(conversation_id)


def test_decided_by_is_accepted_and_ignored_the_actor_is_the_caller(alice_client, approver_client):
    conversation_id = paused_conversation(alice_client)
    response = approver_client.post(
        f"/agents/{conversation_id}/resume",
        {"verdict": " rejected ", "decidedBy": "someone-else", "note": None},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["verdict"] == "REJECTED"
    assert response.json()["decidedBy"] == "approver"
