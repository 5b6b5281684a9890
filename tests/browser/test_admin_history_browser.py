"""A reviewer finds yesterday's decision in "Decided approvals", at 1280 and 1920 px:
decided by me first, with its verdict and note, and every pause of the conversation from its decision page."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.models import Pause, PauseStatus
from harnesses.factories import deployed_agent, paused_conversation
from harnesses.users import client_for, make_user
from tests.browser.conftest import admin_login, save_screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = (1280, 1920)
NOTE = "Checked with the account manager by phone"


@pytest.mark.parametrize("width", WIDTHS)
def test_a_reviewer_finds_their_decision_and_the_conversations_history(live_server, page, width):
    page.set_viewport_size({"width": width, "height": 900})
    owner = make_user("alice")
    make_user("rita", "approver")
    agent_id = deployed_agent()
    conversation_id = paused_conversation(client_for(owner), agent_id)
    pause = Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)
    other = Pause.objects.get(subject_id=paused_conversation(client_for(owner), agent_id))
    client_for(make_user("boss", "admin")).post(
        f"/agents/{other.subject_id}/resume", {"verdict": "REJECTED", "note": "not mine"}, format="json"
    )  # someone else's decision: not under "decided by me"
    base = live_server.url

    admin_login(page, base, "rita", "pw-rita")
    page.goto(f"{base}/admin/approvals/pendingapproval/{pause.pk}/change/")
    page.fill("#id_note", NOTE)
    page.click("#hitl-approve")
    page.wait_for_url(f"{base}/admin/approvals/pendingapproval/")

    page.goto(f"{base}/admin/")
    page.click("text=Decided approvals")
    page.wait_for_url(f"{base}/admin/approvals/decidedapproval/")
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 1  # decided by me, the default: not the admin's rejection
    row = rows.first
    assert row.locator("td.field-verdict_shown .hitl-verdict").inner_text() == "APPROVED"
    assert row.locator("td.field-verdict_shown .hitl-actor-kind").inner_text() == "person"
    assert row.locator("td.field-decided .hitl-decided-by").inner_text() == "by rita"
    assert row.locator("td.field-decided time.hitl-time").inner_text().endswith("ago")
    assert row.locator("td.field-note_line .hitl-clamp").get_attribute("title") == NOTE
    save_screenshot(page, f"history-{width}.png", for_docs=width == 1280)
    # the whole row is in view beside both sidebars (no sideways scrolling), two lines at most
    results = page.locator(".results")
    assert results.evaluate("box => box.scrollWidth <= box.clientWidth"), "the list scrolls sideways"
    assert row.evaluate("tr => tr.getBoundingClientRect().height") < 60

    row.locator("a.hitl-history-open").click()  # the row opens the decision page, with its outcome
    page.wait_for_url(f"{base}/admin/approvals/pendingapproval/{pause.pk}/change/")
    assert "APPROVED by rita" in page.locator("#hitl-deadline").inner_text()
    with page.expect_navigation():
        page.click("#hitl-subject-history")
    assert page.locator("#result_list tbody tr").count() == 1
    assert str(conversation_id)[:8] in page.locator("#result_list").inner_text()
    save_screenshot(page, f"history-conversation-{width}.png")

    # the widest row we make still fits: a group discussion timed out days ago, long reason and note
    long_ago = timezone.now() - timedelta(days=3, hours=4)
    Pause.objects.create(
        surface="group",
        kind="PHASE",
        subject_type="discussion",
        subject_id=uuid.uuid4(),
        owner=owner,
        group_id=uuid.uuid4(),
        agent_id=uuid.UUID(agent_id),
        agent_version=12,
        status=PauseStatus.RESOLVED,
        reason="Publishing the quarterly numbers needs the finance lead's sign-off " * 3,
        paused_at=long_ago,
        verdict="REJECTED",
        note="No reviewer decided in time; rejected by the timeout policy " * 3,
        decided_by="system:timeout",
        automated=True,
        decided_at=long_ago + timedelta(minutes=15),
    )
    page.goto(f"{base}/admin/approvals/decidedapproval/?decided_by=all")
    assert page.locator("#result_list tbody tr").count() == 3
    assert page.locator(".hitl-actor-automated").inner_text() == "automated"
    assert page.locator(".results").evaluate("box => box.scrollWidth <= box.clientWidth")
    save_screenshot(page, f"history-everyone-{width}.png")
