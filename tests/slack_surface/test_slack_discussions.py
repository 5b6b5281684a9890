"""Group discussions from Slack: a thread's message asks the group; its pause, decision, skipped member
turns, cancel and end reach the thread once, whoever decided (Slack buttons, REST)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from django.db import connection

from approvals.models import AuditEntry, Pause, PauseStatus, SubjectType
from groups.models import GroupConversation
from harnesses.members import PHASES, answering, group, pausing
from harnesses.queue_drain import run_queued_tasks
from harnesses.users import make_user
from slack_surface.discussion_messages import CARD_TITLE, STILL_RUNNING
from slack_surface.discussion_threads import thread_lock
from slack_surface.integrations import IntegrationInput, create_integration
from slack_surface.models import SlackDiscussion, SlackIntegration, SlackNotice, SlackThread
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

pytestmark = pytest.mark.django_db

STARTED = "🗣️ Discussion started on group *panel* — I will post its progress in this thread."
PAUSED = "⏸️ The discussion is awaiting human approval.\n> Requires human approval (PHASE) — phase: Challenge"


def panel(phases=PHASES, members=None, **top) -> SimpleNamespace:
    """A group integration ``panel`` on a fresh group; approvals channel, UAPPROVER and UOTHER allowed."""
    set_secret(name="slack.signing", value=SIGNING_SECRET)
    set_secret(name="slack.bot", value=BOT_TOKEN)
    owner = make_user("slackbot", "admin")
    members = members or [
        (answering("pat", "Ship it."), "Optimist"),
        (answering("carla", "Friday."), "Critic"),
    ]
    group_id = group(members, phases, **top)
    create_integration(
        name="panel",
        data=IntegrationInput(
            agent_id=None,
            group_id=group_id,
            environment="production",
            conversation_owner=None,
            signing_secret="${vault:slack.signing}",
            bot_token="${vault:slack.bot}",
            approval_channel=APPROVAL_CHANNEL,
            approver_user_ids="UAPPROVER,UOTHER",
        ),
        creator=owner,
    )
    return SimpleNamespace(group_id=group_id, owner=owner)


def ask(client, text: str = "Should we ship on Friday?", *, ts: str = "700.1", thread_ts: str | None = None):
    post_event(client, message_event(text, ts=ts, thread_ts=thread_ts))
    run_queued_tasks()


def thread_texts(fake_slack, thread_ts: str = "700.1") -> list[str]:
    return [m["text"] for m in fake_slack.posted("CTHREADS") if m.get("thread_ts") == thread_ts]


def the_discussion() -> GroupConversation:
    return GroupConversation.objects.get()


@pytest.fixture
def slack(db, fake_slack):
    return fake_slack


def test_a_thread_message_starts_a_discussion_whose_pause_is_told_in_the_thread_and_carded(
    slack, anon_client
):
    setup = panel()

    ask(anon_client)

    discussion = the_discussion()
    assert (discussion.state, discussion.question, str(discussion.group_id)) == (
        "AWAITING_APPROVAL",
        "Should we ship on Friday?",
        setup.group_id,
    )
    assert discussion.owner == setup.owner
    assert SlackDiscussion.objects.get().started_by == "UASKER"
    assert thread_texts(slack) == [STARTED, PAUSED]
    [card] = slack.posted(APPROVAL_CHANNEL)
    assert card["text"] == CARD_TITLE
    fields = [f["text"] for f in card["blocks"][1]["fields"]]
    assert fields[:4] == [
        f"*Discussion*\n`{discussion.id}`",
        "*Group*\npanel",
        "*Phase*\nChallenge (PHASE)",
        "*Reason*\nRequires human approval (PHASE) — phase: Challenge",
    ]
    buttons = card["blocks"][-1]["elements"]
    assert {b["value"] for b in buttons} == {f"panel|group:{discussion.id}"}
    assert "Ship it." not in str(card) and "Friday." not in str(card)  # never the transcript
    assert run_queued_tasks() == 0


def test_a_message_while_awaiting_approval_is_told_so_and_not_consumed(slack, anon_client):
    panel()
    ask(anon_client)

    ask(anon_client, "And on Monday?", ts="700.2", thread_ts="700.1")

    assert thread_texts(slack)[-1] == (
        "⏸️ Still awaiting approval — a reviewer must decide before I can continue."
    )
    assert GroupConversation.objects.count() == 1


def test_an_approve_click_resumes_and_the_thread_gets_the_decision_and_the_end_once(slack, anon_client):
    panel()
    ask(anon_client)
    discussion = the_discussion()

    response = post_click(anon_client, click_body(f"panel|group:{discussion.id}"))
    assert response.status_code == 200, response.content
    run_queued_tasks()

    discussion.refresh_from_db()
    assert discussion.state == "COMPLETED"
    pause = Pause.objects.get(subject_type=SubjectType.DISCUSSION, subject_id=discussion.id)
    assert (pause.status, pause.decided_by) == (PauseStatus.RESOLVED, "slack:UAPPROVER")
    assert AuditEntry.objects.get(pause_id=pause.id, verb="hitl.approval").actor == "slack:UAPPROVER"
    assert thread_texts(slack)[2:] == [
        "✅ Approved by <@UAPPROVER> — the discussion continues.",
        "✅ The discussion completed.\nFriday.",
    ]
    assert slack.updates()[-1]["text"] == "✅ Approved by <@UAPPROVER>"

    again = post_click(anon_client, click_body(f"panel|group:{discussion.id}", user="UOTHER"))

    assert again.status_code == 200
    assert slack.updates()[-1]["text"] == "☑️ This request has already been resolved."
    assert run_queued_tasks() == 0
    assert len(thread_texts(slack)) == 4


def test_a_click_outside_the_allowlist_leaves_the_discussion_paused(slack, anon_client):
    panel()
    ask(anon_client)
    discussion = the_discussion()

    post_click(anon_client, click_body(f"panel|group:{discussion.id}", user="UINTRUDER"))

    discussion.refresh_from_db()
    assert discussion.state == "AWAITING_APPROVAL"
    assert slack.posted(APPROVAL_CHANNEL)[-1]["text"] == (
        "⚠️ <@UINTRUDER> is not authorized to approve or reject this request."
    )
    assert run_queued_tasks() == 0 and len(thread_texts(slack)) == 2


def test_a_decision_by_rest_posts_the_notices_once_and_closes_the_card(slack, anon_client, approver_client):
    setup = panel()
    ask(anon_client)
    discussion = the_discussion()

    response = approver_client.post(
        f"/groups/{setup.group_id}/conversations/{discussion.id}/approve?wait=60",
        {"decision": {"verdict": "REJECTED", "note": "Not this week."}},
        format="json",
    )
    assert response.status_code == 200, response.content
    run_queued_tasks()
    run_queued_tasks()

    assert thread_texts(slack)[2:] == [
        "⛔ Rejected by approver: Not this week.",
        "⚠️ The discussion failed.",
    ]
    assert slack.updates()[-1]["text"] == "☑️ Resolved by approver: REJECTED"
    assert SlackNotice.objects.filter(status="SENT").count() == 3


def test_a_cancel_of_a_paused_discussion_is_told_in_the_thread(slack, anon_client, admin_client):
    setup = panel()
    ask(anon_client)
    discussion = the_discussion()

    response = admin_client.post(f"/groups/{setup.group_id}/conversations/{discussion.id}/cancel")
    assert response.status_code == 200, response.content
    run_queued_tasks()

    assert thread_texts(slack)[2:] == ["⛔ The discussion was cancelled by admin."]


def test_a_member_pause_is_skipped_and_told_then_the_end(slack, anon_client):
    panel(
        phases=[{"name": "Opinions", "type": "OPINION"}, {"name": "Decision", "type": "SYNTHESIS"}],
        members=[(answering("pat", "Ship it."), "Optimist"), (pausing("shy"), "Approver")],
    )

    ask(anon_client)

    texts = thread_texts(slack)
    assert texts[0] == STARTED
    skipped = [t for t in texts if t.startswith("⏭️ Approver asked for a human approval inside its turn;")]
    assert len(skipped) == 2  # its Opinions turn and its Decision turn
    assert "not supported inside group discussions" in skipped[0]
    assert texts[-1] == "✅ The discussion completed.\nShip it."
    assert len(texts) == 4 and SlackNotice.objects.filter(key__startswith="skipped:").count() == 2


def test_after_the_discussion_ended_the_thread_starts_a_new_one(slack, anon_client):
    panel(phases=[{"name": "Decision", "type": "SYNTHESIS"}])
    ask(anon_client)

    ask(anon_client, "And on Monday?", ts="700.2", thread_ts="700.1")

    assert GroupConversation.objects.count() == 2
    assert sorted(GroupConversation.objects.values_list("question", flat=True)) == [
        "And on Monday?",
        "Should we ship on Friday?",
    ]
    assert thread_texts(slack).count(STARTED) == 2


@pytest.mark.django_db(transaction=True)
def test_a_thread_whose_discussion_another_worker_is_starting_starts_no_second_one(client, slack):
    """Two first messages handled at once: the worker that holds the thread starts the one discussion;
    the other tells the thread it is still running (the lock is held here from another connection)."""
    panel()
    holding, release, done = threading.Event(), threading.Event(), threading.Event()

    def other_worker() -> None:
        try:
            thread = SlackThread.objects.create(
                integration=SlackIntegration.objects.get(), channel="CTHREADS", thread_ts="700.1"
            )
            with thread_lock(thread) as held:
                assert held
                holding.set()
                release.wait(10)
        finally:
            connection.close()
            done.set()

    worker = threading.Thread(target=other_worker)
    worker.start()
    try:
        assert holding.wait(10)
        ask(client)
    finally:
        release.set()
        worker.join(10)
    assert done.is_set()
    assert not GroupConversation.objects.exists()
    assert thread_texts(slack) == [STILL_RUNNING]

    ask(client, "Again?", ts="700.2", thread_ts="700.1")  # the thread is free again: this one starts

    assert GroupConversation.objects.count() == 1
