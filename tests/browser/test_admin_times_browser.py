"""The page script keeps the inbox's times current: it says what the server says
(approvals.admin.times), and a deadline that passes while the page is open turns overdue, no reload."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from approvals.admin.times import relative_text
from approvals.models import Pause, PauseStatus
from harnesses.factories import deployed_agent, paused_conversation
from harnesses.users import client_for, make_user
from tests.approvals.test_admin_times import CASES, NOW
from tests.browser.conftest import WIDTHS, admin_login, at_width, save_screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def decision_page(page, base_url: str, due_in: timedelta) -> Pause:
    owner = make_user("alice")
    make_user("rita", "approver")
    conversation_id = paused_conversation(client_for(owner), deployed_agent())
    pause = Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)
    Pause.objects.filter(pk=pause.pk).update(due_at=timezone.now() + due_in)
    admin_login(page, base_url, "rita", "pw-rita")
    page.goto(f"{base_url}/admin/approvals/pendingapproval/{pause.pk}/change/")
    return pause


def test_the_script_formats_every_case_as_the_server_does(live_server, page):
    decision_page(page, live_server.url, timedelta(hours=1))
    for offset, deadline, expected in CASES:
        when, now = NOW + offset, NOW
        said = page.evaluate(
            "([when, now, deadline]) => window.hitlTimes.relativeText(Date.parse(when), Date.parse(now), deadline)",
            [when.isoformat(), now.isoformat(), deadline],
        )
        assert said == expected == relative_text(when, now, deadline=deadline)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_deadline_passing_while_the_page_is_open_turns_overdue_without_a_reload(live_server, page, width):
    at_width(page, width)
    page.clock.install(time=datetime.now(UTC))
    decision_page(page, live_server.url, timedelta(minutes=1, seconds=30))
    deadline = page.locator("#hitl-deadline time")
    assert deadline.inner_text().startswith("in ")
    assert deadline.get_attribute("title")  # the absolute time on hover

    page.clock.fast_forward("03:00")  # the page's 15 s timer fires; nothing is reloaded

    assert deadline.inner_text() == "overdue by 1 min"
    assert "hitl-overdue" in (deadline.get_attribute("class") or "")
    save_screenshot(page, f"decision-deadline-overdue-{width}.png")
