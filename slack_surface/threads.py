"""Conversations from Slack: each thread talks to one conversation of the integration's agent.

The events endpoint only records a message (once per ``event_id``: Slack retries a delivery it thinks
was lost) and queues it; a q-cluster worker runs the turn and answers in the thread, so Slack gets its
200 within its three seconds however long the agent takes. A message is handled at most once: the
worker claims it before the turn runs, so a task delivered twice never runs a turn twice.

A message while the conversation awaits a decision is answered "Still awaiting approval" and not
consumed (the REST say's 409, told in Slack words). A turn that pauses posts its output so far with
the pause notice (reason only) in the thread, and the approval card to the approval channel. A group
integration's message starts a group discussion instead (slack_surface.discussion_threads).
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import IntegrityError, transaction
from django_q.tasks import async_task

from approvals.models import PauseStatus, SubjectType
from approvals.selectors import current_pause_of
from common.errors import ApplicationError, WrongState
from conversations import turns
from conversations.models import ConversationState
from conversations.selectors import talk_on_version
from conversations.snapshots import snapshot
from slack_surface import messages
from slack_surface.cards import post_approval_card
from slack_surface.discussion_threads import handle_group_message
from slack_surface.models import SlackEvent, SlackIntegration, SlackThread
from slack_surface.web_api import post_message

logger = logging.getLogger(__name__)

HANDLE_TASK = "slack_surface.threads.handle_message"


def wanted_message(event: dict[str, Any]) -> bool:
    """A person's plain message: not a bot's (our own replies come back as events), not an edit or join."""
    return (
        event.get("type") == "message"
        and not event.get("subtype")
        and not event.get("bot_id")
        and bool(event.get("user"))
        and bool(event.get("channel"))
        and isinstance(event.get("text"), str)
    )


def receive_event(integration: SlackIntegration, payload: dict[str, Any]) -> dict[str, Any]:
    """Answer an Events API request already verified as signed by ``integration``'s secret."""
    if payload.get("type") == "url_verification":
        return {"challenge": str(payload.get("challenge") or "")}
    event = payload.get("event") if payload.get("type") == "event_callback" else None
    event_id = str(payload.get("event_id") or "")
    if not isinstance(event, dict) or not event_id or not wanted_message(event):
        return {"ok": True}
    message = {key: event.get(key) for key in ("channel", "user", "text", "ts", "thread_ts")}
    try:
        with transaction.atomic():
            row = SlackEvent.objects.create(event_id=event_id[:64], integration=integration, message=message)
            async_task(HANDLE_TASK, row.pk, task_name=f"slack-event-{row.pk}", group="slack")
    except IntegrityError:
        pass  # a retry of a delivery already recorded
    return {"ok": True}


def handle_message(event_pk: int) -> str:
    """The q-cluster task: claim the recorded message, run its turn, answer in its thread."""
    if not SlackEvent.objects.filter(pk=event_pk, handled=False).update(handled=True):
        return "skipped"
    row = SlackEvent.objects.select_related(
        "integration__agent", "integration__group", "integration__run_as"
    ).get(pk=event_pk)
    integration, message = row.integration, row.message
    if integration.group_id is not None:
        return handle_group_message(integration, message)
    thread_ts = message.get("thread_ts") or message.get("ts")
    channel = message["channel"]
    thread = SlackThread.objects.filter(integration=integration, channel=channel, thread_ts=thread_ts).first()
    said: list[str] = []
    if thread is None:
        try:
            started = turns.start_conversation(
                user=integration.run_as, agent_id=integration.agent_id, environment=integration.environment
            )
        except ApplicationError as exc:  # not deployed, or a cap of pending pauses: nothing was started
            logger.warning("slack message in %s/%s refused: %s", channel, thread_ts, exc.detail)
            post_message(
                integration, channel=channel, thread_ts=thread_ts, text=f"⚠️ {messages.escaped(exc.detail)}"
            )
            return "refused"
        thread = SlackThread.objects.create(
            integration=integration,
            channel=channel,
            thread_ts=thread_ts,
            conversation=started.conversation,
            last_speaker=message["user"],
        )
        said = _output(started)
    text = _turn(integration, thread, message, said)
    post_message(integration, channel=channel, thread_ts=thread_ts, text=text)
    pause = current_pause_of(SubjectType.CONVERSATION, thread.conversation_id)
    if pause is not None and pause.status == PauseStatus.PENDING:
        post_approval_card(integration, pause, raised_by=thread.last_speaker)
    return "handled"


def _output(result: turns.TurnResult) -> list[str]:
    return [str(line) for line in snapshot(result.conversation, steps=result.steps)["output"]]


def _turn(
    integration: SlackIntegration, thread: SlackThread, message: dict[str, Any], said: list[str]
) -> str:
    """Run the message's turn; the text to answer in the thread."""
    conversation = talk_on_version(integration.run_as, thread.conversation_id)
    if conversation.conversation.state == ConversationState.AWAITING_HUMAN:
        if said:  # the first turn of a new thread's conversation paused: the message is not consumed
            return messages.thread_notice(said, _reason_of(thread))
        return messages.STILL_AWAITING
    SlackThread.objects.filter(pk=thread.pk).update(last_speaker=message["user"])
    thread.last_speaker = message["user"]
    try:
        result = turns.say(
            conversation=conversation, user=integration.run_as, user_input=message["text"], context={}
        )
    except WrongState as exc:
        awaiting = exc.current_state == ConversationState.AWAITING_HUMAN
        return messages.STILL_AWAITING if awaiting else messages.STILL_WORKING
    except ApplicationError as exc:
        logger.warning("slack message in %s/%s refused: %s", thread.channel, thread.thread_ts, exc.detail)
        return f"⚠️ {messages.escaped(exc.detail)}"
    said = [*said, *_output(result)]
    if result.conversation.state == ConversationState.AWAITING_HUMAN:
        return messages.thread_notice(said, _reason_of(thread))
    return messages.escaped("\n".join(said)) or "…"


def _reason_of(thread: SlackThread) -> str:
    pause = current_pause_of(SubjectType.CONVERSATION, thread.conversation_id)
    return pause.reason if pause else ""
