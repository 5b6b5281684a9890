"""The approval card: what a reviewer sees of a pause in the approval channel."""

from __future__ import annotations

import pytest

from approvals.models import Pause
from harnesses.factories import store_tool_batch
from harnesses.queue_drain import run_queued_tasks
from slack_surface.cards import post_approval_card
from slack_surface.models import SlackIntegration, SlackThread
from tests.slack_surface.conftest import APPROVAL_CHANNEL, message_event, post_event

pytestmark = pytest.mark.django_db

API_KEY = "sk-" + "A" * 40


def tool_pause(client, calls: int) -> Pause:
    """A Slack thread's pause turned into a TOOL_CALL pause of ``calls`` calls (the gate's own batch)."""
    post_event(client, message_event("please delete my account", ts="700.1"))
    run_queued_tasks()
    pause = Pause.objects.get(subject_id=SlackThread.objects.get(thread_ts="700.1").conversation_id)
    return store_tool_batch(
        pause,
        [
            {
                "callId": f"c{i}",
                "toolName": f"transfer_{i}",
                "arguments": {"amount": i, "apiKey": API_KEY, "memo": "x" * 400},
                "gateReason": "rule",
            }
            for i in range(calls)
        ],
    )


def contexts(card: dict) -> list[str]:
    return [b["elements"][0]["text"] for b in card["blocks"] if b["type"] == "context"]


def test_a_tool_call_card_shows_each_call_redacted_cut_to_300_characters_and_at_most_five(
    integration, anon_client, fake_slack
):
    pause = tool_pause(anon_client, 7)
    fake_slack.calls.clear()
    from slack_surface.models import SlackDelivery

    SlackDelivery.objects.filter(pause_id=pause.id).delete()  # the RULE card of the same pause

    assert post_approval_card(integration.row, pause)

    [card] = fake_slack.posted(APPROVAL_CHANNEL)
    lines = contexts(card)
    assert len(lines) == 6 and lines[-1] == "+2 more"
    for i, line in enumerate(lines[:5]):
        name, arguments = line.split(" — ", 1)
        assert name == f"transfer_{i}"
        assert API_KEY not in line and "<REDACTED>" in arguments
        assert len(arguments) == 301 and arguments.endswith("…")
    assert API_KEY not in str(card)


def test_a_card_without_approver_ids_has_no_buttons(integration, anon_client, fake_slack):
    SlackIntegration.objects.filter(pk=integration.row.pk).update(approver_user_ids=" , ")

    post_event(anon_client, message_event("please delete my account", ts="800.1"))
    run_queued_tasks()

    [card] = fake_slack.posted(APPROVAL_CHANNEL)
    assert all(block["type"] != "actions" for block in card["blocks"])
    assert contexts(card)[-1] == "No approver user ids configured — approve or reject via the API."
    fields = [f["text"] for f in card["blocks"][1]["fields"]]
    assert fields[2] == "*Reason*\nAccount deletion requires manager sign-off"
    assert fields[3].startswith("*Timeout*\nAUTO_REJECT (PT15M), deadline ")


def test_a_card_is_not_posted_without_an_approval_channel(integration, anon_client, fake_slack):
    SlackIntegration.objects.filter(pk=integration.row.pk).update(approval_channel="")

    post_event(anon_client, message_event("please delete my account", ts="900.1"))
    run_queued_tasks()

    assert fake_slack.posted(APPROVAL_CHANNEL) == []
    assert len(fake_slack.posted("CTHREADS")) == 1
