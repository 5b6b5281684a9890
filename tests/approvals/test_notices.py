"""Email about pauses: a new routed pause to its approvers, an escalation step, a reminder, a decision to
the requester; each event sent once, even by two senders at once; through Django's email framework
(``mail.outbox``) and through a live SMTP server on loopback (aiosmtpd)."""

from __future__ import annotations

import socket
import threading
from datetime import timedelta

import pytest
import time_machine
from aiosmtpd.controller import Controller
from django.contrib.auth.models import Group
from django.core import mail
from django.db import close_old_connections
from django.utils import timezone

from approvals.models import Notice, Pause
from approvals.notices import OPENED, queue_due_notices, send_notice
from harnesses.queue_drain import run_queued_tasks
from harnesses.users import make_user
from tests.approvals.test_routing import resume, routed_pause

FINANCE = {"approvers": {"groups": ["finance"]}}


def person(username: str, *groups: str, role: str = "approver"):
    user = make_user(username, role)
    user.email = f"{username}@example.org"
    user.save(update_fields=["email"])
    for name in groups:
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    return user


def sent_to() -> list[list[str]]:
    return [message.to for message in mail.outbox]


@pytest.mark.django_db
def test_a_routed_pause_emails_its_approvers_what_is_asked_and_a_link_never_the_turns(alice):
    person("fred", "finance")
    person("olga")  # an approver not named: not told
    pause = routed_pause(alice, **FINANCE)
    run_queued_tasks()

    assert sent_to() == [["fred@example.org"]]
    (message,) = mail.outbox
    assert message.subject.startswith("[HITL] Approval needed: ")
    assert f"/admin/approvals/pendingapproval/{pause.pk}/change/" in message.body
    assert "Who may decide: group finance" in message.body and "Requested by: alice" in message.body
    assert "please delete my account" not in message.body  # what the requester said stays on the server
    assert Notice.objects.get(pause=pause, event=OPENED).recipients == ["fred"]


@pytest.mark.django_db
def test_an_unrouted_pause_emails_nobody_unless_asked(alice):
    person("fred")
    routed_pause(alice)
    run_queued_tasks()
    assert mail.outbox == []
    routed_pause(make_user("carol"), notifyApprovers=True)
    run_queued_tasks()
    assert sent_to() == [["fred@example.org"]]


@pytest.mark.django_db
def test_an_escalation_step_and_a_reminder_are_sent_once_when_due(alice):
    person("fred", "finance")
    person("oscar", "on-call")
    pause = routed_pause(
        alice,
        **FINANCE,
        timeoutPolicy="AUTO_REJECT",
        approvalTimeout="PT30M",
        remindBefore="PT10M",
        escalation=[{"after": "PT15M", "approvers": {"groups": ["on-call"]}, "notify": True}],
    )
    run_queued_tasks()
    mail.outbox.clear()
    assert queue_due_notices() == 0

    with time_machine.travel(timezone.now() + timedelta(minutes=16), tick=False):
        assert queue_due_notices() == 1
        run_queued_tasks()
        assert sent_to() == [["oscar@example.org"]]
        assert mail.outbox[0].subject.startswith("[HITL] Escalated to you: ")
    with time_machine.travel(timezone.now() + timedelta(minutes=21), tick=False):
        queue_due_notices()
        run_queued_tasks()
        assert sorted(sent_to()[1:]) == [["fred@example.org"], ["oscar@example.org"]]
        assert "Reminder" in mail.outbox[1].subject
        assert queue_due_notices() == 0  # each event once
    assert Pause.objects.get(pk=pause.pk).remind_at == pause.due_at - timedelta(minutes=10)


@pytest.mark.django_db
def test_the_requester_is_told_the_decision_when_the_agent_asks(alice, approver):
    alice.email = "alice@example.org"
    alice.save(update_fields=["email"])
    pause = routed_pause(alice, notifyRequester=True)
    assert resume(approver, pause, "REJECTED", note="not today").status_code == 200
    run_queued_tasks()
    assert sent_to() == [["alice@example.org"]]
    assert mail.outbox[0].subject.startswith("[HITL] Rejected: ")
    assert "Decision: REJECTED by approver" in mail.outbox[0].body


@pytest.mark.django_db
def test_a_decided_pause_is_no_longer_escalated(alice):
    person("fred", "finance")
    pause = routed_pause(
        alice, **FINANCE, escalation=[{"after": "PT15M", "approvers": {"users": ["fred"]}, "notify": True}]
    )
    run_queued_tasks()
    mail.outbox.clear()
    assert send_notice(str(pause.pk), "escalated", 1) == "not yet"  # delivered early: the sweep sends it
    resume(make_user("admin2", "admin"), pause)
    with time_machine.travel(timezone.now() + timedelta(minutes=16), tick=False):
        assert queue_due_notices() == 0
        assert send_notice(str(pause.pk), "escalated", 1) == "not waiting"
    assert mail.outbox == [] and not Notice.objects.filter(pause=pause, event="escalated").exists()


@pytest.mark.django_db(transaction=True)
def test_two_senders_of_one_event_send_it_once():
    fred = person("fred", "finance")
    pause = routed_pause(make_user("alice"), **FINANCE, notifyApprovers=False)
    Notice.objects.all().delete()
    start = threading.Barrier(2)
    results: list[str] = []

    def send() -> None:
        try:
            start.wait()
            results.append(send_notice(str(pause.pk), OPENED, 0))
        finally:
            close_old_connections()

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(results) == ["already sent", "sent"]
    assert sent_to() == [[fred.email]]


class Collected:
    def __init__(self) -> None:
        self.messages: list[tuple[str, list[str], str]] = []

    async def handle_DATA(self, server, session, envelope) -> str:  # noqa: N802  (aiosmtpd's name)
        self.messages.append((envelope.mail_from, envelope.rcpt_tos, envelope.content.decode()))
        return "250 OK"


@pytest.mark.django_db
def test_a_notice_goes_out_through_a_live_smtp_server(alice, settings):
    handler = Collected()
    with socket.socket() as probe:  # a free port on loopback
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = Controller(handler, hostname="127.0.0.1", port=port)
    server.start()
    try:
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
        person("fred", "finance")
        pause = routed_pause(alice, **FINANCE)
        run_queued_tasks()
    finally:
        server.stop()
    ((sender, recipients, content),) = handler.messages
    assert recipients == ["fred@example.org"] and "hitl@localhost" in sender
    assert f"/admin/approvals/pendingapproval/{pause.pk}/change/" in content
    assert Notice.objects.get(pause=pause).sent_at is not None
