"""The notices of a Slack-started discussion: recorded where each event happens, posted by the q-cluster.

Every notice must reach the discussion's thread exactly once, whoever moved the discussion on (Slack, a
REST request, the admin inbox, MCP, a timer) and in whichever process its continuation runs. So none is
taken from the SSE sink of the process that started it; each comes from the one place that sees the
event in every process:

- the pause (⏸️, reason, awaiting task ids) and its approval card: the core's pause-opened listener
  (approvals.openings), inside the transaction that opens the pause;
- the decision (approved / rejected by whom) and a cancel of a paused discussion: the core's settlement
  listener (approvals.settlements), inside the settling transaction;
- member_pause_skipped, the end (COMPLETED / FAILED) and a cancel of a running discussion: the runner's
  process-wide observer (groups.events.register_observer), right after the commit that made them true.

A notice is a SlackNotice row keyed by its event, recorded with the q-cluster task that posts it (the
ORM broker shares the database, so both commit with the event or not at all); recording it again is a
no-op. The task claims the row before posting it (the claim of slack_surface.pushes): a refused or
unconnected post is retried with back-off, one that may have reached Slack is never posted again.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from django_q.models import Schedule
from django_q.tasks import async_task, schedule

from approvals.models import Engine, Pause, PauseStatus, Verdict
from groups import events as ev
from groups.models import DiscussionState, GroupConversation
from groups.selectors import discussion_version
from slack_surface import discussion_messages as texts
from slack_surface.cards import DELIVERY_FAILURES, post_approval_card
from slack_surface.integrations import approver_ids
from slack_surface.models import DeliveryStatus, SlackDiscussion, SlackNotice
from slack_surface.pushes import close_card
from slack_surface.web_api import post_message

logger = logging.getLogger(__name__)

POST_TASK = "slack_surface.discussion_notices.post_notice"
CARD_TASK = "slack_surface.discussion_notices.post_group_card"
CLOSE_TASK = "slack_surface.discussion_notices.close_group_card"
END = "end"


def _link(discussion_id: Any) -> SlackDiscussion | None:
    return SlackDiscussion.objects.filter(discussion_id=discussion_id).first()


def record_notice(link: SlackDiscussion, key: str, text: str) -> None:
    """Record the notice and queue its post, once per (discussion, key)."""
    try:
        with transaction.atomic():
            notice = SlackNotice.objects.create(discussion=link, key=key[:120], text=text)
            async_task(POST_TASK, notice.pk, task_name=f"slack-notice-{notice.pk}", group="slack")
    except IntegrityError:
        pass  # told already


def on_pause_opened(pause: Pause) -> None:
    """The opening listener: a group pause of a Slack-started discussion gets its notice and card."""
    if pause.surface != Engine.GROUP:
        return
    link = _link(pause.subject_id)
    if link is None:
        return
    record_notice(link, f"pause:{pause.id}", texts.pause_notice(pause))
    async_task(CARD_TASK, str(pause.id), task_name=f"slack-card-{pause.id}", group="slack")


def on_pause_settled(pause: Pause) -> None:
    """The settlement listener: the verdict and who gave it (a cancelled pause: the cancel notice)."""
    if pause.surface != Engine.GROUP:
        return
    link = _link(pause.subject_id)
    if link is None:
        return
    if pause.status == PauseStatus.CANCELLED or pause.verdict == Verdict.CANCELLED:
        record_notice(link, END, texts.cancel_notice(texts.cancelled_by(pause.decided_by)))
    else:
        record_notice(link, f"decision:{pause.id}", texts.decision_notice(pause))
    async_task(CLOSE_TASK, str(pause.id), task_name=f"slack-close-{pause.id}", group="slack")


WATCHED = frozenset({ev.MEMBER_PAUSE_SKIPPED, ev.GROUP_COMPLETE, ev.GROUP_ERROR, ev.CANCELLED})


def observe(name: str, data: dict[str, Any]) -> None:
    """The runner's observer: member_pause_skipped, the end, a cancel of a running discussion."""
    if name not in WATCHED:
        return
    if name == ev.GROUP_ERROR and data.get("state") != DiscussionState.FAILED:
        return  # a resume that did not start: the discussion still awaits its decision
    link = _link(data["discussionId"])
    if link is None:
        return
    discussion = GroupConversation.objects.get(pk=link.discussion_id)
    if name == ev.MEMBER_PAUSE_SKIPPED:
        member = str(data.get("member") or "")
        record_notice(
            link,
            f"skipped:{discussion.turn_count}:{member}",
            texts.skipped_notice(_member_name(discussion, member), str(data.get("note") or "")),
        )
    elif name == ev.CANCELLED:
        record_notice(link, END, texts.cancel_notice(texts.cancelled_by(data.get("cancelledBy"))))
    else:
        record_notice(link, END, texts.end_notice(discussion, message=str(data.get("message") or "")))


