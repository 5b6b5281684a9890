"""In a real browser at 1280 and 1920 px: someone else's pause is the admin's
own styled 404 with a way back, and the audit list says "automated" or "person" in a neutral badge."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.models import AuditEntry, Pause, PauseStatus
from approvals.timers import fire_due_batch
from harnesses.factories import account_bot, deployed_agent, paused_conversation
from harnesses.users import client_for, make_user
from tests.browser.conftest import WIDTHS, admin_login, at_width, save_screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def pause_of(owner, hitl_config: dict | None = None) -> Pause:
    agent = deployed_agent(account_bot(hitlConfig=hitl_config) if hitl_config else None)
    return Pause.objects.get(
        subject_id=paused_conversation(client_for(owner), agent), status=PauseStatus.PENDING
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_someone_elses_pause_is_a_styled_admin_404_with_a_way_back(live_server, page, width):
    at_width(page, width)
    carol = make_user("carol", "staff")  # staff without a role: decides only her own conversations' pauses
    foreign = pause_of(make_user("dave"))
    admin_login(page, live_server.url, carol.username, "pw-carol")

    response = page.goto(f"{live_server.url}/admin/approvals/pendingapproval/{foreign.pk}/change/")

    assert response.status == 404
    assert "not one you may decide" in page.locator("#hitl-not-found").inner_text()
    assert page.locator("#header").is_visible()  # the admin's own page, not a bare "Not Found"
    save_screenshot(page, f"not-found-{width}.png")
    page.get_by_role("link", name="Back to pending approvals").click()
    page.wait_for_url(f"{live_server.url}/admin/approvals/pendingapproval/")
    assert Pause.objects.get(pk=foreign.pk).status == PauseStatus.PENDING


@pytest.mark.parametrize("width", WIDTHS)
def test_the_audit_list_marks_a_timeout_automated_and_a_reviewer_person_in_neutral_badges(
    live_server, page, width
):
    at_width(page, width)
    alice, boss = make_user("alice"), make_user("boss", "approver")
    config = {"timeoutPolicy": "AUTO_REJECT", "approvalTimeout": "PT15M", "allowSelfApproval": True}
    timed_out, decided = pause_of(alice, config), pause_of(alice, config)
    client_for(boss).post(
        f"/agents/{decided.subject_id}/resume?wait=5", {"verdict": "APPROVED"}, format="json"
    )
    fire_due_batch(now=timezone.now() + timedelta(minutes=16))  # time travel: only the other one still waits
    assert AuditEntry.objects.filter(pause_id=timed_out.pk, automated=True).exists()

    admin_login(page, live_server.url, "boss", "pw-boss")
    page.goto(f"{live_server.url}/admin/approvals/auditentry/?verb=hitl.approval")
    badges = page.locator("#result_list td.field-automated_badge")
    words = sorted(" ".join(badges.nth(i).inner_text().split()) for i in range(badges.count()))
    assert words == ["automated", "person"]
    for i in range(badges.count()):  # neutral: no red, no cross that reads as "failed"
        html = badges.nth(i).inner_html()
        assert "icon-no" not in html and "✖" not in html and "#ba2121" not in html.lower()
    save_screenshot(page, f"audit-badges-{width}.png")
