"""A reviewer in a real browser: find the pause in the inbox, decide it, and a stale second reviewer."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.models import AuditEntry, Pause, PauseStatus
from conversations.models import Agent, Conversation
from conversations.snapshots import snapshot
from harnesses.factories import deployed_agent, paused_conversation, store_tool_batch
from harnesses.queue_drain import run_queued_tasks
from harnesses.users import client_for, make_user
from tests.browser.conftest import WIDTHS, admin_login, at_width, save_screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

REASON = "Account deletion requires manager sign-off"


def password(username: str) -> str:
    return "pw-" + username  # what harnesses.users.make_user sets


def paused(owner) -> Pause:
    conversation_id = paused_conversation(client_for(owner), deployed_agent())
    return Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)


def other_pending_work(owner) -> Pause:
    """A few more rows, so the inbox looks like a working day: a tool call and an overdue pause."""
    now = timezone.now()
    tool_pause = paused(owner)  # a real paused conversation, its pause turned into a tool-call pause
    Pause.objects.filter(pk=tool_pause.pk).update(
        paused_at=now - timedelta(minutes=20), due_at=now + timedelta(minutes=40), approval_timeout="PT1H"
    )
    store_tool_batch(
        tool_pause,
        [
            {
                "callId": "call-1",
                "toolName": "transfer_funds",
                "source": "http",
                "arguments": {"amount": 1250, "currency": "EUR", "iban": "DE89 **** **** 3000"},
                "gateReason": "transfer_*",
                "matchedRule": "transfer_*",
                "request": {
                    "method": "POST",
                    "url": "https://payments.example/v1/transfers",
                    "headers": {"Authorization": "Basic cGF5bWVudHM6c2VjcmV0LXBhc3N3b3Jk"},
                    "body": {"amount": "{args.amount}", "currency": "{args.currency}", "iban": "{args.iban}"},
                },
            },
            {
                "callId": "call-2",
                "toolName": "send_receipt",
                "source": "builtin",
                "arguments": {"to": "a***@example.org"},
                "gateReason": "send_*",
            },
        ],
        outcome_unknown=["call-1"],
        reason="Payment over 1,000 EUR needs approval",
    )
    tool_pause.refresh_from_db()
    Pause.objects.create(
        surface="regular",
        kind="RULE",
        subject_type="conversation",
        subject_id=uuid.uuid4(),
        owner=owner,
        agent_id=uuid.uuid4(),
        agent_version=1,
        reason="Refund outside the policy window",
        timeout_policy="WAIT_INDEFINITELY",
        paused_at=now - timedelta(hours=2),
        due_at=now - timedelta(minutes=3),
    )
    return tool_pause


def open_from_inbox(page, base_url: str, pause: Pause) -> None:
    page.get_by_role("link", name="Pending approvals").first.click()
    page.wait_for_url(re.compile(r"/admin/approvals/pendingapproval/$"))
    page.locator(f'#result_list a[href$="/{pause.pk}/change/"]').click()
    page.wait_for_url(re.compile(rf"/admin/approvals/pendingapproval/{pause.pk}/change/$"))


@pytest.mark.parametrize("width", WIDTHS)
def test_a_reviewer_finds_the_pause_approves_it_with_a_note_and_the_conversation_continues(
    live_server, page, width
):
    at_width(page, width)
    alice = make_user("alice")
    reviewer = make_user("rita", "approver")
    pause = paused(alice)
    other_pending_work(alice)

    admin_login(page, live_server.url, "rita", password("rita"))
    page.get_by_role("link", name="Pending approvals").first.click()
    page.wait_for_url(re.compile(r"/admin/approvals/pendingapproval/$"))
    row = page.locator("#result_list tbody tr", has=page.locator(f'[title="{pause.subject_id}"]'))
    assert row.count() == 1
    assert REASON in row.inner_text() and "alice" in row.inner_text()
    assert "OVERDUE" in page.locator("#result_list").inner_text()
    agent_name = Agent.objects.get(pk=pause.agent_id).name
    assert f"{agent_name} v{pause.agent_version}" in row.inner_text()  # a name, not an id
    save_screenshot(page, f"admin-inbox-{width}.png")
    if width == WIDTHS[0]:
        save_screenshot(page, "admin-inbox.png", for_docs=True)

    # the reviewer finds it by the agent's name, then by the short id the list shows
    page.fill("#searchbar", agent_name)
    with page.expect_navigation():
        page.press("#searchbar", "Enter")
    listed = page.locator("#result_list").inner_text()
    assert (
        REASON in listed and "Refund outside the policy window" not in listed
    )  # that one's agent is unknown
    page.fill("#searchbar", str(pause.subject_id)[:8] + "…")
    with page.expect_navigation():
        page.press("#searchbar", "Enter")
    assert page.locator("#result_list tbody tr").count() == 1
    row = page.locator("#result_list tbody tr", has=page.locator(f'[title="{pause.subject_id}"]'))
    assert row.count() == 1

    row.locator(f'a[href*="/{pause.pk}/change/"]').click()  # the link keeps the search in its query
    page.wait_for_url(re.compile(rf"/admin/approvals/pendingapproval/{pause.pk}/change/"))
    assert page.locator("#hitl-reason").inner_text() == REASON
    assert "confirm_deletion" in page.locator("#hitl-actions").inner_text()
    assert "please delete my account" in page.locator(".hitl-turns").inner_text()
    page.fill("#id_note", "Checked with the account manager")
    save_screenshot(page, f"admin-decision-{width}.png")

    page.click("#hitl-approve")
    page.wait_for_url(re.compile(r"/admin/approvals/pendingapproval/$"))
    assert (
        f"Approved: conversation {pause.subject_id}. It has continued."
        in page.locator(".messagelist").inner_text()
    )
    assert page.locator(f'#result_list [title="{pause.subject_id}"]').count() == 0

    entry = AuditEntry.objects.get(pause_id=pause.pk, verb="hitl.approval")
    assert (entry.actor, entry.verdict, entry.note) == (
        reviewer.username,
        "APPROVED",
        "Checked with the account manager",
    )
    assert run_queued_tasks() == 0  # the reviewer's request ran the continuation: nothing was queued
    after = snapshot(Conversation.objects.get(pk=pause.subject_id))
    assert after["state"] == "READY"
    assert after["output"] == ["Deletion APPROVED."]


def test_a_second_reviewer_with_the_page_open_sees_already_decided_and_changes_nothing(live_server, new_page):
    alice = make_user("alice")
    make_user("rita", "approver")
    make_user("sam", "admin")
    pause = paused(alice)

    first, second = new_page(), new_page()
    admin_login(first, live_server.url, "rita", password("rita"))
    admin_login(second, live_server.url, "sam", password("sam"))
    open_from_inbox(first, live_server.url, pause)
    open_from_inbox(second, live_server.url, pause)  # both now look at the same PENDING pause

    first.fill("#id_note", "fine")
    first.click("#hitl-approve")
    first.wait_for_url(re.compile(r"/admin/approvals/pendingapproval/$"))

    second.fill("#id_note", "no, wait")
    second.click("#hitl-reject")
    stale = second.locator("#hitl-stale")
    stale.wait_for()
    assert re.search(
        r"Already decided \(APPROVED\) by rita at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", stale.inner_text()
    )
    assert "Nothing was changed" in stale.inner_text()
    assert second.locator("#hitl-reject").count() == 0
    save_screenshot(second, "admin-decision-stale.png")

    pause.refresh_from_db()
    assert (pause.verdict, pause.decided_by, pause.note) == ("APPROVED", "rita", "fine")
    assert AuditEntry.objects.filter(pause_id=pause.pk, verb="hitl.approval").count() == 1


def test_a_tool_call_pause_shows_each_call_and_keeps_a_bad_amendment_on_the_form(live_server, page):
    alice = make_user("alice")
    make_user("rita", "approver")
    tool_pause = other_pending_work(alice)

    admin_login(page, live_server.url, "rita", password("rita"))
    open_from_inbox(page, live_server.url, tool_pause)
    first, second = page.locator("#hitl-call-0"), page.locator("#hitl-call-1")
    assert first.locator(".hitl-pinned").inner_text() == "PINNED"
    assert second.locator(".hitl-unpinned").inner_text() == "NOT PINNED"
    assert "DE89 **** **** 3000" in first.inner_text()
    assert "gated by transfer_*" in page.locator("#hitl-details").inner_text()  # why: with the ids, below
    assert "transfer_funds" in page.locator("#hitl-outcome-unknown").inner_text()
    save_screenshot(page, "admin-decision-tool-call.png", for_docs=True)

    page.fill("#id_call_0_amended", '{"amount": 1000')
    page.select_option("#id_call_1_verdict", "REJECTED")
    page.fill("#id_note", "Only up to 1,000")
    page.click("#hitl-approve")
    page.locator("#hitl-call-controls-0 .errorlist").wait_for()
    assert (
        "the edited arguments are not valid JSON"
        in page.locator("#hitl-call-controls-0 .errorlist").inner_text()
    )
    # the page reloads at its top: the error is where the eye is, and links to the field
    summary = page.locator("#hitl-error-summary")
    assert "the edited arguments are not valid JSON" in summary.inner_text()
    box = summary.bounding_box()
    assert box is not None and box["y"] + box["height"] <= page.viewport_size["height"], box
    href = summary.locator("a").first.get_attribute("href")
    assert page.locator(href).count() == 1, href
    assert page.input_value("#id_call_0_amended") == '{"amount": 1000'
    assert page.input_value("#id_note") == "Only up to 1,000"
    save_screenshot(page, "admin-decision-tool-call-error.png")
    assert Pause.objects.get(pk=tool_pause.pk).status == PauseStatus.PENDING

    page.fill("#id_call_0_amended", '{"amount": 1000, "currency": "EUR", "iban": "DE89 **** **** 3000"}')
    page.click("#hitl-approve")
    page.wait_for_url(re.compile(r"/admin/approvals/pendingapproval/$"))
    tool_pause.refresh_from_db()
    assert tool_pause.decision_details["toolDecisions"]["call-2"] == {"verdict": "REJECTED"}
    assert tool_pause.decision_details["toolDecisions"]["call-1"]["verdict"] == "APPROVED"
