"""Deciding from Slack buttons: signature, allowlist, the same decision service as REST, races."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connections
from django.test import Client
from django.utils import timezone

from approvals.models import AuditEntry, Pause, PauseStatus
from approvals.timers import fire_due_batch
from conversations.models import Conversation
from harnesses.queue_drain import run_queued_tasks
from slack_surface.models import SlackThread
from tests.slack_surface.conftest import (
    APPROVAL_CHANNEL,
    answer_in_slack,
    click_body,
    message_event,
    post_click,
    post_event,
    signed_click,
    signed_headers,
)


def paused_thread(client, ts: str = "500.1") -> SlackThread:
    post_event(client, message_event("please delete my account", ts=ts))
    run_queued_tasks()
    return SlackThread.objects.get(thread_ts=ts)


def pause_of(thread: SlackThread) -> Pause:
    return Pause.objects.get(subject_id=thread.conversation_id)


@pytest.mark.django_db
def test_an_allowlisted_click_decides_as_the_slack_user_and_the_thread_gets_the_continuation(
    integration, anon_client, fake_slack
):
    thread = paused_thread(anon_client)

    response = post_click(anon_client, click_body(f"acme|{thread.conversation_id}"))

    assert response.status_code == 200, response.content
    pause = pause_of(thread)
    assert (pause.status, pause.verdict, pause.decided_by) == (
        PauseStatus.RESOLVED,
        "APPROVED",
        "slack:UAPPROVER",
    )
    assert pause.note == "Decided via Slack by UAPPROVER"
    audit = AuditEntry.objects.get(pause_id=pause.id, verb="hitl.approval")
    assert (audit.actor, audit.automated) == ("slack:UAPPROVER", False)
    [update] = fake_slack.updates()
    assert (update["channel"], update["ts"], update["text"]) == (
        APPROVAL_CHANNEL,
        "111.222",
        "✅ Approved by <@UAPPROVER>",
    )
    assert run_queued_tasks() == 1  # the continuation push
    pushed = fake_slack.posted("CTHREADS")[-1]
    assert pushed["thread_ts"] == "500.1"
    assert pushed["text"] == "✅ Approved by <@UAPPROVER> — continuing.\nDeletion APPROVED."
    assert run_queued_tasks() == 0


@pytest.mark.django_db
def test_a_click_by_a_user_not_in_the_allowlist_changes_nothing(integration, anon_client, fake_slack):
    thread = paused_thread(anon_client)

    response = post_click(anon_client, click_body(f"acme|{thread.conversation_id}", user="UINTRUDER"))

    assert response.status_code == 200
    assert pause_of(thread).status == PauseStatus.PENDING
    assert fake_slack.posted(APPROVAL_CHANNEL)[-1]["text"] == (
        "⚠️ <@UINTRUDER> is not authorized to approve or reject this request."
    )
    assert fake_slack.updates() == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    "sign", [{"secret": "not-the-signing-secret"}, {"at": int(timezone.now().timestamp()) - 301}]
)
def test_a_wrongly_signed_or_replayed_click_is_401_and_changes_nothing(
    integration, anon_client, fake_slack, sign
):
    thread = paused_thread(anon_client)
    calls_before = len(fake_slack.calls)

    response = post_click(anon_client, click_body(f"acme|{thread.conversation_id}"), **sign)

    assert response.status_code == 401
    assert pause_of(thread).status == PauseStatus.PENDING
    assert len(fake_slack.calls) == calls_before


@pytest.mark.django_db
def test_an_unsigned_click_is_401_and_a_bare_button_value_is_403(integration, anon_client, fake_slack):
    thread = paused_thread(anon_client)
    body = click_body(f"acme|{thread.conversation_id}")

    unsigned = anon_client.post(
        "/integrations/slack/interactive", data=body, content_type="application/x-www-form-urlencoded"
    )
    bare = post_click(anon_client, click_body(str(thread.conversation_id)))

    assert unsigned.status_code == 401
    assert bare.status_code == 403
    assert pause_of(thread).status == PauseStatus.PENDING


@pytest.mark.django_db
def test_a_click_on_a_card_decided_elsewhere_says_already_resolved(integration, anon_client, fake_slack):
    thread = paused_thread(anon_client)
    post_click(anon_client, click_body(f"acme|{thread.conversation_id}", action="hitl_reject"))

    again = post_click(anon_client, click_body(f"acme|{thread.conversation_id}", user="UOTHER"))

    assert again.status_code == 200
    assert [u["text"] for u in fake_slack.updates()] == [
        "⛔ Rejected by <@UAPPROVER>",
        "☑️ This request has already been resolved.",
    ]
    assert pause_of(thread).verdict == "REJECTED"


@pytest.mark.django_db(transaction=True)
def test_two_racing_clicks_decide_once_and_the_loser_sees_already_resolved(integration, fake_slack):
    thread = paused_thread(Client())
    bodies = [
        click_body(f"acme|{thread.conversation_id}", user="UAPPROVER"),
        click_body(f"acme|{thread.conversation_id}", user="UOTHER", action="hitl_reject"),
    ]
    barrier = threading.Barrier(2)
    statuses: list[int] = []

    def click(body: str) -> None:
        try:
            barrier.wait(timeout=10)
            statuses.append(signed_click(Client(), body).status_code)
        finally:
            connections.close_all()

    workers = [threading.Thread(target=click, args=(body,)) for body in bodies]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)

    assert statuses == [200, 200]
    assert AuditEntry.objects.filter(pause_id=pause_of(thread).id, verb="hitl.approval").count() == 1
    assert answer_in_slack() == 2
    texts = [u["text"] for u in fake_slack.updates()]
    assert len(texts) == 2 and texts.count("☑️ This request has already been resolved.") == 1
    assert set(texts) & {"✅ Approved by <@UAPPROVER>", "⛔ Rejected by <@UOTHER>"}


@pytest.mark.django_db
def test_a_timer_decision_is_pushed_to_the_thread_once(integration, anon_client, fake_slack):
    thread = paused_thread(anon_client)
    pause = pause_of(thread)

    assert fire_due_batch(now=pause.due_at + timedelta(seconds=1)) == 1
    run_queued_tasks()
    run_queued_tasks()

    pause.refresh_from_db()
    assert (pause.status, pause.decided_by) == (PauseStatus.RESOLVED, "system:timeout")
    pushes = [m for m in fake_slack.posted("CTHREADS") if m["text"].startswith("⛔")]
    assert len(pushes) == 1
    assert pushes[0]["text"].startswith(
        "⛔ Approval rejected by (system:timeout) — the paused action was not performed."
    )
    assert pushes[0]["thread_ts"] == "500.1"
    assert fake_slack.updates()[-1]["text"] == "☑️ Resolved by (system:timeout): REJECTED"
    assert Conversation.objects.get(pk=thread.conversation_id).state == "READY"


@pytest.mark.django_db
def test_a_push_slack_refused_is_retried_later_and_posted_once(
    integration, anon_client, fake_slack, approver_client
):
    from django_q.models import Schedule

    from slack_surface.pushes import push_continuation

    thread = paused_thread(anon_client)
    fake_slack.fail_next = 1
    approver_client.post(
        f"/agents/{thread.conversation_id}/resume?wait=5", {"verdict": "APPROVED"}, format="json"
    )

    assert run_queued_tasks(only="slack_surface.pushes.push_continuation") == 1
    retry = Schedule.objects.get(func="slack_surface.pushes.push_continuation")
    assert retry.next_run > timezone.now()
    assert push_continuation(str(pause_of(thread).id)) == "sent"
    assert push_continuation(str(pause_of(thread).id)) == "skipped"

    pushes = [m for m in fake_slack.posted("CTHREADS") if m["text"].startswith("✅")]
    assert [p["text"] for p in pushes] == ["✅ Approved by approver — continuing.\nDeletion APPROVED."]


def test_signed_headers_are_what_slack_sdk_verifies():
    from slack_sdk.signature import SignatureVerifier

    headers = signed_headers("body")
    assert SignatureVerifier("slack-signing-secret-for-tests").is_valid(
        body="body",
        timestamp=headers["HTTP_X_SLACK_REQUEST_TIMESTAMP"],
        signature=headers["HTTP_X_SLACK_SIGNATURE"],
    )


@pytest.mark.django_db
def test_a_click_is_answered_before_any_call_of_a_slow_web_api(integration, fake_slack):
    """Slack wants its answer within 3 s: the click is decided and answered with no Web API call on the
    way; the card's update is made after, by the q-cluster, however slow the Web API is."""
    thread = paused_thread(Client())
    fake_slack.delay = 4.0  # slower than Slack waits
    calls_before = len(fake_slack.calls)
    answer = signed_click(Client(), click_body(f"acme|{thread.conversation_id}", user="UAPPROVER"))
    assert answer.status_code == 200
    assert pause_of(thread).verdict == "APPROVED"
    assert fake_slack.calls[calls_before:] == []  # nothing was sent while Slack waited
    fake_slack.delay = 0.0
    assert answer_in_slack() == 1
    assert fake_slack.updates()[-1]["text"] == "✅ Approved by <@UAPPROVER>"


