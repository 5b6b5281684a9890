"""In a real browser, at 1280 and 1920 px: a reviewer finds an approval request in the inbox, reads what
the agent asks (each argument, the pinned request as it will be sent, its context), makes a mistake in
the edited JSON (refused beside the field, the input kept, nothing decided), then edits and approves;
the agent's claim of the filed request is refused and its claim of the edited one granted."""

from __future__ import annotations

import re

import pytest

from approval_requests.models import ApprovalRequest
from approvals.models import Pause, PauseStatus
from harnesses.users import client_for, make_user
from tests.approval_requests.conftest import PINNED, file_request
from tests.browser.conftest import admin_login, save_screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = (1280, 1920)
INBOX = "/admin/approvals/pendingapproval/"
EDITED_BODY = '{"orderId":"A-1","amount":100}'


@pytest.mark.parametrize("width", WIDTHS)
def test_a_reviewer_edits_and_approves_an_approval_request(live_server, page, width):
    agent = make_user("refund-bot", "agent")
    make_user("rita", "approver")
    context = {"messages": [{"role": "user", "content": "my order A-1 arrived broken"}]}
    filed = file_request(agent, request=PINNED, context=context)
    pause = Pause.objects.get(subject_id=filed["id"])

    page.set_viewport_size({"width": width, "height": 900})
    admin_login(page, live_server.url, "rita", "pw-rita")
    page.goto(f"{live_server.url}{INBOX}?surface=request")
    row = page.locator("#result_list tbody tr")
    assert row.count() == 1
    assert "refund → POST https://payments.example/refunds" in row.inner_text()
    assert "refund-bot" in row.inner_text()
    save_screenshot(page, f"approval-request-inbox-{width}.png")
    row.locator("a", has_text=filed["id"][:8]).click()

    page.wait_for_url(re.compile(rf"{INBOX}{pause.pk}/change/"))
    request_block = page.locator("#hitl-block-request pre").inner_text()
    assert "Authorization: [hidden: marked secret by the agent]" in request_block
    assert PINNED["body"] in request_block
    assert "my order A-1 arrived broken" in page.locator("#hitl-block-context").inner_text()
    assert page.locator("#hitl-outlook-edit").is_visible()

    arguments = page.locator('[data-edit="arguments"]')
    arguments.fill('{"orderId": "A-1", "amount": 100,}')
    page.click("#hitl-edit-approve")
    assert "is not valid JSON" in page.locator("#hitl-edit-row-arguments .errorlist").inner_text()
    assert "is not valid JSON" in page.locator(".hitl-edit-error-summary").inner_text()
    assert arguments.input_value() == '{"orderId": "A-1", "amount": 100,}'  # the reviewer's input, kept
    assert ApprovalRequest.objects.get(pk=filed["id"]).status == "PENDING"

    arguments.fill('{"orderId": "A-1", "amount": 100}')
    page.locator('[data-edit="body"]').fill(EDITED_BODY)
    page.fill("#id_note", "Only 100: the rest is store credit.")
    page.locator("#hitl-edit").scroll_into_view_if_needed()
    save_screenshot(page, f"approval-request-edit-{width}.png", for_docs=width == 1280)
    page.click("#hitl-edit-approve")

    page.wait_for_url(re.compile(rf"{INBOX}$"))
    assert "Edited and approved: approval request" in page.locator(".messagelist").inner_text()
    pause.refresh_from_db()
    assert (pause.status, pause.verdict, pause.decided_by) == (PauseStatus.RESOLVED, "APPROVED", "rita")
    claim = f"/approval-requests/{filed['id']}/claim"
    refused = client_for(agent).post(claim, {"request": PINNED}, format="json")
    assert refused.json()["code"] == "REQUEST_CHANGED"
    granted = client_for(agent).post(claim, {"request": {**PINNED, "body": EDITED_BODY}}, format="json")
    assert granted.status_code == 200, granted.content
    assert granted.json()["grant"]["arguments"] == {"orderId": "A-1", "amount": 100}

    page.goto(f"{live_server.url}{INBOX}{pause.pk}/change/")  # the decided page: what was granted
    assert "Arguments: as filed and as approved" in page.locator("#hitl-kind-section").inner_text()
    assert EDITED_BODY in page.locator("#hitl-block-approved-request").inner_text()
    save_screenshot(page, f"approval-request-decided-{width}.png")
