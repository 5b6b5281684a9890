"""Approval requests in Slack: the card a filing posts (once, to the chosen integration's channel, never a
secret header's value), its buttons deciding through the same service as REST as ``slack:<userId>``,
and the card closed when the request is decided or cancelled anywhere else. Requests are filed over
REST by a service account; clicks are signed with slack_sdk's signing; the Slack Web API is the local
fake of conftest."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from approval_requests.models import ApprovalRequest
from approvals.models import AuditEntry, Pause
from approvals.timers import fire_due_batch
from harnesses.queue_drain import queued_functions, run_queued_tasks
from harnesses.users import client_for, make_user
from slack_surface.integrations import IntegrationInput, create_integration
from slack_surface.models import SlackDelivery
from slack_surface.request_cards import post_request_card
from slack_surface.request_messages import CARD_TITLE
from tests.approval_requests.conftest import PINNED, file_request
from tests.slack_surface.conftest import APPROVAL_CHANNEL, click_body, post_click

pytestmark = pytest.mark.django_db

SECRET_VALUE = PINNED["headers"]["Authorization"]
CARD_TASK = "slack_surface.request_cards.post_request_card"


@pytest.fixture
def agent(db):
    return make_user("refund-bot", "agent")


@pytest.fixture
def alice(db):
    return make_user("alice")


def filed(agent: Any, **overrides: Any) -> dict[str, Any]:
    """A request filed over REST, its card posted by the queued task."""
    body = file_request(agent, **{"request": PINNED, "onBehalfOf": "alice", **overrides})
    run_queued_tasks()
    return body


def card_of(fake_slack: Any, channel: str = APPROVAL_CHANNEL) -> dict[str, Any]:
    [card] = fake_slack.posted(channel)
    return card


def card_at(request_id: str) -> tuple[str, str]:
    """Where the request's card was posted (channel, ts), as its delivery row keeps it."""
    pause = Pause.objects.get(subject_id=request_id)
    card = SlackDelivery.objects.get(pause_id=pause.id, kind="approval_card")
    return card.channel, card.ts


def another_integration(name: str, *, channel: str, owner: Any, agent_id: str) -> None:
    create_integration(
        name=name,
        data=IntegrationInput(
            agent_id=agent_id,
            environment="production",
            conversation_owner=owner.get_username(),
            signing_secret="${vault:slack.signing}",
            bot_token="${vault:slack.bot}",
            approval_channel=channel,
            approver_user_ids="UAPPROVER",
        ),
        creator=owner,
    )


def test_a_filed_request_posts_its_card_once_without_a_secret_header_value(
    integration, agent, alice, fake_slack
):
    request_id = filed(agent)["id"]

    card = card_of(fake_slack)
    assert card["text"] == CARD_TITLE
    fields = [field["text"] for field in card["blocks"][1]["fields"]]
    assert fields == [
        f"*Approval request*\n`{request_id}`",
        "*Agent*\nrefund-bot (refund-bot)",
        "*Action*\nrefund",
        "*Reason*\nRefund over 100 EUR",
        "*On behalf of*\nalice",
        "*Timeout*\nWAIT_INDEFINITELY",
    ]
    lines = [block["elements"][0]["text"] for block in card["blocks"] if block["type"] == "context"]
    assert lines == [
        'Arguments — {"amount": 250, "orderId": "A-1"}',
        "Request — POST https://payments.example/refunds",
    ]
    buttons = card["blocks"][-1]["elements"]
    assert [(b["action_id"], b["value"]) for b in buttons] == [
        ("hitl_approve", f"acme|request:{request_id}"),
        ("hitl_reject", f"acme|request:{request_id}"),
    ]
    assert SECRET_VALUE not in str(fake_slack.calls) and "sk-live" not in str(fake_slack.calls)
    pause = Pause.objects.get(subject_id=request_id)
    assert post_request_card(str(pause.id)) == "not-posted"  # its delivery row: once
    assert len(fake_slack.posted(APPROVAL_CHANNEL)) == 1


