"""Deciding from Slack: the Approve / Reject buttons of an approval card.

Order of checks: the request must carry Slack's signature headers (401), its button must name an
integration (a bare value cannot be bound: 403), and the signature must hold for THAT integration's
signing secret, fresh within five minutes (401); only then is anything read or changed. The clicking
Slack user must be in the integration's ``hitlApproverUserIds``. The decision goes through the same
services as REST (``decide_conversation`` for a conversation, ``approve_discussion`` for a group
pause, ``group:<id>``, ``decide_approval_request`` for an approval request, ``request:<id>``), with the
integration's user's access, recorded as ``slack:<userId>``. A quick continuation runs here, a slow one
is queued, so Slack gets its answer in time.

Slack wants the answer to a click within 3 seconds, and its Web API may be slow: the click is answered
(200) as soon as it is decided, and what the channel sees (the card updated to say who decided, or a
notice of a refusal) is queued for the q-cluster (``answer_in_slack``), never sent while Slack waits.

Separation of duties: Slack users are not accounts of ours, so a pause that forbids self-approval is
refused to the Slack user whose message raised it (the card's delivery row names them); the core's
own rule still applies to the integration's user.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from django_q.tasks import async_task

from approval_requests.request_decisions import decide_approval_request
from approvals.actors import Actor
from approvals.models import Pause, PauseStatus, SubjectType, Verdict
from approvals.self_approval import SELF_APPROVAL_DETAIL
from approvals.votes import REQUESTER_NEVER_COUNTS, Tally, tally_of
from common.errors import ApplicationError, Forbidden, NotFound, WrongState
from conversations.conversation_decisions import QUICK_HERE, decide_conversation
from conversations.selectors import decision_on_version
from groups.discussion_decisions import approve_discussion
from groups.models import GroupConversation
from slack_surface import messages
from slack_surface.cards import DELIVERY_FAILURES
from slack_surface.integrations import approver_ids, integration_named
from slack_surface.models import DeliveryKind, SlackDelivery, SlackIntegration
from slack_surface.signatures import REFUSAL, Unsigned, signed_by
from slack_surface.web_api import post_message, update_message

logger = logging.getLogger(__name__)

VERDICTS = {messages.APPROVE: Verdict.APPROVED, messages.REJECT: Verdict.REJECTED}
SLACK_USER = re.compile(r"[A-Z0-9]{2,32}")
ANSWER_TASK = "slack_surface.interactions.answer_in_slack"
UNBINDABLE = "The button does not name a Slack integration; it cannot be verified or decided."
RESOLVED = {"APPROVED": "✅ Approved by {who}", "REJECTED": "⛔ Rejected by {who}"}


@dataclass(frozen=True)
class Click:
    integration_name: str
    subject: str
    action_id: str
    user: str
    channel: str
    message_ts: str
    kind: str
    blocks: tuple[dict[str, Any], ...] = ()  # the card as Slack shows it (the payload's message)


def _click(body: bytes) -> Click:
    """The first action of a block_actions payload (form field ``payload``); 403 when it names no integration."""
    try:
        payload = json.loads(parse_qs(body.decode("utf-8")).get("payload", [""])[0])
    except (UnicodeDecodeError, ValueError):
        raise Unsigned(REFUSAL) from None  # nothing to bind a signature to
    payload = payload if isinstance(payload, dict) else {}
    actions = payload.get("actions") if isinstance(payload.get("actions"), list) else []
    action = actions[0] if actions and isinstance(actions[0], dict) else {}
    value = str(action.get("value") or "")
    name, bar, subject = value.partition("|")
    if not bar or not name or not subject:
        raise Forbidden(UNBINDABLE)
    container = payload.get("container") if isinstance(payload.get("container"), dict) else {}
    channel = payload.get("channel") if isinstance(payload.get("channel"), dict) else {}
    user = payload.get("user") if isinstance(payload.get("user"), dict) else {}
    message = payload.get("message") if isinstance(payload.get("message"), dict) else {}
    blocks = message.get("blocks") if isinstance(message.get("blocks"), list) else []
    return Click(
        integration_name=name,
        subject=subject,
        action_id=str(action.get("action_id") or ""),
        user=str(user.get("id") or ""),
        channel=str(container.get("channel_id") or channel.get("id") or ""),
        message_ts=str(container.get("message_ts") or ""),
        kind=str(payload.get("type") or ""),
        blocks=tuple(block for block in blocks if isinstance(block, dict)),
    )


def verified_click(
    *, body: bytes, timestamp: str | None, signature: str | None
) -> tuple[SlackIntegration, Click]:
    if not timestamp or not signature:
        raise Unsigned(REFUSAL)
    click = _click(body)
    integration = integration_named(click.integration_name)
    if integration is None or not signed_by(integration, body=body, timestamp=timestamp, signature=signature):
        raise Unsigned(REFUSAL)
    return integration, click


def handle_click(integration: SlackIntegration, click: Click) -> str:
    """Decide the card's pause as the clicking user; what became of it (for logs and tests)."""
    verdict = VERDICTS.get(click.action_id)
    if click.kind != "block_actions" or verdict is None:
        return "ignored"
    if not SLACK_USER.fullmatch(click.user) or click.user not in approver_ids(integration):
        _tell(
            integration,
            click,
            f"⚠️ {messages.mention(click.user)} is not authorized to approve or reject this request.",
        )
        return "not-authorized"
    decision = {"verdict": verdict, "note": f"Decided via Slack by {click.user}"}
    # a Slack user is no account of ours: routing checks the integration's user it decides with
    actor = Actor(name=f"slack:{click.user}", via=integration.run_as)
    try:
        if click.subject.startswith("group:"):
            tally = _decide_group(integration, click, decision, actor)
        elif click.subject.startswith("request:"):
            tally = _decide_request(integration, click, decision, actor)
        else:
            tally = _decide_conversation(integration, click, decision, actor)
    except (WrongState, NotFound):
        _update(integration, click, messages.ALREADY_RESOLVED)
        return "already-resolved"
    except ApplicationError as exc:
        _tell(integration, click, f"⚠️ {messages.mention(click.user)}: {messages.escaped(exc.detail)}")
        return "refused"
    if tally is not None:  # one approval of several: the card keeps its buttons and shows the count
        _update(
            integration,
            click,
            messages.vote_recorded(click.user, tally),
            messages.with_votes(click.blocks, tally),
        )
        return "voted"
    _update(integration, click, RESOLVED[verdict].format(who=messages.mention(click.user)))
    return "decided"


