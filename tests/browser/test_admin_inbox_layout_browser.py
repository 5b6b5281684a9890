"""The inbox list in a real browser: the deadline stays in view from a wide screen down to a tablet, each
row says what is asked (the reason on two lines, whole on hover, expanded on click; a tool call's calls;
who asked and the agent), times are live and a
row turns overdue while the page is open, and a new pause is announced without the reviewer reloading."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from approvals.models import Pause
from conversations.models import Agent
from harnesses.users import make_user
from tests.browser.conftest import admin_login, save_screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.long]

INBOX = "/admin/approvals/pendingapproval/"
WIDTHS = (1280, 1440, 1920, 820)  # 820: a tablet held upright
LONG_REASON = (
    "Refund of 1,250 EUR is outside the 30-day policy window and the customer asked twice; the agent "
    "wants to issue it anyway because the order was damaged in transit, photos attached by the customer"
)


def pending(owner, *, reason: str, due_in: timedelta | None, **fields) -> Pause:
    now = timezone.now()
    defaults = {
        "surface": "regular",
        "kind": "RULE",
        "subject_type": "conversation",
        "timeout_policy": "AUTO_REJECT" if due_in else "WAIT_INDEFINITELY",
        "agent_version": 3,
        "paused_at": now - timedelta(minutes=30),
    }
    return Pause.objects.create(
        **{**defaults, **fields},
        subject_id=uuid.uuid4(),
        owner=owner,
        reason=reason,
        due_at=now + due_in if due_in is not None else None,
    )


def working_day():
    """An approver's inbox: a long reason, an overdue pause, a tool call, one without a deadline."""
    owner = make_user("carol")
    make_user("rita", "approver")
    agent = Agent.objects.create(name="account-bot").pk
    pending(owner, reason=LONG_REASON, due_in=timedelta(minutes=14), agent_id=agent)
    pending(
        owner,
        reason="Account deletion requires manager sign-off",
        due_in=-timedelta(minutes=5),
        agent_id=agent,
    )
    pending(
        owner,
        reason="Payment over 1,000 EUR needs approval",
        due_in=timedelta(hours=2),
        kind="TOOL_CALL",
        tool_names=["transfer_funds", "send_receipt"],
        agent_id=agent,
    )
    pending(owner, reason="Refund outside the policy window", due_in=None, agent_id=agent)


