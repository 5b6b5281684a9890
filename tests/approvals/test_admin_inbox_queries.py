"""The inbox list's query budget: the plain list, a filtered list and a search each render
with at most 9 queries, whatever the number of rows, owners and agents; the page count is capped."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.admin.paging import CappedCountPaginator
from conversations.models import Agent
from harnesses.users import make_user
from tests.approvals.test_admin_inbox import INBOX, listed, logged_in, rows, staff

pytestmark = pytest.mark.django_db

BUDGET = 9
PAGES = {
    "list": {},
    "filtered": {"overdue": "no", "kind__exact": "RULE"},  # what bench/admin_inbox.py times
    "filtered by the sidebar": {"type": "RULE", "owner": "0"},
    "search by owner": {"q": "owner3"},
    "search by two words": {"q": "bot needs"},
}


def backlog(owners: int, per_owner: int) -> list:
    people = [staff(f"owner{i}") for i in range(owners)]
    soon = timezone.now() + timedelta(minutes=5)
    for i, owner in enumerate(people):
        agent_id = Agent.objects.create(name=f"bot {i}").pk
        rows(owner, per_owner, agent_id=agent_id, due_at=soon, reason="needs a look")
    return people


def queries(client, params: dict) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(INBOX, params)
    assert response.status_code == 200, response.content[:300]
    return len(captured.captured_queries)


@pytest.mark.parametrize("role", ["admin", "approver", "owner-staff"])
def test_list_filtered_and_search_pages_stay_within_nine_queries(role):
    people = backlog(owners=6, per_owner=2)
    reviewer = {
        "admin": lambda: make_user("ada", "admin"),
        "approver": lambda: make_user("rita", "approver"),
    }.get(role, lambda: people[3])()
    client = logged_in(reviewer)
    client.get(INBOX)  # the session's first use is not what is measured
    pages = {name: {**params} for name, params in PAGES.items()}
    pages["filtered by the sidebar"]["owner"] = str(people[3].pk)
    few = {name: queries(client, params) for name, params in pages.items()}
    assert max(few.values()) <= BUDGET, few

    backlog_more = [staff(f"more{i}") for i in range(30)]  # many more owners, agents and rows
    for i, owner in enumerate(backlog_more):
        rows(owner, 3, agent_id=Agent.objects.create(name=f"more bot {i}").pk)
    rows(people[3], 60)
    many = {name: queries(client, params) for name, params in pages.items()}
    assert many == few  # a fixed number of queries, whatever the size of the backlog


def test_the_page_count_stops_at_the_cap_and_says_more_than(approver, monkeypatch):
    monkeypatch.setattr(CappedCountPaginator, "cap", 60)
    rows(staff("carol"), 70)
    client = logged_in(approver)
    response = client.get(INBOX)
    assert len(listed(response)) == 50
    html = response.content.decode()
    assert "more than 60 pending approvals" in html
    assert (
        len(listed(client.get(INBOX, {"p": "2"}))) == 10
    )  # paged up to the cap; filter or search for the rest


def test_below_the_cap_the_exact_count_is_shown(approver):
    rows(staff("carol"), 3)
    html = logged_in(approver).get(INBOX).content.decode()
    assert "3 pending approvals" in html and "more than" not in html


def test_the_sidebar_offers_no_counts_per_choice(approver):
    rows(staff("carol"), 2)
    client = logged_in(approver)
    assert "Show counts" not in client.get(INBOX).content.decode()
    with CaptureQueriesContext(connection) as captured:
        client.get(INBOX, {"_facets": "True"})  # asked for by URL, still not computed
    assert len(captured.captured_queries) <= BUDGET


def test_the_row_checkbox_is_djangos_own_html_rendered_without_a_widget():
    from django.contrib import admin

    from approvals.admin.inbox import PendingApprovalAdmin
    from approvals.models import PendingApproval

    (pause,) = rows(staff("carol"), 1)
    inbox = PendingApprovalAdmin(PendingApproval, admin.site)
    pending = PendingApproval.objects.get(pk=pause.pk)
    assert inbox.action_checkbox(pending) == admin.ModelAdmin.action_checkbox(inbox, pending)
