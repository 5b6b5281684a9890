"""Escalation steps and reminders in Slack: a pause whose approval card was posted gets a line in the
card's channel when an escalation step opens and before its deadline (approvals.notices tells each
event once, in its claiming transaction; the post is queued for the q-cluster like a click's answer)."""

from __future__ import annotations

from django.utils import timezone
from django.utils.dateformat import format as date_format
from django_q.tasks import async_task

from approvals.models import Pause
from approvals.routing import step_text
from slack_surface import messages
from slack_surface.interactions import ANSWER_TASK
from slack_surface.models import DeliveryKind, SlackDelivery


def notice_text(pause: Pause, event: str, step: int) -> str | None:
    if event == "escalated":
        who = messages.escaped(step_text(pause, step))
        return f"⏫ Escalated: {who} may now decide “{messages.escaped(pause.reason)}” too."
    if event == "reminder" and pause.due_at is not None:
        due = date_format(timezone.localtime(pause.due_at), "Y-m-d H:i T")
        return (
            f"⏰ Reminder: “{messages.escaped(pause.reason)}” is due at {due} "
            f"({messages.escaped(pause.timeout_policy)} then)."
        )
    return None


def on_notice(pause: Pause, event: str, step: int) -> None:
    """The notice listener: the card's channel hears an escalation step and the reminder."""
    text = notice_text(pause, event, step)
    if text is None:
        return
    card = (
        SlackDelivery.objects.filter(pause_id=pause.id, kind=DeliveryKind.APPROVAL_CARD)
        .exclude(channel="")
        .values_list("integration_id", "channel")
        .first()
    )
    if card is not None:
        integration_id, channel = card
        async_task(ANSWER_TASK, str(integration_id), channel, "", text, group="slack")
