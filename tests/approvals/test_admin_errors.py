"""Errors that help in the admin: the login message, the styled 404, one log line per
refusal, "Back" links and the index's pending count. The audit's badge: test_audit_admin.py."""

from __future__ import annotations

import logging
import re
import uuid

import pytest
from django.test import Client

from tests.approvals.test_admin_inbox import INBOX, logged_in, page, paused_pause, rows, select, staff

pytestmark = pytest.mark.django_db

LOGIN = "/admin/login/?next=/admin/"
WRONG_CREDENTIALS = "Please enter the correct username and password for a staff account"
NO_ACCESS = "has no reviewer access"


def sign_in(username: str, password: str):
    return Client().post(LOGIN, {"username": username, "password": password})


# --- the login form -----------------------------------------------------------------------------------


def test_the_right_password_without_staff_says_the_account_has_no_reviewer_access(alice):
    response = sign_in("alice", "pw-alice")
    text = response.content.decode()
    assert response.status_code == 200  # the form again: not signed in
    assert f"You signed in as alice, but this account {NO_ACCESS}" in text
    assert WRONG_CREDENTIALS not in text
    assert "_auth_user_id" not in response.client.session


@pytest.mark.parametrize(("username", "password"), [("alice", "wrong"), ("nobody", "pw-alice")])
def test_wrong_credentials_reveal_nothing(alice, username, password):
    text = sign_in(username, password).content.decode()
    assert WRONG_CREDENTIALS in text and NO_ACCESS not in text


def test_an_inactive_account_with_the_right_password_reveals_nothing(alice):
    alice.is_active = False
    alice.save(update_fields=["is_active"])
    text = sign_in("alice", "pw-alice").content.decode()
    assert WRONG_CREDENTIALS in text and NO_ACCESS not in text


def test_staff_with_the_right_password_are_signed_in(approver):
    response = sign_in(approver.username, "pw-" + approver.username)
    assert response.status_code == 302 and response["Location"] == "/admin/"


# --- someone else's pause ------------------------------------------------------------------------------


def test_someone_elses_pause_is_a_styled_admin_404_like_an_unknown_one():
    pause = paused_pause(staff("owner"))
    client = logged_in(staff("mallory"))
    pages = [
        client.get(page(pause)),
        client.get(f"{INBOX}{uuid.uuid4()}/change/"),
        client.get(f"{INBOX}x/change/"),
    ]
    for response in pages:
        text = response.content.decode()
        assert response.status_code == 404
        assert 'id="hitl-not-found"' in text and 'id="site-name"' in text  # inside the admin's frame
        assert f'href="{INBOX}"' in text  # and a way back
    assert len({re.sub(r"csrfmiddlewaretoken[^>]*", "", r.content.decode()) for r in pages}) == 1  # no oracle
    posted = client.post(page(pause), {"expected_pause_id": str(pause.pk), "verdict": "APPROVED"})
    assert posted.status_code == 404 and 'id="hitl-not-found"' in posted.content.decode()


# --- one log line per expected refusal -----------------------------------------------------------------


def test_an_expected_403_writes_one_log_line_without_a_traceback(approver, caplog):
    """Task results raise PermissionDenied for a non-admin; Django would log it with its traceback."""
    client = logged_in(approver)
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = client.get("/admin/django_q/success/")
    assert response.status_code == 403
    records = [r for r in caplog.records if r.name == "django.request"]
    assert len(records) == 1
    assert records[0].exc_info is None and "Traceback" not in caplog.text
    assert "Forbidden (Permission denied)" in records[0].getMessage()


def test_a_server_error_keeps_its_traceback():
    from hitl_project.request_logging import OneLineClientErrors  # local import: the filter under test

    try:
        raise RuntimeError("boom")
    except RuntimeError:
        import sys  # local import: only this test needs the exception triple

        record = logging.LogRecord("django.request", logging.ERROR, "", 0, "x", (), sys.exc_info())
    record.status_code = 500
    assert OneLineClientErrors().filter(record) and record.exc_info is not None


# --- "Back", not "Cancel" ----------------------------------------------------------------------------


def test_the_decision_and_bulk_confirmation_pages_say_back_not_cancel(alice, approver):
    pause = paused_pause(alice)
    client = logged_in(approver)
    decision = client.get(page(pause)).content.decode()
    confirm = select(client, "approve_selected", [pause]).content.decode()
    for text in (decision, confirm):
        link = re.search(r'<a href="[^"]*" class="button cancel-link">([^<]*)</a>', text)
        assert link and link.group(1) == "Back"
        assert ">Cancel<" not in text


# --- the index's pending count -----------------------------------------------------------------------


def inbox_entry(response) -> str:
    assert response.status_code == 200
    entry = re.search(
        r'<a href="/admin/approvals/pendingapproval/"[^>]*>([^<]*)</a>', response.content.decode()
    )
    assert entry, "the inbox is not on the page"
    return entry.group(1)


def test_the_index_shows_each_reviewer_the_count_they_may_decide(approver):
    carol, dave = staff("carol"), staff("dave")
    rows(carol, 3)
    rows(dave, 2)
    rows(dave, 4, status="RESOLVED")  # decided: not pending
    assert inbox_entry(logged_in(approver).get("/admin/")) == "Pending approvals (5)"
    assert inbox_entry(logged_in(carol).get("/admin/")) == "Pending approvals (3)"
    assert inbox_entry(logged_in(dave).get("/admin/approvals/")) == "Pending approvals (2)"


def test_the_count_costs_the_index_one_query(approver):
    rows(None, 3)
    client = logged_in(approver)
    client.get("/admin/")  # warm the session and content types
    from django.db import connection  # local import: only this test counts queries
    from django.test.utils import CaptureQueriesContext  # local import: likewise

    with CaptureQueriesContext(connection) as queries:
        inbox_entry(client.get("/admin/"))
    counts = [
        q["sql"] for q in queries.captured_queries if "COUNT(" in q["sql"] and "approvals_pause" in q["sql"]
    ]
    assert len(counts) == 1


def test_the_inbox_list_pages_keep_their_own_title(approver):
    """The count is on the index only: the sidebar and the list are not charged a query for it."""
    text = logged_in(approver).get(INBOX).content.decode()
    assert "Pending approvals (" not in text


def test_the_admin_says_the_products_name_and_offers_no_site_to_view(approver):
    for path in ("/admin/", LOGIN):
        client = logged_in(approver) if path == "/admin/" else Client()
        html = client.get(path).content.decode()
        assert "<title>" in html and "HITL approvals" in html, path
        assert "Django administration" not in html and "Django site admin" not in html, path
    assert "View site" not in logged_in(approver).get("/admin/").content.decode()


def test_the_schedules_are_listed_under_a_name_a_reviewer_reads(approver):
    html = logged_in(approver).get("/admin/").content.decode()
    assert "Schedules and background tasks" in html and "Django Q" not in html
    assert 'href="/admin/django_q/schedule/"' in html  # a staff member's own schedules stay theirs to use


def test_the_inbox_is_offered_to_view_not_to_change(approver):
    html = logged_in(approver).get("/admin/").content.decode()
    row = html[html.index("Pending approvals (") :]
    row = row[: row.index("</tr>")]
    assert ">View</a>" in row and "Change" not in row