def _member_name(discussion: GroupConversation, agent_id: str) -> str:
    """The member's displayName or role in the discussion's group version, else its agent id."""
    for member in discussion_version(discussion).document.get("members", []):
        if str(member.get("agentId", "")).lower() == agent_id:
            return str(member.get("displayName") or member.get("role") or agent_id)
    return agent_id


def post_notice(notice_pk: int) -> str:
    """The q-cluster task: claim the notice, post it in the discussion's thread."""
    claimed = SlackNotice.objects.filter(
        pk=notice_pk, status__in=(DeliveryStatus.QUEUED, DeliveryStatus.FAILED)
    ).update(status=DeliveryStatus.SENDING, attempts=F("attempts") + 1)
    if not claimed:
        return "skipped"
    notice = SlackNotice.objects.select_related("discussion__thread__integration").get(pk=notice_pk)
    thread = notice.discussion.thread
    try:
        ts = post_message(
            thread.integration, channel=thread.channel, thread_ts=thread.thread_ts, text=notice.text
        )
    except DELIVERY_FAILURES as exc:
        logger.warning(
            "notice %s not posted (attempt %s): %s", notice.key, notice.attempts, type(exc).__name__
        )
        SlackNotice.objects.filter(pk=notice_pk).update(status=DeliveryStatus.FAILED)
        return _retry_later(notice)
    SlackNotice.objects.filter(pk=notice_pk).update(status=DeliveryStatus.SENT, ts=ts)
    return "sent"


def _retry_later(notice: SlackNotice) -> str:
    if notice.attempts >= settings.HITL_SLACK_DELIVERY_ATTEMPTS:
        logger.error("notice %s given up after %s attempts", notice.key, notice.attempts)
        return "given-up"
    schedule(
        POST_TASK,
        notice.pk,
        name=f"slack-notice-{notice.pk}-{notice.attempts}",
        schedule_type=Schedule.ONCE,
        repeats=1,
        next_run=timezone.now() + timedelta(seconds=30 * 2 ** (notice.attempts - 1)),
        cluster=settings.Q_CLUSTER["name"],
    )
    return "retrying"


def post_group_card(pause_id: str) -> str:
    """The q-cluster task: the group pause's card in the approval channel (once: its delivery row)."""
    pause = Pause.objects.filter(pk=pause_id, status=PauseStatus.PENDING).first()
    link = _link(pause.subject_id) if pause is not None else None
    if pause is None or link is None:
        return "not-pending"
    link = SlackDiscussion.objects.select_related("thread__integration__group").get(pk=link.pk)
    integration = link.thread.integration
    blocks = texts.group_approval_card(
        pause,
        integration_name=integration.name,
        group_name=integration.group.name if integration.group else str(pause.group_id),
        buttons=bool(approver_ids(integration)),
    )
    posted = post_approval_card(
        integration, pause, raised_by=link.started_by, blocks=blocks, title=texts.CARD_TITLE
    )
    return "posted" if posted else "not-posted"


def close_group_card(pause_id: str) -> str:
    """The q-cluster task: a card decided elsewhere loses its buttons."""
    pause = Pause.objects.filter(pk=pause_id).first()
    if pause is None:
        return "gone"
    close_card(pause)
    return "closed"
