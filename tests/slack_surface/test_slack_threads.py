"""Conversations from Slack threads: signed events, one conversation per thread, pause notices."""

from __future__ import annotations

import pytest

from approvals.models import Pause
from harnesses.queue_drain import run_queued_tasks
from slack_surface.models import SlackEvent, SlackThread
from tests.slack_surface.conftest import APPROVAL_CHANNEL, BOT_TOKEN, message_event, post_event

pytestmark = pytest.mark.django_db

REASON = "Account deletion requires manager sign-off"


def test_url_verification_answers_the_challenge_when_signed(integration, anon_client):
    response = post_event(anon_client, {"type": "url_verification", "challenge": "abc123"})

    assert response.status_code == 200, response.content
    assert response.json() == {"challenge": "abc123"}


@pytest.mark.parametrize("sign", [{"secret": "some-other-secret"}, {"at": 1_000_000_000}])
def test_an_event_not_signed_by_the_integration_or_replayed_is_401_and_recorded_nowhere(
    integration, anon_client, sign
):
    response = post_event(anon_client, message_event("hello", ts="1.1"), **sign)

    assert response.status_code == 401
    assert SlackEvent.objects.count() == 0


def test_an_unsigned_event_is_401(integration, anon_client):
    response = anon_client.post(
        "/integrations/slack/events",
        data='{"type": "url_verification", "challenge": "x"}',
        content_type="application/json",
    )

    assert response.status_code == 401
    assert "x" not in response.json().get("challenge", "")


def test_a_thread_message_starts_a_conversation_answers_in_the_thread_and_posts_a_card_when_it_pauses(
    integration, anon_client, fake_slack
):
    assert post_event(anon_client, message_event("please delete my account", ts="100.1")).status_code == 200

    assert run_queued_tasks() == 1
    thread = SlackThread.objects.get(channel="CTHREADS", thread_ts="100.1")
    assert thread.conversation.owner == integration.owner
    in_thread = fake_slack.posted("CTHREADS")
    assert len(in_thread) == 1 and in_thread[0]["thread_ts"] == "100.1"
    assert in_thread[0]["text"] == f"⏸️ This conversation is awaiting human approval.\n> {REASON}"
    [card] = fake_slack.posted(APPROVAL_CHANNEL)
    assert card["blocks"][0]["text"]["text"] == "⏸️ Conversation awaiting approval"
    buttons = card["blocks"][-1]["elements"]
    assert [b["action_id"] for b in buttons] == ["hitl_approve", "hitl_reject"]
    assert {b["value"] for b in buttons} == {f"acme|{thread.conversation_id}"}
    assert {c["token"] for c in fake_slack.calls} == {f"Bearer {BOT_TOKEN}"}


def test_a_retried_event_delivery_runs_one_turn(integration, anon_client, fake_slack):
    event = message_event("hello", ts="200.1", event_id="EvSAME")
    post_event(anon_client, event)
    post_event(anon_client, event)

    assert run_queued_tasks() == 1
    assert [m["text"] for m in fake_slack.posted("CTHREADS")] == ["Hello!"]
    assert fake_slack.posted(APPROVAL_CHANNEL) == []


def test_a_message_while_paused_gets_still_awaiting_and_is_not_consumed(integration, anon_client, fake_slack):
    post_event(anon_client, message_event("please delete my account", ts="300.1"))
    run_queued_tasks()
    thread = SlackThread.objects.get(thread_ts="300.1")
    steps_before = thread.conversation.steps.count()

    post_event(anon_client, message_event("hello?", ts="300.2", thread_ts="300.1"))
    run_queued_tasks()

    last = fake_slack.posted("CTHREADS")[-1]
    assert last["text"] == "⏸️ Still awaiting approval — a reviewer must decide before I can continue."
    assert last["thread_ts"] == "300.1"
    assert thread.conversation.steps.count() == steps_before
    assert Pause.objects.filter(subject_id=thread.conversation_id).count() == 1
    assert len(fake_slack.posted(APPROVAL_CHANNEL)) == 1  # the card is posted once per pause


def test_a_bot_message_is_ignored(integration, anon_client, fake_slack):
    payload = message_event("echo", ts="400.1")
    payload["event"]["bot_id"] = "B1"
    post_event(anon_client, payload)

    assert run_queued_tasks() == 0
    assert fake_slack.calls == []


def test_a_thread_message_whose_user_is_at_the_pause_cap_is_told_so_and_starts_nothing(
    integration, anon_client, fake_slack, settings
):
    from conversations.models import Conversation
    from tests.approvals.test_pause_caps import pending

    settings.HITL_MAX_OPEN_PAUSES_PER_USER = 2
    pending(integration.owner, 2)
    post_event(anon_client, message_event("please delete my account", ts="400.1"))

    assert run_queued_tasks() == 1

    [told] = fake_slack.posted("CTHREADS")
    assert told["thread_ts"] == "400.1"
    assert told["text"].startswith("⚠️ You already have 2 pending approvals"), told["text"]
    assert "HITL_MAX_OPEN_PAUSES_PER_USER=2" in told["text"]
    assert (Conversation.objects.count(), SlackThread.objects.count()) == (0, 0)
    assert fake_slack.posted(APPROVAL_CHANNEL) == []
