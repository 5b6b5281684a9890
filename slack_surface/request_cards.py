"""Approval requests in Slack: a card with Approve / Reject when one is filed, closed when it is decided.

An approval request belongs to no Slack thread and to no integration's agent or group, so its card goes
to the approval channel of one integration: the one ``HITL_SLACK_APPROVAL_REQUESTS_INTEGRATION`` names,
or, when that is empty, the first integration by name that has an approval channel. Naming an
integration that does not exist (or has no approval channel) posts no card. The buttons decide with that
integration's access (its ``conversationOwner``, who must be an approver or admin to decide approval
requests) for the Slack users it allows, as ``slack:<userId>`` (slack_surface.interactions).

- Filed: the core's pause-opened listener (approvals.openings, inside the filing transaction) queues the
  card's post on the q-cluster when some integration would take it; the post is claimed in its delivery
  row first, so the card is posted at most once (slack_surface.cards).
- Settled on any surface (REST, MCP, the admin, a cancel, an ABORT timeout): the settlement listener
  queues closing the card, which loses its buttons ("☑️ Resolved by …"); a card decided in Slack was
  updated by its click already.
"""

from __future__ import annotations

from django.conf import settings
from django.db.models import QuerySet
from django_q.tasks import async_task

from approvals.models import Pause, PauseKind, PauseStatus
from slack_surface import request_messages
from slack_surface.cards import post_approval_card
from slack_surface.integrations import approver_ids
from slack_surface.models import DeliveryKind, SlackDelivery, SlackIntegration
from slack_surface.pushes import close_card

CARD_TASK = "slack_surface.request_cards.post_request_card"
CLOSE_TASK = "slack_surface.request_cards.close_request_card"


def card_integrations() -> QuerySet[SlackIntegration]:
    """The integrations an approval request's card may go to, the one it goes to first."""
    integrations = SlackIntegration.objects.exclude(approval_channel="")
    named = settings.HITL_SLACK_APPROVAL_REQUESTS_INTEGRATION
    if named:
        integrations = integrations.filter(name=named)
    return integrations.order_by("name")


def on_pause_opened(pause: Pause) -> None:
    """The opening listener: an approval request's pause gets its card, when an integration takes it."""
    if pause.kind != PauseKind.ACTION:
        return
    if card_integrations().exists():
        async_task(CARD_TASK, str(pause.id), task_name=f"slack-card-{pause.id}", group="slack")


def on_pause_settled(pause: Pause) -> None:
    """The settlement listener: a card posted for the request is closed, unless Slack decided it."""
    if pause.kind != PauseKind.ACTION or (pause.decided_by or "").startswith("slack:"):
        return
    if SlackDelivery.objects.filter(pause_id=pause.id, kind=DeliveryKind.APPROVAL_CARD).exists():
        async_task(CLOSE_TASK, str(pause.id), task_name=f"slack-close-{pause.id}", group="slack")


def post_request_card(pause_id: str) -> str:
    """The q-cluster task: the card of a request still pending, in the chosen integration's channel."""
    pause = Pause.objects.filter(pk=pause_id, kind=PauseKind.ACTION, status=PauseStatus.PENDING).first()
    if pause is None:
        return "not-pending"
    integration = card_integrations().first()
    if integration is None:
        return "no-integration"
    blocks = request_messages.request_approval_card(
        pause, integration_name=integration.name, buttons=bool(approver_ids(integration))
    )
    posted = post_approval_card(integration, pause, blocks=blocks, title=request_messages.CARD_TITLE)
    return "posted" if posted else "not-posted"


def close_request_card(pause_id: str) -> str:
    """The q-cluster task: a card decided elsewhere loses its buttons."""
    pause = Pause.objects.filter(pk=pause_id).first()
    if pause is None:
        return "gone"
    close_card(pause)
    return "closed"
