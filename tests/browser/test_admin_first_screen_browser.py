"""The decision fits the first screen: at 1280×800 and 1920×1080, for a rule pause, a pause with one tool
call and a group phase, the reviewer sees what is asked, every argument of the call (each on its own line,
in the model's order), what each answer does, and the buttons, without scrolling; ids, times and the
turns or the transcript come after."""

from __future__ import annotations

import json
from typing import Any

import pytest

from approvals.models import Pause, PauseStatus, SubjectType
from harnesses.factories import store_tool_batch
from harnesses.members import answering, discuss, group
from harnesses.users import client_for, make_user
from tests.browser.conftest import admin_login, save_screenshot
from tests.browser.test_admin_inbox_browser import password, paused

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.long]

SCREENS = [(1280, 800), (1920, 1080)]
ARGUMENTS = {  # the model's order, which is not sorted
    "amount": 2500,
    "currency": "EUR",
    "to_iban": "DE89 3704 0044 0532 0130 00",
    "reference": "Invoice 2026-114, second instalment",
    "execute_on": "2026-12-07",
}


def one_call_pause(owner: Any) -> Pause:
    pause = paused(owner)
    store_tool_batch(
        pause,
        [
            {
                "callId": "call-1",
                "toolName": "transfer_funds",
                "source": "http",
                "arguments": ARGUMENTS,
                "gateReason": "transfer_*",
                "matchedRule": "transfer_*",
                "request": {
                    "method": "POST",
                    "url": "https://payments.example/v1/transfers",
                    "headers": {"Content-Type": "application/json"},
                    "body": {"amount": "{args.amount}", "iban": "{args.to_iban}"},
                },
            }
        ],
        reason="Money leaves the account: a transfer over 1,000 EUR",
    )
    pause.refresh_from_db()
    return pause


def on_first_screen(page: Any, selector: str) -> None:
    """``selector``'s element lies wholly inside the viewport of the page as it opened (not scrolled)."""
    box = page.locator(selector).first.bounding_box()
    height = page.viewport_size["height"]
    assert box is not None, f"{selector} is not shown"
    assert box["y"] >= 0 and box["y"] + box["height"] <= height, f"{selector} at {box}, screen {height} high"


def open_decision(page: Any, base_url: str, pause: Pause, screen: tuple[int, int]) -> None:
    page.set_viewport_size({"width": screen[0], "height": screen[1]})
    admin_login(page, base_url, "rita", password("rita"))
    page.goto(f"{base_url}/admin/approvals/pendingapproval/{pause.pk}/change/")


@pytest.mark.parametrize("screen", SCREENS, ids=lambda screen: f"{screen[0]}x{screen[1]}")
def test_a_rule_pause_is_decided_on_the_first_screen(live_server, page, screen):
    make_user("rita", "approver")
    pause = paused(make_user("alice"))
    open_decision(page, live_server.url, pause, screen)
    save_screenshot(page, f"admin-first-screen-rule-{screen[0]}.png")
    for selector in (
        "#hitl-requester-input",
        "#hitl-reason",
        "#hitl-outlook",
        "#hitl-approve",
        "#hitl-reject",
    ):
        on_first_screen(page, selector)


@pytest.mark.parametrize("screen", SCREENS, ids=lambda screen: f"{screen[0]}x{screen[1]}")
def test_a_tool_call_shows_every_argument_and_the_buttons_on_the_first_screen(live_server, page, screen):
    make_user("rita", "approver")
    pause = one_call_pause(make_user("alice"))
    open_decision(page, live_server.url, pause, screen)
    save_screenshot(page, f"admin-first-screen-tool-call-{screen[0]}.png")
    rows = page.locator("#hitl-call-0 .hitl-argument")
    assert [row.get_attribute("data-key") for row in rows.all()] == list(ARGUMENTS)
    for index, (key, value) in enumerate(ARGUMENTS.items()):
        row = rows.nth(index)
        assert key in row.inner_text() and json.dumps(value) in row.inner_text()  # a text in its quotes
        on_first_screen(page, f'#hitl-call-0 .hitl-argument[data-key="{key}"]')
    for selector in ("#hitl-reason", "#hitl-outlook", "#hitl-approve", "#hitl-reject"):
        on_first_screen(page, selector)


def phase_pause(owner: Any) -> Pause:
    """A discussion of three members paused after its first phase, which the reviewer signs off."""
    members = [
        (answering(name, f"{name} says: ship it, with a rollback plan."), role)
        for name, role in (
            ("pat", "Optimist"),
            ("sam", "Skeptic"),
            ("lee", "Operator"),
        )
    ]
    group_id = group(
        members,
        [
            {"name": "Opinions", "type": "OPINION", "requiresApproval": True},
            {"name": "Decision", "type": "SYNTHESIS"},
        ],
    )
    body = discuss(client_for(owner), group_id, "Should we ship the release on Friday?")
    return Pause.objects.get(
        subject_type=SubjectType.DISCUSSION, subject_id=body["discussionId"], status=PauseStatus.PENDING
    )


@pytest.mark.parametrize("screen", SCREENS, ids=lambda screen: f"{screen[0]}x{screen[1]}")
def test_a_group_phase_is_decided_on_the_first_screen(live_server, page, screen):
    make_user("rita", "approver")
    pause = phase_pause(make_user("alice"))
    open_decision(page, live_server.url, pause, screen)
    save_screenshot(page, f"admin-first-screen-group-phase-{screen[0]}.png")
    assert page.locator("#hitl-reason").inner_text() == (
        "“panel” finished phase “Opinions” (OPINION): 3 contributions to review"
    )
    produced = page.locator("#hitl-kind-table-0 tbody tr")  # what the phase produced, before the buttons
    assert [row.locator("td").first.inner_text() for row in produced.all()] == [
        "Optimist",
        "Skeptic",
        "Operator",
    ]
    for selector in (
        "#hitl-requester-input",
        "#hitl-reason",
        "#hitl-kind-table-0",
        "#hitl-outlook",
        "#hitl-approve",
        "#hitl-reject",
    ):
        on_first_screen(page, selector)
