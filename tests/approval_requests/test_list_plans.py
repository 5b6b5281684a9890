"""The approval-request lists read exactly their page off an index, whatever else the table holds.

A backlog of pending requests under a newer history of approved ones (the case where the planner
walked the newest requests of every status for the pending ones): every list, of one status or of every
status, for a reviewer, a service account and the person a request is for, is served by an index with
its whole order (no sort), in a plan made for its values and in the generic plan of a prepared
statement (what a connection that prepares its statements runs from the sixth time on).
bench/approval_requests.py times them at 100,000.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone

from approval_requests.models import ApprovalRequest, RequestStatus
from approval_requests.selectors import visible_requests
from approvals.models import Pause

pytestmark = pytest.mark.django_db

PENDING_ROWS, DECIDED_ROWS = 2000, 4000


@pytest.fixture
def backlog(agent, other_agent, alice):
    """Pending requests, oldest first, then newer approved ones; a tenth of each filed by ``agent``, a quarter
    for alice."""
    now = timezone.now()
    rows = []
    for i in range(PENDING_ROWS + DECIDED_ROWS):
        pending = i < PENDING_ROWS
        rows.append(
            ApprovalRequest(
                id=uuid.uuid4(),
                account=agent if i % 10 == 0 else other_agent,
                on_behalf_of=alice if i % 4 == 1 else None,
                idempotency_key=f"k-{i}",
                filing_digest="d",
                agent="refund-bot",
                action_name="refund",
                reason="r",
                status=RequestStatus.PENDING if pending else RequestStatus.APPROVED,
                created_at=now - timedelta(days=30) + timedelta(seconds=i),
            )
        )
    ApprovalRequest.objects.bulk_create(rows, batch_size=1000)
    pauses = [  # each pending request's pause, as filing opens it (an approver's pending list reads it)
        Pause(
            surface="request",
            kind="ACTION",
            subject_type="approval_request",
            subject_id=row.id,
            reason="r",
            paused_at=row.created_at,
        )
        for row in rows[:PENDING_ROWS]
    ]
    Pause.objects.bulk_create(pauses, batch_size=1000)
    for row, pause in zip(rows[:PENDING_ROWS], pauses, strict=True):
        row.pause_id = pause.pk
    ApprovalRequest.objects.bulk_update(rows[:PENDING_ROWS], ["pause_id"], batch_size=1000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE approval_requests_approvalrequest")
        cursor.execute("ANALYZE approvals_pause")


LISTS = {
    # an approver's pending list also asks the routes (approvals.routing): a generic plan may then take the
    # status index, which holds the pending requests in the same order
    "reviewer, pending": (
        "approver",
        RequestStatus.PENDING,
        "approval_request_pending|approval_request_status",
    ),
    "reviewer, every status": ("approver", None, "approval_request_newest"),
    "agent, pending": ("refund-bot", RequestStatus.PENDING, "approval_request_account"),
    "agent, every status": ("refund-bot", None, "approval_request_acct_newest"),
    "person, pending": ("alice", RequestStatus.PENDING, "approval_request_behalf"),
    "person, every status": ("alice", None, "approval_request_behalf_newest"),
}


@pytest.mark.parametrize("which", list(LISTS))
def test_each_list_reads_its_page_off_an_index_in_its_order(backlog, approver, which):
    username, status, index = LISTS[which]
    user = User.objects.get(username=username)
    page = visible_requests(user, status=status)[:50]

    plan = page.explain()

    assert any(name in plan for name in index.split("|")), plan
    assert "Sort" not in plan, plan  # neither a sort nor an incremental one: the index has the order
    assert "Seq Scan on approval_requests_approvalrequest" not in plan, plan
    listed = list(page)
    assert len(listed) == 50
    assert all(status is None or item.status == status for item in listed)
    assert [item.created_at for item in listed] == sorted((item.created_at for item in listed), reverse=True)


@pytest.mark.parametrize("which", list(LISTS))
def test_each_list_keeps_its_index_in_a_prepared_statements_generic_plan(backlog, approver, which):
    username, status, index = LISTS[which]
    sql, params = visible_requests(User.objects.get(username=username), status=status)[
        :50
    ].query.sql_with_params()
    numbered = sql
    for number in range(1, len(params) + 1):
        numbered = numbered.replace("%s", f"${number}", 1)
    arguments = f"({', '.join(['%s'] * len(params))})" if params else ""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute(f"PREPARE listed AS {numbered}")
        try:
            cursor.execute(connection.ops.compose_sql(f"EXPLAIN EXECUTE listed{arguments}", params))
            plan = "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("DEALLOCATE listed")

    assert any(name in plan for name in index.split("|")), plan
    assert "Sort" not in plan, plan
