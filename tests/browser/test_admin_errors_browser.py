"""In a real browser: a non-staff user told she has no reviewer access, and the index's pending count."""

from __future__ import annotations

import uuid

import pytest
from django.utils import timezone

from approvals.models import Pause
from harnesses.users import make_user
from tests.browser.conftest import WIDTHS, admin_login, at_width, save_screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def pending(owner, count: int) -> None:
    Pause.objects.bulk_create(
        Pause(
            surface="regular",
            kind="RULE",
            subject_type="conversation",
            subject_id=uuid.uuid4(),
            reason="needs a look",
            owner=owner,
            paused_at=timezone.now(),
        )
        for _ in range(count)
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_a_non_staff_user_is_told_she_has_no_reviewer_access(live_server, page, width):
    at_width(page, width)
    make_user("alice")  # right password, no staff flag
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "pw-alice")
    page.click("input[type=submit]")
    note = page.locator(".errornote")
    note.wait_for()
    assert "You signed in as alice, but this account has no reviewer access" in note.inner_text()
    assert "correct username and password" not in page.content()
    save_screenshot(page, f"admin-login-no-reviewer-access-{width}.png")

    page.fill("#id_username", "alice")
    page.fill("#id_password", "not-her-password")
    page.click("input[type=submit]")
    page.locator(".errornote").wait_for()
    assert "correct username and password" in page.locator(".errornote").inner_text()
    assert "reviewer access" not in page.content()


@pytest.mark.parametrize("width", WIDTHS)
def test_the_index_shows_the_reviewers_pending_count(live_server, page, width):
    at_width(page, width)
    carol = make_user("carol", "staff")
    approver = make_user("reviewer", "approver")
    pending(carol, 2)
    pending(make_user("dave", "staff"), 3)
    admin_login(page, live_server.url, approver.username, "pw-reviewer")
    entry = page.locator("#content-main a[href='/admin/approvals/pendingapproval/']").first
    assert entry.inner_text().strip() == "Pending approvals (5)"
    assert page.locator("#content-main a[href='/admin/django_q/schedule/add/']").count() == 0
    save_screenshot(page, f"admin-index-pending-count-{width}.png")

    carols = page.context.browser.new_context(viewport={"width": 1280, "height": 800})
    carols.set_default_timeout(15_000)
    try:
        mine = carols.new_page()
        admin_login(mine, live_server.url, carol.username, "pw-carol")
        own = mine.locator("#content-main a[href='/admin/approvals/pendingapproval/']").first
        assert own.inner_text().strip() == "Pending approvals (2)"
    finally:
        carols.close()
