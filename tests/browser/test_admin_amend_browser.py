"""A reviewer edits a tool call in a real browser: one field changed, Reset, changed again, approved; the
tool's real request (a recorder on loopback) carries the edited value and the value of a credential's
shape the model wrote, which the page showed as it is, with a warning, and the reviewer left alone."""

from __future__ import annotations

import json
import re

import pytest

from approvals.models import Pause, PauseStatus
from harnesses.factories import deployed_agent, say, start
from harnesses.users import client_for, make_user
from tests.browser.conftest import admin_login, save_screenshot
from tests.toolgate.test_amend_redacted_fields import SECRET, secret_payments_agent, sent_bodies

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = (1280, 1920)


def paused_transfer(owner, server) -> Pause:
    conversation_id = start(client_for(owner), deployed_agent(secret_payments_agent(server.url)))
    assert (
        say(client_for(owner), conversation_id, "please transfer 100 to bob").json()["state"]
        == "AWAITING_HUMAN"
    )
    return Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)


def argument(page, key: str):
    return page.locator(f'#hitl-amend-0 [data-argument="{key}"]')


@pytest.mark.parametrize("width", WIDTHS)
def test_an_edited_field_reaches_the_tool_with_the_untouched_value_after_a_reset(
    live_server, page, http_recorder, width
):
    alice = make_user("alice")
    make_user("rita", "approver")
    pause = paused_transfer(alice, http_recorder)
    page.set_viewport_size({"width": width, "height": 900})
    admin_login(page, live_server.url, "rita", "pw-rita")
    page.goto(f"{live_server.url}/admin/approvals/pendingapproval/{pause.pk}/change/")

    assert page.locator(".hitl-credential-warning").is_visible()
    amount, token = argument(page, "amount"), argument(page, "api_token")
    assert (amount.input_value(), token.input_value()) == ("100", SECRET)
    amount.fill("75")
    token.fill("oops")
    page.click("#hitl-amend-reset-0")
    assert (amount.input_value(), token.input_value()) == ("100", SECRET)
    amount.fill("60")
    page.locator("#hitl-amend-0").scroll_into_view_if_needed()
    save_screenshot(page, f"amend-{width}.png", for_docs=width == 1280)

    page.click("#hitl-approve")
    page.wait_for_url(re.compile(r"/admin/approvals/pendingapproval/$"))
    assert sent_bodies(http_recorder) == [{"amount": "60", "to": "bob", "token": SECRET}]
    pause.refresh_from_db()
    assert pause.verdict == "APPROVED" and pause.decided_by == "rita"

    # opened again, the pause reads as decided: who, the edit beside what the model asked, what it returned
    page.goto(f"{live_server.url}/admin/approvals/pendingapproval/{pause.pk}/change/")
    assert page.locator("#hitl-outcome-headline").inner_text().startswith("Approved with an edit by rita at ")
    changed = page.locator("#hitl-call-0 .hitl-argument-changed")
    assert [row.get_attribute("data-key") for row in changed.all()] == ["amount"]
    assert changed.locator("td").all_inner_texts()[:2] == ["100", "60\nchanged"]
    assert "Ran once, at " in page.locator("#hitl-call-outcome-0").inner_text()
    assert page.locator("#hitl-call-result-0").is_visible()
    assert SECRET not in page.content()  # once decided, every view of it is redacted
    assert page.locator("#hitl-approve").count() == 0
    save_screenshot(page, f"decided-tool-call-{width}.png", for_docs=width == 1280)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_fields_and_the_json_stay_in_step_through_an_error_and_a_retry(
    live_server, page, http_recorder, width
):
    alice = make_user("alice")
    make_user("rita", "approver")
    pause = paused_transfer(alice, http_recorder)
    page.set_viewport_size({"width": width, "height": 900})
    admin_login(page, live_server.url, "rita", "pw-rita")
    page.goto(f"{live_server.url}/admin/approvals/pendingapproval/{pause.pk}/change/")
    amount, as_json = argument(page, "amount"), page.locator("#id_call_0_amended")

    amount.fill("250")  # the field writes into the JSON
    assert json.loads(as_json.input_value())["amount"] == 250
    as_json.fill(as_json.input_value().replace("250", "2500"))  # the JSON writes into the field
    assert amount.input_value() == "2500"

    as_json.fill('{"amount": 90,')  # a JSON error, submitted
    page.click("#hitl-approve")
    page.locator("#hitl-error-summary").wait_for()
    assert "not valid JSON" in page.locator("#hitl-error-summary").inner_text()
    box = page.locator("#hitl-error-summary").bounding_box()  # where the eye is after the reload
    assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= page.viewport_size["height"], box
    assert as_json.input_value() == '{"amount": 90,'  # what was typed is kept
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING

    argument(page, "amount").fill("90")  # a retry from the field: the JSON is rebuilt, and it just works
    assert json.loads(page.locator("#id_call_0_amended").input_value())["amount"] == 90
    page.click("#hitl-approve")
    page.wait_for_url(re.compile(r"/admin/approvals/pendingapproval/$"))
    assert sent_bodies(http_recorder) == [{"amount": "90", "to": "bob", "token": SECRET}]