@pytest.mark.django_db
def test_whether_a_settled_conversation_is_a_slack_threads_comes_with_its_settling_statement(
    integration, anon_client, fake_slack, approver_client, alice_client
):
    """The continuation's commit, which settles the pause, also answers the Slack listener's question
    (``approvals.settlements`` probes): a Slack thread's conversation gets its push queued, another
    conversation none, and neither asks with a statement of its own."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django_q.models import OrmQ

    from harnesses.factories import deployed_agent, say, start

    thread = paused_thread(anon_client)
    elsewhere = start(alice_client, deployed_agent())
    say(alice_client, elsewhere, "please delete my account")
    OrmQ.objects.all().delete()

    for conversation_id in (thread.conversation_id, elsewhere):
        with CaptureQueriesContext(connection) as captured:
            answer = approver_client.post(
                f"/agents/{conversation_id}/resume?wait=5", {"verdict": "APPROVED"}, format="json"
            )
        assert answer.status_code == 200 and answer.json()["state"] == "READY"
        asked = [q["sql"] for q in captured.captured_queries if '"slack_surface_slackthread"' in q["sql"]]
        assert len(asked) == 1 and asked[0].startswith("WITH c AS"), asked

    queued = [task.task["name"] for task in OrmQ.objects.all()]
    assert queued == [f"slack-push-{pause_of(thread).id}"], queued


@pytest.mark.django_db
def test_a_pause_settled_without_the_probe_asks_whether_its_conversation_is_a_slack_threads(
    integration, anon_client, fake_slack
):
    """Where the settling statement did not answer (a pause finished on its own), the listener asks."""
    from django_q.models import OrmQ

    from approvals.decisions import finish_pause

    thread = paused_thread(anon_client)
    pause = pause_of(thread)
    Pause.objects.filter(pk=pause.pk).update(status=PauseStatus.RESOLVING)
    pause.refresh_from_db()
    OrmQ.objects.all().delete()

    finish_pause(pause=pause, outcome="completed")

    assert [task.task["name"] for task in OrmQ.objects.all()] == [f"slack-push-{pause.id}"]
