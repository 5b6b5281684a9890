"""S4 canary: one full cycle with two secrets planted — a Stripe key the model wrote into a gated tool
call's arguments and the vault canary in its http call's header — reaches the loopback server and
nothing else, but for the model's value in the reviewer's decision views.

Extends test_no_secret_leaks (its views) and test_no_secret_in_logs (its capture of every logger at
DEBUG) to the whole cycle: paused, read over REST, the admin decision page, MCP's tools and the Slack
card, approved, executed. The vault canary is in no response, log record, audit entry or card. The
model's key is shown, as it will be sent, to the reviewer deciding the call (the admin decision page,
the approver's approval-status over REST and MCP while it waits) and is in nothing else.
"""

from __future__ import annotations

import json
import secrets

import pytest
from django.forms.models import model_to_dict
from django.test import Client

from approvals.models import AuditEntry, Pause, PauseStatus
from harnesses.agents import AFTER_TOOLS, payments_agent
from harnesses.factories import deployed_agent, say, start
from harnesses.queue_drain import run_queued_tasks
from mcp_surface.conversation_tools import get_approval_status, list_pending_approvals
from slack_surface.messages import approval_card
from tests.conftest import CANARY_SECRET_NAME
from tests.toolgate.test_no_secret_in_logs import assert_canary_in_no_record, every_logger_at_debug
from tests.toolgate.test_no_secret_leaks import _other_views, _reviewer_views

__all__ = ["every_logger_at_debug"]  # the fixture, imported to be used here

pytestmark = pytest.mark.django_db
ARGUMENT_CANARY = "sk_live_" + secrets.token_hex(16)


@pytest.fixture
def response_bodies(monkeypatch) -> list[str]:
    """Every response body of the test client (on top of the canary fixture's own check)."""
    bodies: list[str] = []
    checked = Client.request

    def recording(self, **request_kwargs):
        response = checked(self, **request_kwargs)
        if not getattr(response, "streaming", False):
            bodies.append(response.content.decode("utf-8", "replace"))
        return response

    monkeypatch.setattr(Client, "request", recording)
    return bodies


def _agent(target_url: str) -> dict:
    arguments = {"amount": 1, "to": "bob", "api_key": ARGUMENT_CANARY}
    script = [
        AFTER_TOOLS,
        {
            "when": {"inputContains": "transfer"},
            "toolCalls": [{"id": "c1", "name": "transfer_funds", "arguments": arguments}],
        },
    ]
    document = payments_agent(target_url, script=script)
    request = document["workflows"][0]["tasks"][1]["calls"][0]["request"]
    request["body"] = {"amount": "{args.amount}", "to": "{args.to}", "key": "{args.api_key}"}
    request["headers"] = {"X-Api-Key": "${vault:" + CANARY_SECRET_NAME + "}"}
    return document


def _audit_rows() -> list[str]:
    return [json.dumps(model_to_dict(entry), default=str) for entry in AuditEntry.objects.all()]


def test_planted_secrets_reach_the_loopback_server_and_no_surface_log_or_audit_entry(
    alice_client,
    approver_client,
    approver,
    admin_client,
    admin_user,
    http_recorder,
    canary_secret,
    every_logger_at_debug,
    response_bodies,
):
    conversation_id = start(alice_client, deployed_agent(_agent(http_recorder.url)))
    assert say(alice_client, conversation_id, "transfer now").json()["state"] == "AWAITING_HUMAN"
    pause = Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)
    reviewer = [
        *_reviewer_views(approver_client, admin_user, conversation_id, pause),
        json.dumps(
            get_approval_status(approver, conversation_id=conversation_id, detail="full"), default=str
        ),
    ]
    for text in reviewer:
        assert ARGUMENT_CANARY in text, text[:600]  # the reviewer sees what the model wrote
        assert canary_secret not in text and "${vault:" + CANARY_SECRET_NAME + "}" in text
    response_bodies.clear()
    shown = _other_views(alice_client, approver_client, admin_client, conversation_id, pause)
    mcp_results = [json.dumps(list_pending_approvals(approver), default=str)]
    card = json.dumps(
        approval_card(
            pause, integration_name="ops", agent_name="payments-bot", subject=conversation_id, buttons=True
        )
    )
    assert "transfer_funds" in card  # the card shows the call

    resumed = approver_client.post(
        f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json"
    )
    assert resumed.status_code == 200, resumed.content
    run_queued_tasks()
    alice_client.get(f"/agents/{conversation_id}")
    approver_client.get(f"/agents/{conversation_id}/approval-status?detail=full")

    (sent,) = [request for request in http_recorder.requests if request["path"] == "/transfers"]
    assert ARGUMENT_CANARY in sent["body"], sent  # both were really used
    assert sent["headers"]["X-Api-Key"] == canary_secret
    audit = _audit_rows()
    assert audit and response_bodies
    for canary in (ARGUMENT_CANARY, canary_secret):
        for text in (*response_bodies, *shown, *mcp_results, card, *audit):
            assert canary not in text, text[:600]
        assert_canary_in_no_record(every_logger_at_debug, canary)