def open_inbox(page, base_url: str, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    admin_login(page, base_url, "rita", "pw-rita")
    page.goto(f"{base_url}{INBOX}")


def cut_off(page, selector: str) -> list[str]:
    """The cells matching ``selector`` not wholly shown: outside the viewport's width, or past the edge of
    the list's own scrolling box (Django's ``.results``, which hides what overflows it)."""
    width = page.viewport_size["width"]
    shown = page.locator("#changelist-form .results").bounding_box()
    left, right = max(0, shown["x"]), min(width, shown["x"] + shown["width"])
    cut = []
    for cell in page.locator(selector).all():
        box = cell.bounding_box()
        assert box is not None, f"{selector} is not displayed"
        if box["x"] < left - 0.5 or box["x"] + box["width"] > right + 0.5:
            cut.append(
                f"{selector}: {box['x']:.0f}–{box['x'] + box['width']:.0f}, shown {left:.0f}–{right:.0f}"
            )
    return cut


@pytest.mark.parametrize("width", WIDTHS)
def test_the_deadline_stays_in_view_and_each_row_says_what_is_asked(live_server, page, width):
    working_day()
    open_inbox(page, live_server.url, width)

    assert page.locator("#result_list tbody tr").count() == 4
    assert cut_off(page, "#result_list td.field-deadline") == []
    if width >= 1400:  # the policy's column; narrower, the decision page says it
        assert cut_off(page, "#result_list td.field-on_timeout") == []
    reason = page.locator(".hitl-reason", has_text="Refund of 1,250 EUR")
    lines = reason.evaluate(
        "node => { const s = getComputedStyle(node); const line = parseFloat(s.lineHeight) || "
        "1.2 * parseFloat(s.fontSize); return node.getBoundingClientRect().height / line; }"
    )
    assert 1.5 <= lines <= 2.6, f"the reason is {lines:.1f} lines high at {width} px"  # two lines, then cut
    assert reason.get_attribute("title") == LONG_REASON  # the whole text on hover
    # names, not ids, at every width: in their own columns, or under the reason where those are dropped
    row = page.locator("#result_list tbody tr", has_text="Refund of 1,250 EUR")
    for name in ("carol", "account-bot v3"):
        shown = [cell for cell in row.locator("td").all() if cell.is_visible() and name in cell.inner_text()]
        assert shown, f"{name} is not shown at {width} px"
    # a tool call says which tools it would run, on the row itself
    calls = page.locator("#result_list tbody tr", has_text="Payment over").locator(".hitl-reason-calls")
    assert calls.is_visible() and calls.inner_text() == "transfer_funds, send_receipt"
    save_screenshot(page, f"inbox-list-{width}.png", for_docs=width == 1280)

    reason.click()  # expanded in place, and back
    assert reason.get_attribute("aria-expanded") == "true"
    assert (
        reason.bounding_box()["height"] > reason.evaluate("n => parseFloat(getComputedStyle(n).fontSize)") * 2
    )
    reason.press("Enter")
    assert reason.get_attribute("aria-expanded") == "false"


@pytest.mark.parametrize("width", (1280, 1920))
def test_times_use_the_shared_format_and_the_overdue_row_is_marked(live_server, page, width):
    working_day()
    open_inbox(page, live_server.url, width)
    overdue = page.locator("#result_list tbody tr", has_text="Account deletion")
    assert " ".join(overdue.locator("td.field-deadline").inner_text().split()) == "OVERDUE overdue by 5 min"
    assert "hitl-overdue-row" in (overdue.get_attribute("class") or "")
    deadline = page.locator("#result_list tbody tr", has_text="Payment over").locator(
        "td.field-deadline time"
    )
    assert deadline.inner_text() == "in 1 h 59 min"
    assert deadline.get_attribute("title").endswith("UTC")  # the absolute time on hover
    save_screenshot(page, f"inbox-list-times-{width}.png")


def test_a_row_turns_overdue_while_the_list_is_open(live_server, page):
    page.clock.install(time=datetime.now(UTC))
    owner = make_user("carol")
    make_user("rita", "approver")
    pending(owner, reason="Due in a minute and a half", due_in=timedelta(minutes=1, seconds=30))
    open_inbox(page, live_server.url, 1280)
    row = page.locator("#result_list tbody tr", has_text="Due in a minute")
    assert row.locator("td.field-deadline").inner_text().startswith("in 1 min")
    assert not row.locator(".hitl-overdue-word").is_visible()

    page.clock.fast_forward("03:00")  # the times script's 15 s timer; no reload

    assert row.locator("td.field-deadline time").inner_text() == "overdue by 1 min"
    assert "hitl-overdue-row" in (row.get_attribute("class") or "")
    assert row.locator(".hitl-overdue-word").is_visible()


@pytest.mark.parametrize("width", (1280, 1920))
def test_a_new_pause_is_announced_without_a_reload(live_server, page, width):
    page.clock.install(time=datetime.now(UTC))
    owner = make_user("carol")
    make_user("rita", "approver")
    pending(owner, reason="Already waiting", due_in=timedelta(hours=1))
    open_inbox(page, live_server.url, width)
    banner = page.locator("#hitl-inbox-updates")
    assert banner.is_hidden()
    page.evaluate("window.__sameDocument = true")  # gone if the page reloaded

    pending(
        owner, reason="Arrived while the list was open", due_in=timedelta(hours=1), paused_at=timezone.now()
    )
    page.clock.fast_forward("00:20")  # the next poll

    banner.wait_for(state="visible")
    assert banner.inner_text() == "1 new pause waiting \u2014 Show"
    assert page.evaluate("window.__sameDocument") is True
    save_screenshot(page, f"inbox-new-work-{width}.png")
    page.click("#hitl-inbox-updates a")
    page.locator("#result_list tbody tr", has_text="Arrived while the list was open").wait_for()