def _decide_conversation(
    integration: SlackIntegration, click: Click, decision: dict[str, Any], actor: Actor
) -> Tally | None:
    found = decision_on_version(integration.run_as, click.subject)
    pending = Pause.objects.filter(
        subject_type=SubjectType.CONVERSATION, subject_id=found.conversation.pk, status=PauseStatus.PENDING
    ).first()
    _refuse_self_approval(pending, click)
    return decide_conversation(
        user=integration.run_as,
        conversation_id=found.conversation.pk,
        body=decision,
        actor=actor,
        continuation=QUICK_HERE,
    ).tally


def _refuse_self_approval(pending: Pause | None, click: Click) -> None:
    """A pause that forbids self-approval is refused to the Slack user whose message raised it, and so is
    that user's approval of a pause that needs several: the requester never counts (approvals.votes)."""
    counts = (
        VERDICTS.get(click.action_id) == "APPROVED" and pending is not None and pending.required_approvals > 1
    )
    if pending is None or (pending.allow_self_approval and not counts):
        return
    raised_by = (
        SlackDelivery.objects.filter(pause_id=pending.id, kind=DeliveryKind.APPROVAL_CARD)
        .values_list("raised_by", flat=True)
        .first()
    )
    if raised_by == click.user:
        raise Forbidden(SELF_APPROVAL_DETAIL if not pending.allow_self_approval else REQUESTER_NEVER_COUNTS)


def _decide_group(
    integration: SlackIntegration, click: Click, decision: dict[str, Any], actor: Actor
) -> Tally | None:
    try:
        key = uuid.UUID(click.subject.removeprefix("group:"))
    except ValueError:
        raise NotFound("No such discussion.") from None
    _refuse_self_approval(
        Pause.objects.filter(
            subject_type=SubjectType.DISCUSSION, subject_id=key, status=PauseStatus.PENDING
        ).first(),
        click,
    )
    group_id = GroupConversation.objects.filter(pk=key).values_list("group_id", flat=True).first()
    return approve_discussion(
        user=integration.run_as,
        group_id=group_id,
        discussion_id=key,
        body={"decision": decision},
        actor=actor,
        continue_here=False,  # Slack wants its answer within 3 s: the rest of the discussion runs on the q-cluster
    ).tally


def _decide_request(
    integration: SlackIntegration, click: Click, decision: dict[str, Any], actor: Actor
) -> Tally | None:
    """An approval request: reviewers only, so the integration's user must be an approver or admin (the
    service refuses anyone else, 403, told in the channel). Nothing runs after it: it is quick."""
    request_id = click.subject.removeprefix("request:")
    decided = decide_approval_request(
        user=integration.run_as, request_id=request_id, body=decision, actor=actor
    )
    pause = Pause.objects.filter(pk=decided.pause_id).first()
    return tally_of(pause) if pause is not None and pause.status == PauseStatus.PENDING else None


def _update(
    integration: SlackIntegration, click: Click, text: str, blocks: list[dict[str, Any]] | None = None
) -> None:
    """Queue the card's update: it says ``text`` and has no buttons left; or, with ``blocks``, becomes
    those blocks (a card that still waits for approvals)."""
    if click.channel and click.message_ts:
        async_task(
            ANSWER_TASK, str(integration.pk), click.channel, click.message_ts, text, blocks, group="slack"
        )


def _tell(integration: SlackIntegration, click: Click, text: str) -> None:
    """Queue a notice to the card's channel."""
    if click.channel:
        async_task(ANSWER_TASK, str(integration.pk), click.channel, "", text, group="slack")


def answer_in_slack(
    integration_id: str, channel: str, ts: str, text: str, blocks: list[dict[str, Any]] | None = None
) -> None:
    """The q-cluster's part of a click: the card at ``ts`` updated to ``text`` (or to ``blocks`` when
    given; no ``ts``: a notice posted to ``channel``). A failure is logged and not tried again: the
    decision stands either way."""
    integration = SlackIntegration.objects.filter(pk=integration_id).first()
    if integration is None:
        return
    try:
        if ts:
            update_message(
                integration, channel=channel, ts=ts, text=text, blocks=blocks or messages.resolved_card(text)
            )
        else:
            post_message(integration, channel=channel, text=text)
    except DELIVERY_FAILURES as exc:
        what = f"approval card {ts} not updated" if ts else "slack notice not posted"
        logger.warning("%s: %s", what, type(exc).__name__)
