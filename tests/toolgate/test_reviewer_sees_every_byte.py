"""The reviewer sees every byte the model controls (toolgate.tool_pause_details, toolgate.request_views).

A gated call's request is shown as it will be sent on every surface, query string included; in the
reviewer's decision views (the admin page, an approver's approval-status over REST and MCP while it waits)
a value the model wrote is shown as sent even when it looks like a credential, with a warning; only the
values the service injects are hidden, by their reference name; every other view keeps redacting by shape.
"""

from __future__ import annotations

import html
import json

import pytest
from django.test import Client

from approvals.access import sees_what_runs
from approvals.models import Pause, PauseStatus
from harnesses.agents import http_tool_agent, one_call
from harnesses.echo_target import EchoTarget
from harnesses.factories import deployed_agent, say, start
from harnesses.queue_drain import run_queued_tasks
from mcp_surface.conversation_tools import get_approval_status
from slack_surface.messages import approval_card
from toolgate.secret_store import set_secret

pytestmark = pytest.mark.django_db

TRANSFER = {
    "name": "transfer_funds",
    "request": {
        "method": "POST",
        "path": "/transfers?payee={args.payee}",
        "queryParams": {"memo": "{args.memo}"},
        "headers": {"X-Reference": "{args.reference}", "X-Signature": "${vault:signing.key}"},
        "body": {"amount": "{args.amount}", "to": "{args.to}"},
    },
}
ARGUMENTS = {
    "payee": "mallory-IBAN-666",
    "memo": "rent",
    "reference": "Bearer abcdefghijklmnopqrstuvwxyz012345",
    "amount": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlLXZhbHVl",
    "to": "AKIAABCDEFGHIJKLMNOP",
}
SIGNING_KEY = "very-private-signing-key-value"


def paused(alice_client, echo_target: EchoTarget) -> tuple[str, Pause]:
    set_secret(name="signing.key", value=SIGNING_KEY)
    document = http_tool_agent(echo_target.url, [TRANSFER], one_call("transfer_funds", ARGUMENTS))
    conversation_id = start(alice_client, deployed_agent(document))
    assert say(alice_client, conversation_id, "go").json()["state"] == "AWAITING_HUMAN"
    return conversation_id, Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)


def admin_page(admin_user, pause: Pause) -> str:
    browser = Client()
    browser.force_login(admin_user)
    page = browser.get(f"/admin/approvals/pendingapproval/{pause.pk}/change/")
    assert page.status_code == 200
    return page.content.decode()


def only_call(details: dict) -> dict:
    (call,) = details["calls"]
    return call


def test_the_request_is_shown_as_it_will_be_sent_query_string_included(
    alice_client, approver_client, approver, admin_user, echo_target: EchoTarget
):
    conversation_id, pause = paused(alice_client, echo_target)
    status = approver_client.get(f"/agents/{conversation_id}/approval-status").json()
    preview = only_call(status["pauseDetails"])["requestPreview"]
    assert preview["url"] == f"{echo_target.url}/transfers?payee=mallory-IBAN-666&memo=rent"
    assert preview["query"] == [["payee", "mallory-IBAN-666"], ["memo", "rent"]]
    mcp = get_approval_status(approver, conversation_id=conversation_id)
    assert only_call(mcp["pauseDetails"])["requestPreview"]["url"] == preview["url"]
    assert html.escape(f"POST {preview['url']}", quote=False) in admin_page(admin_user, pause)
    card = json.dumps(approval_card(pause, integration_name="ops", agent_name="a", subject="s", buttons=True))
    assert "payee=mallory-IBAN-666" in card
    owner = alice_client.get(f"/agents/{conversation_id}/approval-status").json()
    assert "payee=mallory-IBAN-666" in only_call(owner["pauseDetails"])["requestPreview"]["url"]
    approver_client.post(f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json")
    run_queued_tasks()
    (sent,) = echo_target.requests_to("/transfers")
    assert sent.target == "/transfers?payee=mallory-IBAN-666&memo=rent"  # what was shown is what went


def test_a_credential_shaped_model_value_is_shown_to_the_reviewer_as_sent_with_a_warning(
    alice_client, approver_client, approver, admin_user, echo_target: EchoTarget
):
    conversation_id, pause = paused(alice_client, echo_target)
    call = only_call(approver_client.get(f"/agents/{conversation_id}/approval-status").json()["pauseDetails"])
    assert json.loads(call["arguments"]) == ARGUMENTS
    assert json.loads(call["requestPreview"]["body"]) == {
        "amount": ARGUMENTS["amount"],
        "to": ARGUMENTS["to"],
    }
    assert call["requestPreview"]["headers"]["x-reference"] == ARGUMENTS["reference"]
    assert {warning["field"] for warning in call["warnings"]} == {
        "arguments.reference",
        "arguments.amount",
        "arguments.to",
        "request.headers.x-reference",
        "request.body",
    }
    mcp_call = only_call(get_approval_status(approver, conversation_id=conversation_id)["pauseDetails"])
    assert mcp_call["warnings"] == call["warnings"] and mcp_call["arguments"] == call["arguments"]
    page = admin_page(admin_user, pause)
    assert "AKIAABCDEFGHIJKLMNOP" in page and "hitl-credential-warning" in page
    # every other view keeps redacting by shape, and says nothing of the raw values
    owner = only_call(alice_client.get(f"/agents/{conversation_id}/approval-status").json()["pauseDetails"])
    card = json.dumps(approval_card(pause, integration_name="ops", agent_name="a", subject="s", buttons=True))
    for text in (json.dumps(owner), card, approver_client.get("/agents/pending-approvals").content.decode()):
        assert "ABCDEFGHIJKLMNOP" not in text and "abcdefghijklmnopqrstuvwxyz012345" not in text
    assert "warnings" not in owner


def test_only_values_the_service_injects_are_hidden_by_their_reference_name(
    alice_client, approver_client, admin_user, echo_target: EchoTarget
):
    conversation_id, pause = paused(alice_client, echo_target)
    call = only_call(approver_client.get(f"/agents/{conversation_id}/approval-status").json()["pauseDetails"])
    assert call["requestPreview"]["headers"]["x-signature"] == "${vault:signing.key}"
    assert "request.headers.x-signature" not in {warning["field"] for warning in call["warnings"]}
    for text in (json.dumps(call), admin_page(admin_user, pause)):
        assert SIGNING_KEY not in text
    approver_client.post(f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json")
    run_queued_tasks()
    (sent,) = echo_target.requests_to("/transfers")
    assert sent.header("X-Signature") == SIGNING_KEY


def test_the_raw_view_is_for_admins_and_approvers_while_the_pause_waits(
    alice, alice_client, approver, approver_client, admin_user, echo_target: EchoTarget
):
    conversation_id, pause = paused(alice_client, echo_target)
    assert sees_what_runs(approver, pause) and sees_what_runs(admin_user, pause)
    assert not sees_what_runs(alice, pause)  # the owner reads the redacted view
    approver_client.post(f"/agents/{conversation_id}/resume", {"verdict": "REJECTED"}, format="json")
    run_queued_tasks()
    pause.refresh_from_db()
    assert not sees_what_runs(approver, pause) and not sees_what_runs(admin_user, pause)
