"""In a real browser, at 1280 and 1920 px: the decision page says what each button does and what the
requester asked, a reviewer replies with guidance and cancels a request behind a
confirmation, and bulk confirmation rows tell their pauses apart."""

from __future__ import annotations

import re

import pytest

from approvals.decision_input import GUIDANCE_REQUIRED
from approvals.models import Pause, PauseStatus
from harnesses.factories import say, start
from harnesses.users import client_for, make_user
from tests.approvals.test_admin_outlook import notifying_agent
from tests.browser.conftest import admin_login, save_screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = (1280, 1920)
INBOX = "/admin/approvals/pendingapproval/"


def paused(owner, agent_id: str, text: str = "please delete my account") -> Pause:
    client = client_for(owner)
    conversation_id = start(client, agent_id)
    assert say(client, conversation_id, text).json()["state"] == "AWAITING_HUMAN"
    return Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)


def reviewer_on(page, base_url: str, width: int) -> None:
    make_user("rita", "approver")
    page.set_viewport_size({"width": width, "height": 900})
    admin_login(page, base_url, "rita", "pw-rita")


@pytest.mark.parametrize("width", WIDTHS)
def test_the_page_says_what_approve_and_reject_do_and_what_was_asked(live_server, page, width):
    pause = paused(make_user("alice"), notifying_agent(), "please delete my account, I moved away")
    reviewer_on(page, live_server.url, width)
    page.goto(f"{live_server.url}{INBOX}{pause.pk}/change/")
    asked = page.locator("#hitl-requester-input")
    assert asked.is_visible() and "please delete my account, I moved away" in asked.inner_text()
    assert asked.bounding_box()["y"] < page.locator("#hitl-details").bounding_box()["y"]
    assert page.locator("#hitl-outlook-approve").inner_text() == (
        "Approve: the turn goes on: it calls call_confirm_deletion (POST /notify), then sends the reply "
        "written for confirm_deletion."
    )
    assert page.locator("#hitl-outlook-reject").inner_text().startswith("Reject: none of that runs")
    assert (
        page.locator("#hitl-outlook-guidance").is_visible()
        and page.locator("#hitl-outlook-cancel").is_visible()
    )
    save_screenshot(page, f"decision-outlook-{width}.png", for_docs=width == 1280)


@pytest.mark.parametrize("width", WIDTHS)
def test_reply_with_guidance_and_cancel_with_confirmation(live_server, page, width):
    alice = make_user("alice")
    agent_id = notifying_agent()
    first, second = paused(alice, agent_id), paused(alice, agent_id)
    reviewer_on(page, live_server.url, width)

    page.goto(f"{live_server.url}{INBOX}{first.pk}/change/")
    page.click("#hitl-reply-guidance")  # empty: refused, nothing decided
    assert GUIDANCE_REQUIRED in page.locator("#hitl-guidance-error").inner_text()
    first.refresh_from_db()
    assert first.status == PauseStatus.PENDING
    page.fill("#hitl-guidance", "Ask for the account number first.")
    page.click("#hitl-reply-guidance")
    page.wait_for_url(re.compile(rf"{INBOX}$"))
    assert "Replied with guidance" in page.locator(".messagelist").inner_text()
    first.refresh_from_db()
    assert (first.verdict, first.decision_details) == ("REJECTED", {"guidance": True})

    page.goto(f"{live_server.url}{INBOX}{second.pk}/change/")
    page.click("#hitl-cancel-request")
    question = page.locator("#hitl-cancel-question")
    assert "Cancel this request?" in question.inner_text()
    second.refresh_from_db()
    assert second.status == PauseStatus.PENDING  # asked, not yet done
    save_screenshot(page, f"decision-respond-{width}.png")
    page.click("#hitl-cancel-confirm")
    page.wait_for_url(re.compile(rf"{INBOX}$"))
    assert "Cancelled the request" in page.locator(".messagelist").inner_text()
    second.refresh_from_db()
    assert (second.status, second.decided_by) == ("CANCELLED", "rita")


@pytest.mark.parametrize("width", WIDTHS)
def test_bulk_confirmation_rows_show_who_asked_what_of_which_agent(live_server, page, width):
    agent_id = notifying_agent()
    ann, ben = make_user("ann"), make_user("ben")
    pauses = [
        paused(ann, agent_id, "delete my account, ann here"),
        paused(ben, agent_id, "delete my account now"),
    ]
    reviewer_on(page, live_server.url, width)
    page.goto(f"{live_server.url}{INBOX}")
    for pause in pauses:
        page.check(f'input.action-select[value="{pause.pk}"]')
    page.select_option("select[name=action]", "approve_selected")
    with page.expect_navigation():  # the confirmation page answers the same address
        page.click("button[name=index]")
    rows = page.locator("#hitl-bulk-to-decide tbody tr")
    assert rows.count() == 2
    texts = [rows.nth(i).inner_text() for i in range(2)]
    assert "ann" in texts[0] and "delete my account, ann here" in texts[0] and "account-bot v1" in texts[0]
    assert "ben" in texts[1] and "delete my account now" in texts[1] and "same as above" in texts[1]
    save_screenshot(page, f"bulk-confirm-{width}.png")
