"""Email about pauses: a new pause to its approvers, an escalation step to the step's approvers, a
reminder before the deadline, a decision to its requester (opt-in). Django's email framework sends them
(``EMAIL_URL``: the console in development, SMTP in production); ``HITL_EMAIL_NOTIFICATIONS`` turns
them off.

Once per event: an event is claimed by writing its ``Notice`` row (one per pause, event and step) in the
transaction that sends the mail, so two timer clusters, or a task delivered twice, never send it twice;
a send that fails rolls the claim back and django-q2 tries the task again.

Other channels hear the same events: a listener registered with ``register_notice_listener`` is called
in the claiming transaction (an approval request's signed webhook, a Slack card's channel), so it is
told once too. Like the openings' listeners it only writes rows and queues tasks, never calls out. The task runs on the q-cluster:
opening and deciding a pause queue it in their transaction; the timer drainer's sweep queues escalation
steps and reminders as they fall due (``queue_due_notices``).

What a message says is what a reviewer reads in the inbox: what is asked (a group's or a request's
headline, the reason), the agent, the tools, the deadline, who may decide, and a link to the decision
page, which asks the reader to sign in. Never an argument, a transcript, a secret, or a link that decides.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import EmailMessage, get_connection
from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q
from django.urls import reverse
from django.utils import timezone
from django.utils.dateformat import format as date_format
from django_q.tasks import async_task

from approvals.agent_names import agent_names
from approvals.models import Notice, Pause, PauseRoute, PauseStatus
from approvals.pause_kinds import decision_page_for
from approvals.routing import routed_to_text

logger = logging.getLogger(__name__)

SEND_TASK = "approvals.notices.send_notice"
OPENED, ESCALATED, REMINDER, DECIDED = "opened", "escalated", "reminder", "decided"
WAITING_EVENTS = (OPENED, ESCALATED, REMINDER)  # told only while the pause waits
SUBJECTS = {
    OPENED: "Approval needed: {asked}",
    ESCALATED: "Escalated to you: {asked}",
    REMINDER: "Reminder, due {due}: {asked}",
    DECIDED: "{verdict}: {asked}",
}


NoticeListener = Callable[[Pause, str, int], None]
_LISTENERS: list[NoticeListener] = []


def register_notice_listener(listener: NoticeListener) -> None:
    """``listener(pause, event, step)`` is told each event once, in the transaction that claims it."""
    if listener not in _LISTENERS:
        _LISTENERS.append(listener)


def enabled() -> bool:
    """Whether email is sent (``HITL_EMAIL_NOTIFICATIONS``); the events are claimed and heard either way."""
    return bool(settings.HITL_EMAIL_NOTIFICATIONS)


def queue(pause: Pause, event: str, step: int = 0) -> None:
    """Send ``event`` of ``pause`` from the q-cluster: the task is written in the caller's transaction
    (django-q2's ORM broker), so it exists exactly when the pause or its decision does."""
    async_task(SEND_TASK, str(pause.id), event, step, group="hitl-notices")


def on_opened(pause: Pause) -> None:
    if (pause.routing or {}).get("notifyApprovers"):
        queue(pause, OPENED)


def on_decided(pause: Pause) -> None:
    if (pause.routing or {}).get("notifyRequester") and pause.owner_id is not None:
        queue(pause, DECIDED)


def queue_due_notices(now: datetime | None = None) -> int:
    """The timer drainer's sweep: queue every escalation step and reminder that fell due and was not sent.
    Claiming stays with ``send_notice``: a step queued twice is sent once."""
    now = now or timezone.now()
    unsent = Notice.objects.filter(pause_id=OuterRef("pause_id"), step=OuterRef("step"), event=ESCALATED)
    steps = (
        PauseRoute.objects.filter(step__gt=0, opens_at__lte=now, pause__status=PauseStatus.PENDING)
        .exclude(Exists(unsent))
        .values_list("pause_id", "step")
        .distinct()
    )
    reminded = Notice.objects.filter(pause_id=OuterRef("pk"), event=REMINDER)
    reminders = (
        Pause.objects.filter(status=PauseStatus.PENDING, remind_at__lte=now)
        .exclude(Exists(reminded))
        .values_list("pk", flat=True)
    )
    queued = 0
    for pause_id, step in list(steps[:100]):
        async_task(SEND_TASK, str(pause_id), ESCALATED, step, group="hitl-notices")
        queued += 1
    for pause_id in list(reminders[:100]):
        async_task(SEND_TASK, str(pause_id), REMINDER, 0, group="hitl-notices")
        queued += 1
    return queued


def send_notice(pause_id: str, event: str, step: int = 0) -> str:
    """Claim ``event`` of the pause and send its mail, in one transaction: "sent", "already sent",
    "nobody to tell", "not waiting" for a waiting event of a pause decided meanwhile, or "not yet" for
    an escalation step or a reminder whose time has not come."""
    pause = Pause.objects.select_related("owner").filter(pk=uuid.UUID(str(pause_id))).first()
    if pause is None:
        return "gone"
    if event in WAITING_EVENTS and pause.status != PauseStatus.PENDING:
        return "not waiting"
    if not _due(pause, event, step):
        return "not yet"
    # a step without ``notify`` is claimed and heard by the other channels, but mails nobody
    mails = enabled() and (event != ESCALATED or _step_notifies(pause, step))
    people = recipients(pause, event, step) if mails else []
    with transaction.atomic():
        try:
            with transaction.atomic():
                notice = Notice.objects.create(
                    pause=pause,
                    event=event,
                    step=step,
                    recipients=[user.get_username() for user in people],
                    claimed_at=timezone.now(),
                )
        except IntegrityError:
            return "already sent"
        _tell_listeners(pause, event, step)
        if not people:
            return "nobody to tell"
        messages = [_message(pause, event, user) for user in people]
        get_connection(fail_silently=False).send_messages(messages)  # raises: the claim rolls back
        Notice.objects.filter(pk=notice.pk).update(sent_at=timezone.now())
    return "sent"


def _tell_listeners(pause: Pause, event: str, step: int) -> None:
    for listener in _LISTENERS:
        try:
            listener(pause, event, step)
        except DatabaseError:
            raise
        except Exception:  # another channel's failure never stops the mail
            logger.exception("notice listener %s failed for pause %s", listener, pause.id)


def _due(pause: Pause, event: str, step: int) -> bool:
    """An escalation step is told once it opened, a reminder once its time came (a task delivered early,
    or a duplicate, waits for the sweep)."""
    now = timezone.now()
    if event == ESCALATED:
        return PauseRoute.objects.filter(pause=pause, step=step, opens_at__lte=now).exists()
    if event == REMINDER:
        return pause.remind_at is not None and pause.remind_at <= now
    return True


def _step_notifies(pause: Pause, step: int) -> bool:
    steps = (pause.routing or {}).get("escalation") or []
    return 0 < step <= len(steps) and steps[step - 1].get("notify", True) is not False


# --- who is told -------------------------------------------------------------------------------------


def recipients(pause: Pause, event: str, step: int = 0) -> list[Any]:
    """The accounts ``event`` is sent to, each with an email address; never the pause's requester for an
    approver's message (they never decide it alone)."""
    users = get_user_model().objects.filter(is_active=True).exclude(email="")
    if event == DECIDED:
        return list(users.filter(pk=pause.owner_id))
    requester = [pk for pk in (pause.owner_id, pause.raised_by_id) if pk is not None]
    deciders = users.filter(
        Q(is_superuser=True)
        | Q(groups__name=settings.HITL_ADMIN_GROUP)
        | Q(groups__name=settings.HITL_APPROVER_GROUP)
    ).exclude(groups__name=settings.HITL_AGENT_GROUP)
    if pause.routed:
        routes = PauseRoute.objects.filter(pause=pause)
        routes = (
            routes.filter(step=step) if event == ESCALATED else routes.filter(opens_at__lte=timezone.now())
        )
        names = list(routes.values_list("username", "group_name"))
        usernames = [user for user, _ in names if user]
        groups = [group for _, group in names if group]
        # routing narrows: a named person still needs a deciding role; an admin is told only when named
        deciders = deciders.filter(Q(username__in=usernames) | Q(groups__name__in=groups))
    else:
        deciders = deciders.filter(Q(groups__name=settings.HITL_APPROVER_GROUP))
    return list(deciders.exclude(pk__in=requester).distinct().order_by("username"))


# --- what they are told ------------------------------------------------------------------------------


def _asked(pause: Pause) -> str:
    page = decision_page_for(pause.kind)
    return page.headline(pause) if page is not None else pause.reason


def _when(value: datetime | None) -> str:
    return date_format(timezone.localtime(value), "Y-m-d H:i T") if value else "none"


def decision_link(pause: Pause) -> str:
    """The decision page: it asks the reader to sign in, and deciding takes a click there."""
    path = reverse("admin:approvals_pendingapproval_change", args=[pause.pk])
    return settings.HITL_PUBLIC_URL.rstrip("/") + path


def _message(pause: Pause, event: str, user: Any) -> EmailMessage:
    asked = _asked(pause)
    verdict = (pause.verdict or "Decided").capitalize()
    subject = "[HITL] " + SUBJECTS[event].format(asked=asked, due=_when(pause.due_at), verdict=verdict)
    return EmailMessage(
        subject=subject[:200],
        body="\n".join(_body(pause, event, asked)),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[user.email],
    )


def _body(pause: Pause, event: str, asked: str) -> list[str]:
    lines = [asked, ""]
    if pause.agent_id is not None:
        name = agent_names([pause.agent_id]).get(pause.agent_id) or str(pause.agent_id)
        lines.append(f"Agent: {name}" + (f" v{pause.agent_version}" if pause.agent_version else ""))
    elif (pause.details or {}).get("agent"):
        lines.append(f"Agent: {pause.details['agent']} (an approval request)")
    if pause.owner_id is not None:
        lines.append(f"Requested by: {pause.owner.get_username()}")
    if pause.tool_names:
        lines.append("Tools: " + ", ".join(str(name) for name in pause.tool_names))
    if event == DECIDED:
        lines.append(
            f"Decision: {pause.verdict} by {pause.decided_by or 'someone'} at {_when(pause.decided_at)}"
        )
        return [*lines, "", f"Details (sign-in required): {decision_link(pause)}"]
    lines.append(
        f"Deadline: {_when(pause.due_at)}" + (f" ({pause.timeout_policy} then)" if pause.due_at else "")
    )
    lines.append(f"Who may decide: {routed_to_text(pause)}")
    if pause.required_approvals > 1:
        lines.append(f"Approvals needed: {pause.required_approvals} different people")
    return [*lines, "", f"Decide (sign-in required): {decision_link(pause)}"]