def test_credential_shaped_arguments_and_urls_are_redacted_on_the_card(integration, agent, alice, fake_slack):
    key = "sk-" + "Zq7RtY3uVw9x" * 3
    filed(
        agent,
        action={"name": "charge", "arguments": {"apiKey": key, "amount": 5}},
        request={"method": "GET", "url": f"https://pay.example/charge?api_key={key}"},
    )

    card = card_of(fake_slack)

    assert key not in str(card)
    assert "Request — GET https://pay.example/charge?api_key=" in str(card)


def test_an_allowlisted_click_approves_as_the_slack_user(integration, agent, alice, fake_slack, anon_client):
    request_id = filed(agent)["id"]

    response = post_click(anon_client, click_body(f"acme|request:{request_id}"))

    assert response.status_code == 200, response.content
    request = ApprovalRequest.objects.get(pk=request_id)
    assert request.status == "APPROVED" and request.approved_arguments == {"orderId": "A-1", "amount": 250}
    pause = Pause.objects.get(subject_id=request_id)
    assert (pause.verdict, pause.decided_by, pause.note) == (
        "APPROVED",
        "slack:UAPPROVER",
        "Decided via Slack by UAPPROVER",
    )
    entry = AuditEntry.objects.get(pause_id=pause.id, verb="hitl.approval")
    assert (entry.actor, entry.automated) == ("slack:UAPPROVER", False)
    [update] = fake_slack.updates()
    assert (update["channel"], update["ts"], update["text"]) == (
        APPROVAL_CHANNEL,
        "111.222",
        "✅ Approved by <@UAPPROVER>",
    )
    assert "hitl_approve" not in str(update["blocks"])
    assert queued_functions() == []  # decided in Slack: nothing left to close
    read = client_for(agent).get(f"/approval-requests/{request_id}").json()
    assert read["decision"]["decidedBy"] == "slack:UAPPROVER"


def test_reject_and_clicks_that_decide_nothing(integration, agent, alice, fake_slack, anon_client):
    request_id = filed(agent)["id"]
    value = f"acme|request:{request_id}"

    intruder = post_click(anon_client, click_body(value, user="UINTRUDER"))
    forged = post_click(anon_client, click_body(value), secret="not-the-signing-secret")

    assert intruder.status_code == 200 and forged.status_code == 401
    assert ApprovalRequest.objects.get(pk=request_id).status == "PENDING"
    assert fake_slack.posted(APPROVAL_CHANNEL)[-1]["text"] == (
        "⚠️ <@UINTRUDER> is not authorized to approve or reject this request."
    )

    post_click(anon_client, click_body(value, action="hitl_reject"))
    again = post_click(anon_client, click_body(value, user="UOTHER"))

    assert again.status_code == 200
    assert ApprovalRequest.objects.get(pk=request_id).status == "REJECTED"
    assert [u["text"] for u in fake_slack.updates()] == [
        "⛔ Rejected by <@UAPPROVER>",
        "☑️ This request has already been resolved.",
    ]
    unknown = post_click(anon_client, click_body("acme|request:not-a-uuid", user="UOTHER"))
    assert unknown.status_code == 200
    assert fake_slack.updates()[-1]["text"] == "☑️ This request has already been resolved."


def test_an_integration_whose_owner_may_not_decide_refuses_in_the_channel(
    integration, agent, alice, fake_slack, anon_client
):
    plain = make_user("plain-owner")
    another_integration("plain", channel="CPLAIN", owner=plain, agent_id=integration.agent_id)
    request_id = filed(agent)["id"]
    assert fake_slack.posted("CPLAIN") == []  # the card went to the first integration by name: acme

    post_click(anon_client, click_body(f"plain|request:{request_id}"))

    assert ApprovalRequest.objects.get(pk=request_id).status == "PENDING"
    told = fake_slack.posted(APPROVAL_CHANNEL)[-1]["text"]
    assert told.startswith("⚠️ <@UAPPROVER>: Access denied")


