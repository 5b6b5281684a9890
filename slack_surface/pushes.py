"""The continuation push: once a decided pause of a Slack thread's conversation settles (its continuation
finished, or it was cancelled), the thread is told the verdict and what the conversation said next.

Whoever settled it (REST, admin, Slack, MCP, a timer) does not know Slack: the core announces the
settlement (approvals.settlements) and ``on_pause_settled`` queues ``push_continuation`` for the
q-cluster. The push is claimed in a delivery row per pause before it is sent, so it is posted at most
once: a post Slack refused or that never connected is marked FAILED and tried again later (up to
``HITL_SLACK_DELIVERY_ATTEMPTS`` in all, backing off); one left SENDING by a worker that died mid-post
is not tried again, because it may have been posted.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from django_q.models import Schedule
from django_q.tasks import async_task, schedule

from approvals.models import Engine, Pause, PauseStatus, SubjectType
from approvals.selectors import current_pause_of
from common import rows
from conversations.models import Conversation, ConversationState
from conversations.snapshots import snapshot
from slack_surface import messages
from slack_surface.cards import DELIVERY_FAILURES, post_approval_card
from slack_surface.models import DeliveryKind, DeliveryStatus, SlackDelivery, SlackThread
from slack_surface.web_api import post_message, update_message

logger = logging.getLogger(__name__)

PUSH_TASK = "slack_surface.pushes.push_continuation"
SETTLED = (PauseStatus.RESOLVED, PauseStatus.CANCELLED)


def on_pause_settled(pause: Pause, probed: bool | None = None) -> None:
    """The settlement listener (in the settling transaction): queue the push of a Slack thread's conversation.
    ``probed``: whether the conversation is a Slack thread's, as the settling statement answered
    ``thread_probe()`` (None: not asked, so asked here)."""
    if pause.surface != Engine.REGULAR:
        return
    threaded = (
        probed
        if probed is not None
        else rows.exists(SlackThread, where={"conversation_id": pause.subject_id})
    )
    if threaded:
        async_task(PUSH_TASK, str(pause.id), task_name=f"slack-push-{pause.id}", group="slack")


def thread_probe() -> str:
    """``on_pause_settled``'s question as an SQL boolean over the settled pause's row: a regular pause
    whose conversation is a Slack thread's (``approvals.settlements``)."""
    pause, thread = Pause._meta.db_table, SlackThread._meta.db_table
    return (
        f'("{pause}"."surface" = \'{Engine.REGULAR.value}\' AND EXISTS (SELECT 1 FROM "{thread}" '  # nosec B608  # identifiers from model metadata, a constant
        f'WHERE "{thread}"."conversation_id" = "{pause}"."subject_id"))'
    )


def _claim(pause: Pause, thread: SlackThread) -> SlackDelivery | None:
    """The delivery row, claimed for this attempt; None when it was sent, or is being (or may have been)."""
    try:
        with transaction.atomic():
            return SlackDelivery.objects.create(
                pause_id=pause.id, kind=DeliveryKind.CONTINUATION, integration=thread.integration, attempts=1
            )
    except IntegrityError:
        pass
    claimed = SlackDelivery.objects.filter(
        pause_id=pause.id, kind=DeliveryKind.CONTINUATION, status=DeliveryStatus.FAILED
    ).update(status=DeliveryStatus.SENDING, attempts=F("attempts") + 1)
    if not claimed:
        return None
    return SlackDelivery.objects.get(pause_id=pause.id, kind=DeliveryKind.CONTINUATION)


def continuation_message(pause: Pause, conversation: Conversation) -> str:
    said = [str(line) for line in snapshot(conversation)["output"]]
    text = messages.continuation_text(pause, state=conversation.state, output=said)
    if conversation.state == ConversationState.AWAITING_HUMAN:
        again = current_pause_of(SubjectType.CONVERSATION, conversation.pk)
        if again is not None and again.id != pause.id:
            text += f"\n\n{messages.AWAITING}\n> {messages.escaped(again.reason)}"
    return text


def push_continuation(pause_id: str) -> str:
    """The q-cluster task: post the verdict and the continued output in the thread, once."""
    pause = Pause.objects.filter(pk=pause_id).first()
    if pause is None or pause.status not in SETTLED:
        return "not-settled"
    thread = (
        SlackThread.objects.select_related("integration__agent")
        .filter(conversation_id=pause.subject_id)
        .first()
    )
    if thread is None:
        return "no-thread"
    delivery = _claim(pause, thread)
    if delivery is None:
        return "skipped"
    integration = thread.integration
    conversation = Conversation.objects.get(pk=pause.subject_id)
    try:
        ts = post_message(
            integration,
            channel=thread.channel,
            thread_ts=thread.thread_ts,
            text=continuation_message(pause, conversation),
        )
    except DELIVERY_FAILURES as exc:
        logger.warning(
            "continuation of pause %s not posted (attempt %s): %s",
            pause.id,
            delivery.attempts,
            type(exc).__name__,
        )
        SlackDelivery.objects.filter(pk=delivery.pk).update(status=DeliveryStatus.FAILED)
        return _retry_later(pause, delivery.attempts)
    SlackDelivery.objects.filter(pk=delivery.pk).update(
        status=DeliveryStatus.SENT, channel=thread.channel, ts=ts
    )
    close_card(pause)
    again = current_pause_of(SubjectType.CONVERSATION, conversation.pk)
    if again is not None and again.id != pause.id and again.status == PauseStatus.PENDING:
        post_approval_card(integration, again, raised_by=thread.last_speaker)
    return "sent"


def _retry_later(pause: Pause, attempts: int) -> str:
    if attempts >= settings.HITL_SLACK_DELIVERY_ATTEMPTS:
        logger.error("continuation of pause %s given up after %s attempts", pause.id, attempts)
        return "given-up"
    schedule(
        PUSH_TASK,
        str(pause.id),
        name=f"slack-push-{pause.id}-{attempts}",
        schedule_type=Schedule.ONCE,
        repeats=1,
        next_run=timezone.now() + timedelta(seconds=30 * 2 ** (attempts - 1)),
        cluster=settings.Q_CLUSTER["name"],
    )
    return "retrying"


def close_card(pause: Pause) -> None:
    """A card decided elsewhere (REST, admin, a timer) loses its buttons; one decided in Slack already did."""
    if pause.decided_by.startswith("slack:"):
        return
    card = (
        SlackDelivery.objects.select_related("integration")
        .filter(pause_id=pause.id, kind=DeliveryKind.APPROVAL_CARD, status=DeliveryStatus.SENT)
        .first()
    )
    if card is None or not card.ts:
        return
    text = f"☑️ Resolved by {messages.decider_text(pause)}: {pause.verdict}"
    try:
        update_message(
            card.integration, channel=card.channel, ts=card.ts, text=text, blocks=messages.resolved_card(text)
        )
    except DELIVERY_FAILURES as exc:
        logger.warning("approval card of pause %s not updated: %s", pause.id, type(exc).__name__)
