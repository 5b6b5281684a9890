"""The approval card of a pause in the integration's approval channel: posted once per pause.

The delivery row is the claim: whoever inserts it posts the card; a post that fails drops the claim
(logged), so a later attempt may post it, and a card is never posted twice. The row keeps where the
card is (to update it once decided) and which Slack user's message raised the pause.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import IntegrityError, transaction
from slack_sdk.errors import SlackApiError, SlackClientError

from approvals.models import Engine, Pause
from slack_surface import messages
from slack_surface.integrations import SecretUnavailable, approver_ids
from slack_surface.models import DeliveryKind, DeliveryStatus, SlackDelivery, SlackIntegration
from slack_surface.web_api import post_message

logger = logging.getLogger(__name__)
DELIVERY_FAILURES = (SlackApiError, SlackClientError, SecretUnavailable, OSError)


def card_subject(pause: Pause) -> str:
    """What the card's buttons name: the conversation, or ``group:<discussionId>``."""
    return f"group:{pause.subject_id}" if pause.surface == Engine.GROUP else str(pause.subject_id)


def post_approval_card(
    integration: SlackIntegration,
    pause: Pause,
    *,
    raised_by: str = "",
    blocks: list[dict[str, Any]] | None = None,
    title: str = messages.CARD_TITLE,
) -> bool:
    """Post the card (by default a conversation's; ``blocks``: another card) unless it was posted or no
    approval channel is configured; True when posted."""
    if not integration.approval_channel:
        return False
    try:
        with transaction.atomic():
            delivery = SlackDelivery.objects.create(
                pause_id=pause.id,
                kind=DeliveryKind.APPROVAL_CARD,
                integration=integration,
                channel=integration.approval_channel,
                raised_by=raised_by,
                attempts=1,
            )
    except IntegrityError:
        return False
    if blocks is None:
        blocks = messages.approval_card(
            pause,
            integration_name=integration.name,
            agent_name=integration.agent.name,
            subject=card_subject(pause),
            buttons=bool(approver_ids(integration)),
        )
    try:
        ts = post_message(integration, channel=integration.approval_channel, text=title, blocks=blocks)
    except DELIVERY_FAILURES as exc:
        logger.warning("approval card of pause %s not posted: %s", pause.id, type(exc).__name__)
        delivery.delete()
        return False
    SlackDelivery.objects.filter(pk=delivery.pk).update(status=DeliveryStatus.SENT, ts=ts)
    return True
