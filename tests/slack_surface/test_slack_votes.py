"""A pause that needs two approvals, decided from Slack: the first click is a vote (the card keeps its
buttons and shows the count and who approved), a second person's click decides; one Slack user's second
click is refused; routing checks the integration's user a Slack user decides with."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlencode

import pytest

from approvals.models import Pause, PauseStatus, Vote
from harnesses.factories import account_bot, deployed_agent
from harnesses.queue_drain import run_queued_tasks
from harnesses.users import make_user
from slack_surface.models import SlackThread
from tests.slack_surface.conftest import (
    APPROVAL_CHANNEL,
    BOT_TOKEN,
    SIGNING_SECRET,
    click_body,
    message_event,
    post_click,
    post_event,
)
from toolgate.outbound.secret_store import set_secret


def wired(hitl: dict, *, run_as_role: str = "admin") -> str:
    from slack_surface.integrations import IntegrationInput, create_integration

    set_secret(name="slack.signing", value=SIGNING_SECRET)
    set_secret(name="slack.bot", value=BOT_TOKEN)
    document = account_bot()
    document["hitlConfig"] = {**document.get("hitlConfig", {}), **hitl}
    create_integration(
        name="acme",
        data=IntegrationInput(
            agent_id=deployed_agent(document),
            environment="production",
            conversation_owner=None,
            signing_secret="${vault:slack.signing}",
            bot_token="${vault:slack.bot}",
            approval_channel=APPROVAL_CHANNEL,
            approver_user_ids="UAPPROVER, UOTHER",
        ),
        creator=make_user("slackbot", run_as_role),
    )
    return "acme"


def paused(client) -> Pause:
    post_event(client, message_event("please delete my account", ts="500.1"))
    run_queued_tasks()
    thread = SlackThread.objects.get(thread_ts="500.1")
    return Pause.objects.get(subject_id=thread.conversation_id, status=PauseStatus.PENDING)


def card_with_buttons(fake_slack) -> list[dict]:
    (card,) = [c for c in fake_slack.posted(APPROVAL_CHANNEL) if "blocks" in c]
    blocks = card["blocks"]
    return json.loads(blocks) if isinstance(blocks, str) else blocks


def click_on(card: list[dict], pause: Pause, user: str) -> str:
    """A click on ``card``: Slack sends the message the button is on with the click."""
    raw = click_body(f"acme|{pause.subject_id}", user=user)
    payload = json.loads(parse_qs(raw)["payload"][0])
    payload["message"] = {"blocks": card}
    return urlencode({"payload": json.dumps(payload)})


@pytest.mark.django_db
def test_a_first_slack_approval_is_a_vote_the_card_shows_the_count_and_a_second_person_decides(
    anon_client, fake_slack
):
    wired({"requiredApprovals": 2})
    pause = paused(anon_client)
    card = card_with_buttons(fake_slack)
    assert any("Needs 2 approvals" in json.dumps(block) for block in card)

    assert post_click(anon_client, click_on(card, pause, "UAPPROVER")).status_code == 200
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING
    (update,) = fake_slack.updates()
    blocks = json.loads(update["blocks"]) if isinstance(update["blocks"], str) else update["blocks"]
    votes = next(block for block in blocks if block.get("block_id") == "hitl-votes")
    assert "1 of 2 approvals: <@UAPPROVER>. 1 more needed." in json.dumps(votes)
    assert any(block["type"] == "actions" for block in blocks)  # the buttons stay

    again = post_click(anon_client, click_on(blocks, pause, "UAPPROVER"))
    assert again.status_code == 200 and Vote.objects.filter(pause=pause).count() == 1
    assert "already approved" in fake_slack.posted(APPROVAL_CHANNEL)[-1]["text"]

    assert post_click(anon_client, click_on(blocks, pause, "UOTHER")).status_code == 200
    decided = Pause.objects.get(pk=pause.pk)
    assert decided.verdict == "APPROVED" and decided.decided_by == "slack:UOTHER"
    assert fake_slack.updates()[-1]["text"] == "✅ Approved by <@UOTHER>"


@pytest.mark.django_db
def test_routing_checks_the_integrations_user_a_slack_user_decides_with(anon_client, fake_slack):
    wired({"approvers": {"groups": ["finance"]}}, run_as_role="approver")  # its user is not in finance
    pause = paused(anon_client)
    card = card_with_buttons(fake_slack)
    assert post_click(anon_client, click_on(card, pause, "UAPPROVER")).status_code == 200
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING
    assert "routed to group finance" in fake_slack.posted(APPROVAL_CHANNEL)[-1]["text"]


@pytest.mark.django_db
def test_an_escalation_step_and_the_reminder_are_told_in_the_cards_channel(anon_client, fake_slack):
    from datetime import timedelta

    import time_machine
    from django.utils import timezone

    from approvals.notices import queue_due_notices

    wired(
        {
            "timeoutPolicy": "AUTO_REJECT",
            "approvalTimeout": "PT30M",
            "remindBefore": "PT10M",
            "escalation": [{"after": "PT15M", "approvers": {"groups": ["on-call"]}}],
        }
    )
    paused(anon_client)
    with time_machine.travel(timezone.now() + timedelta(minutes=21), tick=False):
        queue_due_notices()
        run_queued_tasks()
    said = [post["text"] for post in fake_slack.posted(APPROVAL_CHANNEL)]
    assert any(text.startswith("⏫ Escalated: ") and "group on-call" in text for text in said), said
    assert any(text.startswith("⏰ Reminder: ") for text in said), said