def test_a_request_decided_or_cancelled_elsewhere_closes_its_card(
    integration, agent, alice, fake_slack, anon_client
):
    approver = make_user("approver", "approver")
    decided_id = filed(agent)["id"]
    cancelled_id = filed(agent, key="run-1/call-2")["id"]
    assert len(fake_slack.posted(APPROVAL_CHANNEL)) == 2

    client_for(approver).post(
        f"/approval-requests/{decided_id}/decision", {"verdict": "APPROVED"}, format="json"
    )
    client_for(alice).post(f"/approval-requests/{cancelled_id}/cancel")
    assert run_queued_tasks() == 2

    updates = {(u["channel"], u["ts"]): u["text"] for u in fake_slack.updates()}
    assert updates == {
        card_at(decided_id): "☑️ Resolved by approver: APPROVED",
        card_at(cancelled_id): "☑️ Resolved by alice: CANCELLED",
    }
    late = post_click(anon_client, click_body(f"acme|request:{decided_id}", action="hitl_reject"))
    assert late.status_code == 200
    assert ApprovalRequest.objects.get(pk=decided_id).status == "APPROVED"
    assert fake_slack.updates()[-1]["text"] == "☑️ This request has already been resolved."


def test_a_request_decided_before_its_card_was_posted_gets_none(integration, agent, fake_slack):
    approver = make_user("approver", "approver")
    request_id = file_request(agent)["id"]
    assert queued_functions() == [CARD_TASK]

    client_for(approver).post(
        f"/approval-requests/{request_id}/decision", {"verdict": "REJECTED"}, format="json"
    )
    run_queued_tasks()

    assert fake_slack.posted() == [] and fake_slack.updates() == []


def test_the_card_goes_to_the_integration_the_setting_names(
    integration, agent, alice, fake_slack, anon_client, settings
):
    reviewer = make_user("reviewer", "approver")
    another_integration("zeta", channel="CZETA", owner=reviewer, agent_id=integration.agent_id)
    settings.HITL_SLACK_APPROVAL_REQUESTS_INTEGRATION = "zeta"

    request_id = filed(agent)["id"]

    assert fake_slack.posted(APPROVAL_CHANNEL) == []
    card = card_of(fake_slack, "CZETA")
    assert card["blocks"][-1]["elements"][0]["value"] == f"zeta|request:{request_id}"
    post_click(anon_client, click_body(f"zeta|request:{request_id}"))
    assert Pause.objects.get(subject_id=request_id).decided_by == "slack:UAPPROVER"

    settings.HITL_SLACK_APPROVAL_REQUESTS_INTEGRATION = "nobody"
    file_request(agent, idempotencyKey="run-9/call-1")
    assert queued_functions() == []  # no integration takes it: nothing is queued


def test_no_approval_channel_anywhere_queues_nothing(agent, fake_slack, db):
    file_request(agent)

    assert queued_functions() == []
    assert fake_slack.calls == []


def test_a_request_that_times_out_has_its_card_closed(integration, agent, alice, fake_slack):
    request_id = filed(agent, hitlConfig={"approvalTimeout": "PT1H", "timeoutPolicy": "ABORT"})["id"]
    pause = Pause.objects.get(subject_id=request_id)
    assert card_of(fake_slack)["blocks"][1]["fields"][-1]["text"].startswith("*Timeout*\nABORT (PT1H)")

    assert fire_due_batch(now=pause.due_at + timedelta(seconds=1)) == 1
    run_queued_tasks()

    assert ApprovalRequest.objects.get(pk=request_id).status == "EXPIRED"
    [update] = fake_slack.updates()
    assert (update["channel"], update["ts"]) == card_at(request_id)
    assert update["text"] == "☑️ Resolved by (system:timeout): CANCELLED"
