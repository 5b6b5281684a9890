"""The inbox's new-work poll: /admin/approvals/pendingapproval/updates/ answers each
reviewer with counts inside their own scope, staff only, in one query of the pauses."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from harnesses.users import make_user
from tests.approvals.test_admin_inbox import INBOX, logged_in, rows, staff

pytestmark = pytest.mark.django_db

UPDATES = f"{INBOX}updates/"


def ask(client: Client, since) -> dict:
    response = client.get(UPDATES, {"since": since.isoformat()})
    assert response.status_code == 200, response.content[:300]
    return response.json()


def test_a_reviewer_counts_only_the_pauses_they_may_decide():
    carol, dave = staff("carol"), staff("dave")
    shown_at = timezone.now() - timedelta(minutes=1)
    rows(carol, 2)  # paused in the last two minutes: one before the list was shown, one after
    rows(dave, 3)
    approver, admin = make_user("rita", "approver"), make_user("ada", "admin")
    assert ask(logged_in(approver), shown_at)["pending"] == 5
    assert ask(logged_in(admin), shown_at)["pending"] == 5
    theirs = ask(logged_in(carol), shown_at)
    assert theirs["pending"] == 2 and theirs["new"] == 1  # dave's pauses are nowhere in carol's answer
    assert ask(logged_in(staff("erin")), shown_at) == {
        "pending": 0,
        "new": 0,
        "newest": None,
        "marker": "0:-",
    }


def test_new_counts_pauses_paused_after_the_list_was_shown_and_the_marker_moves():
    carol = staff("carol")
    client = logged_in(make_user("rita", "approver"))
    rows(carol, 2)
    shown_at = timezone.now()
    before = ask(client, shown_at)
    assert before["new"] == 0
    (late,) = rows(carol, 1)
    late.paused_at = timezone.now()
    late.save(update_fields=["paused_at"])
    after = ask(client, shown_at)
    assert after["new"] == 1 and after["pending"] == 3
    assert after["marker"] != before["marker"] and after["newest"] == late.paused_at.isoformat()


def test_non_staff_and_anonymous_are_sent_to_the_login_page():
    since = timezone.now().isoformat()
    assert Client().get(UPDATES, {"since": since}).status_code == 302
    response = logged_in(make_user("alice")).get(UPDATES, {"since": since})
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


@pytest.mark.parametrize("since", ["", "yesterday", "2026-13-45T99:00:00Z", "2026-12-01T10:00:00"])
def test_a_missing_malformed_or_zoneless_since_is_refused_in_words(since):
    response = logged_in(make_user("rita", "approver")).get(UPDATES, {"since": since})
    assert response.status_code == 400
    assert "the time the list was shown" in response.json()["error"]


@pytest.mark.parametrize("role", ["approver", "owner-staff"])
def test_the_poll_reads_the_pauses_in_one_query(role):
    carol = staff("carol")
    rows(carol, 30)
    reviewer = make_user("rita", "approver") if role == "approver" else carol
    client = logged_in(reviewer)
    ask(client, timezone.now())
    with CaptureQueriesContext(connection) as captured:
        ask(client, timezone.now())
    of_pauses = [q["sql"] for q in captured.captured_queries if "approvals_pause" in q["sql"]]
    assert len(of_pauses) == 1
    # besides it: the session, the user and (for roles) the user's groups, as on every admin page
    assert len(captured.captured_queries) <= 4, [q["sql"][:80] for q in captured.captured_queries]
