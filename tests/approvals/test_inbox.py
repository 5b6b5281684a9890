"""The pending-approvals inbox: owner-scoped inside the query, before the limit; bounded; indexed."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from approvals.models import Pause
from harnesses.factories import paused_conversation

pytestmark = pytest.mark.django_db


def _pauses(owner, count, *, start_minutes_ago=1000):
    now = timezone.now()
    return Pause.objects.bulk_create(
        [
            Pause(
                surface="regular",
                kind="RULE",
                subject_type="conversation",
                subject_id=uuid.uuid4(),
                owner=owner,
                reason="r",
                paused_at=now - timedelta(minutes=start_minutes_ago - i),
            )
            for i in range(count)
        ]
    )


def test_personal_inbox_is_never_starved_by_other_users_backlog(alice, bob, alice_client):
    _pauses(bob, 50, start_minutes_ago=5000)  # older than alice's: first in line without the owner filter
    mine = _pauses(alice, 2, start_minutes_ago=10)
    rows = alice_client.get("/agents/pending-approvals?limit=1").json()
    assert [r["pauseId"] for r in rows] == [str(mine[0].id)]
    assert rows[0]["ownerId"] == "alice"


def test_approvers_and_admins_see_every_pending_pause_oldest_first(alice, bob, approver_client, admin_client):
    _pauses(bob, 3, start_minutes_ago=100)
    _pauses(alice, 3, start_minutes_ago=50)
    for client in (approver_client, admin_client):
        rows = client.get("/agents/pending-approvals").json()
        assert len(rows) == 6
        assert [r["pausedAt"] for r in rows] == sorted(r["pausedAt"] for r in rows)


@pytest.mark.parametrize(("asked", "expected"), [("0", 1), ("-5", 1), ("3", 3), ("5000", 12)])
def test_limit_is_clamped_to_1_through_1000(approver, approver_client, asked, expected):
    _pauses(approver, 12)
    assert len(approver_client.get(f"/agents/pending-approvals?limit={asked}").json()) == expected


@pytest.mark.parametrize(
    "query", ["limit=abc", "limit=null&limit=null", "limit=3&limit=4", "limit=", "limit=1_0"]
)
def test_a_limit_that_is_not_one_integer_is_a_400_naming_limit(approver_client, query):
    response = approver_client.get(f"/agents/pending-approvals?{query}")

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert [error["field"] for error in response.json()["errors"]] == ["limit"]


def test_inbox_row_has_the_contract_fields(alice_client, approver_client):
    conversation_id = paused_conversation(alice_client)
    (row,) = approver_client.get("/agents/pending-approvals").json()
    assert set(row) == {
        "pauseId",
        "surface",
        "conversationId",
        "agentId",
        "groupId",
        "ownerId",
        "userId",
        "pausedAt",
        "deadline",
        "pauseReason",
        "pauseType",
        "timeoutPolicy",
        "approvalTimeout",
        "toolNames",
    }
    assert row["conversationId"] == conversation_id
    assert (row["surface"], row["pauseType"], row["toolNames"], row["groupId"]) == (
        "regular",
        "RULE",
        [],
        None,
    )


def test_decided_and_cancelled_pauses_leave_the_inbox(alice_client, approver_client):
    first = paused_conversation(alice_client)
    second = paused_conversation(alice_client)
    approver_client.post(f"/agents/{first}/resume", {"verdict": "APPROVED"}, format="json")
    approver_client.post(f"/agents/{second}/cancel")
    assert approver_client.get("/agents/pending-approvals").json() == []


def test_inbox_is_one_query_whatever_the_page_size(
    alice, approver, approver_client, django_assert_max_num_queries
):
    _pauses(alice, 40)
    approver_client.get("/agents/pending-approvals")  # warm auth caches
    with django_assert_max_num_queries(4):  # token auth + groups + the inbox itself
        assert len(approver_client.get("/agents/pending-approvals?limit=40").json()) == 40


@pytest.mark.parametrize(
    ("owner_filter", "index_condition"), [(False, "pause_pending_inbox"), (True, "Index Cond: (owner_id = ")]
)
def test_inbox_queries_are_served_by_an_index_not_a_table_scan(alice, owner_filter, index_condition):
    from django.contrib.auth.models import User

    others = User.objects.bulk_create([User(username=f"user{i}") for i in range(100)])
    _pauses(alice, 20)
    for other in others:
        _pauses(other, 30)
    sql = "SELECT id FROM approvals_pause WHERE status = 'PENDING' {} ORDER BY paused_at LIMIT 200"
    where = f"AND owner_id = {alice.pk}" if owner_filter else ""
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE approvals_pause")
        cursor.execute("EXPLAIN " + sql.format(where))
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Seq Scan" not in plan, plan
    assert index_condition in plan, plan
