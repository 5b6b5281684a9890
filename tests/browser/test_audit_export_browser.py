"""Staff in a real browser: open the audit ledger in the admin, export CSV, and find the decision in it."""

from __future__ import annotations

import csv
import io
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.db import connections

from approvals.models import AuditEntry, Pause, PauseStatus
from harnesses.factories import deployed_agent, paused_conversation
from harnesses.users import client_for, make_user
from tests.browser.conftest import admin_login, save_screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NOTE = "Checked with the account manager, ok"


def decided_pause() -> Pause:
    """A conversation paused for approval and approved through the REST API, as a reviewer would."""
    conversation_id = paused_conversation(client_for(make_user("alice")), deployed_agent())
    pause = Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)
    reviewer = client_for(make_user("rita", "approver"))

    def approve() -> Any:
        try:
            return reviewer.post(
                f"/agents/{conversation_id}/resume", {"verdict": "APPROVED", "note": NOTE}, format="json"
            )
        finally:
            connections.close_all()

    # The resume view bridges to async code, which refuses to run in this thread: Playwright's sync API
    # keeps an event loop here. The rows are committed (transactional test), so another thread sees them.
    with ThreadPoolExecutor(max_workers=1) as pool:
        response = pool.submit(approve).result()
    assert response.status_code == 200, response.content
    return pause


def test_staff_exports_the_audit_ledger_as_csv_and_the_file_holds_the_decision(live_server, page, tmp_path):
    pause = decided_pause()
    decision = AuditEntry.objects.get(pause_id=pause.pk, verb="hitl.approval")
    make_user("stella", "staff")

    admin_login(page, live_server.url, "stella", "pw-stella")
    page.get_by_role("link", name="Audit entries").first.click()
    page.wait_for_url(re.compile(r"/admin/approvals/auditentry/$"))
    assert page.locator(f'#result_list th a[href$="/{decision.pk}/change/"]').count() == 1

    # Narrow the list to the pause by typing its id into the sidebar filter.
    page.fill('input[name="pause"]', str(pause.pk))
    page.press('input[name="pause"]', "Enter")
    page.wait_for_url(re.compile(rf"pause={pause.pk}"))
    assert (
        page.locator("#result_list tbody tr").count() == AuditEntry.objects.filter(pause_id=pause.pk).count()
    )
    save_screenshot(page, "admin-audit-entries.png")

    with page.expect_download() as download_info:
        page.get_by_role("link", name="Export CSV").click()
    download = download_info.value
    assert re.fullmatch(r"audit-entries-\d{8}T\d{6}Z\.csv", download.suggested_filename)
    target = tmp_path / download.suggested_filename
    download.save_as(target)

    rows = list(csv.DictReader(io.StringIO(target.read_text(encoding="utf-8"), newline="")))
    assert {row["pauseId"] for row in rows} == {str(pause.pk)}
    decisions = [row for row in rows if row["verb"] == "hitl.approval"]
    assert len(decisions) == 1
    row = decisions[0]
    assert (row["id"], row["actor"], row["verdict"], row["note"], row["automated"]) == (
        str(decision.pk),
        "rita",
        "APPROVED",
        NOTE,
        "false",
    )
    assert row["entryHash"] == decision.entry_hash
    assert row["conversationId"] == str(pause.subject_id)
