"""The decision page's time rows: a pause that no longer waits says what became of it
and when, never "no deadline" beside a policy that had one; a policy that never fires shows no duration."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from approvals.models import Pause, PauseStatus
from approvals.timers import fire_due_batch
from harnesses.factories import account_bot, deployed_agent, paused_conversation
from harnesses.users import client_for, make_user

pytestmark = pytest.mark.django_db

INBOX = "/admin/approvals/pendingapproval/"


def reviewer() -> Client:
    client = Client()
    client.force_login(make_user("approver", "approver"))
    return client


def paused(hitl_config: dict) -> Pause:
    owner = make_user("alice")
    agent = deployed_agent(account_bot(hitlConfig=hitl_config))
    conversation_id = paused_conversation(client_for(owner), agent)
    return Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)


def rows(client: Client, pause: Pause) -> tuple[str, str]:
    response = client.get(f"{INBOX}{pause.pk}/change/")
    assert response.status_code == 200, response.content[:300]
    html = response.content.decode()

    def cell(cell_id: str) -> str:
        start = html.index(f'id="{cell_id}">') + len(f'id="{cell_id}">')
        return " ".join(html[start : html.index("</td>", start)].split())

    return cell("hitl-deadline"), cell("hitl-on-timeout")


def test_a_pending_pause_shows_its_deadline_and_its_policy_with_the_duration():
    pause = paused({"timeoutPolicy": "AUTO_REJECT", "approvalTimeout": "PT15M", "allowSelfApproval": True})

    deadline, on_timeout = rows(reviewer(), pause)

    assert re.search(r'data-deadline="1">in 1[45] min</time>', deadline) and "waits" not in deadline
    assert on_timeout == "AUTO_REJECT after PT15M"


def test_a_decided_pause_says_who_decided_and_when_not_that_it_has_no_deadline():
    pause = paused({"timeoutPolicy": "AUTO_REJECT", "approvalTimeout": "PT15M", "allowSelfApproval": True})
    client_for(make_user("boss", "approver")).post(
        f"/agents/{pause.subject_id}/resume?wait=5", {"verdict": "APPROVED"}, format="json"
    )

    deadline, on_timeout = rows(reviewer(), pause)

    assert deadline.startswith("decided at ") and deadline.endswith(": APPROVED by boss")
    assert "none" not in deadline and on_timeout == "AUTO_REJECT after PT15M"


def test_a_timed_out_pause_says_its_policy_decided_it():
    pause = paused({"timeoutPolicy": "AUTO_REJECT", "approvalTimeout": "PT15M", "allowSelfApproval": True})
    fire_due_batch(now=timezone.now() + timedelta(minutes=16))

    deadline, _ = rows(reviewer(), pause)

    assert deadline.startswith("timed out at ") and deadline.endswith("REJECTED by its policy (AUTO_REJECT)")


def test_a_policy_that_never_fires_shows_no_duration():
    pause = paused(
        {"timeoutPolicy": "WAIT_INDEFINITELY", "approvalTimeout": "PT15M", "allowSelfApproval": True}
    )

    deadline, on_timeout = rows(reviewer(), pause)

    assert deadline == "none: it waits until someone decides"
    assert on_timeout == "waits until someone decides (WAIT_INDEFINITELY)" and "PT15M" not in on_timeout
