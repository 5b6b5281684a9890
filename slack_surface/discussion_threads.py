"""Group discussions from Slack: a message in a thread of a group integration's channel asks the group.

The message (recorded and claimed by slack_surface.threads, handled on the q-cluster) starts a
discussion on the integration's group with the message as the question, owned by the integration's
user, and the thread is mapped to it (a SlackDiscussion row, written when the runner announces the
discussion, before its first member turn, so every notice of it finds the thread). While that
discussion awaits a decision a message gets "Still awaiting approval" and is not consumed; while it runs,
"still running". Once it ended (COMPLETED, FAILED, CANCELLED) the thread's next message starts a new
discussion in the same thread: a thread is a place to ask the group, one question at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection

from common.errors import ApplicationError
from groups import events as ev
from groups.discussions import start_discussion
from groups.models import TERMINAL_STATES, DiscussionState, GroupConversation
from slack_surface import discussion_messages as texts
from slack_surface import messages
from slack_surface.models import SlackDiscussion, SlackIntegration, SlackThread
from slack_surface.web_api import post_message

logger = logging.getLogger(__name__)


def current_discussion(thread: SlackThread) -> GroupConversation | None:
    link = SlackDiscussion.objects.filter(thread=thread).select_related("discussion").order_by("-pk").first()
    return link.discussion if link else None


def _mapping_sink(thread: SlackThread, slack_user: str) -> ev.EventSink:
    """The sink of the Slack-started run: it maps the thread to the discussion as soon as it exists."""

    def sink(name: str, data: dict[str, Any]) -> None:
        if name == ev.DISCUSSION_STARTED:
            SlackDiscussion.objects.create(
                thread=thread, discussion_id=data["discussionId"], started_by=slack_user
            )

    return sink


THREAD_LOCK_SPACE = 0x534C4B54  # "SLKT": the advisory locks of Slack threads running a discussion


@contextmanager
def thread_lock(thread: SlackThread) -> Iterator[bool]:
    """Whether this process holds the thread while it starts and runs a discussion there (a PostgreSQL
    session advisory lock: two first messages handled at once on two workers start one discussion, and a
    worker that dies releases it with its connection)."""
    if connection.vendor != "postgresql":
        yield True
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [THREAD_LOCK_SPACE, thread.pk])
        held = bool(cursor.fetchone()[0])
    try:
        yield held
    finally:
        if held:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [THREAD_LOCK_SPACE, thread.pk])


def handle_group_message(integration: SlackIntegration, message: dict[str, Any]) -> str:
    """Start a discussion for the message, or tell the thread why not; what happened (for logs and tests)."""
    thread, _ = SlackThread.objects.get_or_create(
        integration=integration,
        channel=message["channel"],
        thread_ts=message.get("thread_ts") or message.get("ts"),
        defaults={"last_speaker": message["user"]},
    )
    with thread_lock(thread) as held:
        if not held:  # another worker is starting or running this thread's discussion right now
            post_message(
                integration, channel=thread.channel, thread_ts=thread.thread_ts, text=texts.STILL_RUNNING
            )
            return "running"
        return _start_unless_running(integration, thread, message)


def _start_unless_running(integration: SlackIntegration, thread: SlackThread, message: dict[str, Any]) -> str:
    channel, thread_ts = thread.channel, thread.thread_ts
    current = current_discussion(thread)
    if current is not None and current.state not in TERMINAL_STATES:
        awaiting = current.state == DiscussionState.AWAITING_APPROVAL
        reply = messages.STILL_AWAITING if awaiting else texts.STILL_RUNNING
        post_message(integration, channel=channel, thread_ts=thread_ts, text=reply)
        return "awaiting" if awaiting else "running"
    group_name = integration.group.name if integration.group else ""
    post_message(
        integration,
        channel=channel,
        thread_ts=thread_ts,
        text=texts.STARTED.format(group=messages.escaped(group_name)),
    )
    try:
        start_discussion(
            user=integration.run_as,
            group_id=integration.group_id,
            question=message["text"],
            events=_mapping_sink(thread, message["user"]),
        )
    except ApplicationError as exc:
        logger.warning("slack discussion in %s/%s refused: %s", channel, thread_ts, exc.detail)
        post_message(
            integration, channel=channel, thread_ts=thread_ts, text=f"⚠️ {messages.escaped(exc.detail)}"
        )
        return "refused"
    return "started"
