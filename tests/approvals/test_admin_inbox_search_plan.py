"""The admin inbox's search is served by indexes, not a walk over every pending pause (approvals.admin.search)."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import User
from django.db import connection

from approvals.admin.search import search_pauses
from approvals.models import Pause, PauseStatus
from conversations.models import Agent

pytestmark = pytest.mark.django_db


def backlog(owners: list[User], rows: int, agent_id: uuid.UUID) -> None:
    """``rows`` pending pauses spread over ``owners``: enough that a scan costs more than an index."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO approvals_pause (id, surface, kind, subject_type, subject_id, owner_id, agent_id,
                epoch, status, reason, timeout_policy, approval_timeout, paused_at, bookmark, details,
                tool_names, verdict, note, decided_by, automated, decision_details, allow_self_approval,
                cancel_requested_by)
            SELECT gen_random_uuid(), 'regular', 'RULE', 'conversation', gen_random_uuid(),
                   (%(owners)s::int[])[1 + g %% cardinality(%(owners)s::int[])], %(agent)s::uuid,
                   gen_random_uuid(), 'PENDING', 'routine check ' || g, 'WAIT_INDEFINITELY', '',
                   now() - g * interval '1 second', '{}', '{}', '[]', '', '', '', false, '{}', true, ''
            FROM generate_series(1, %(rows)s) AS g
            """,
            {"owners": [owner.pk for owner in owners], "agent": agent_id, "rows": rows},
        )


@pytest.mark.parametrize(
    "word", ["owner_0042", "account-bot", "0123abcd", "0123abcd-4567-89ab-cdef-0123456789ab", "refund"]
)
def test_the_inbox_search_is_served_by_indexes_not_a_table_scan(word):
    owners = User.objects.bulk_create([User(username=f"owner_{i:04d}") for i in range(1000)])
    Agent.objects.create(name="account-bot")
    backlog(owners, 30_000, Agent.objects.create(name="mail-bot").pk)
    pending = Pause.objects.filter(status=PauseStatus.PENDING).order_by("paused_at", "id")
    sql, params = search_pauses(pending, word)[:50].query.sql_with_params()
    with connection.cursor() as cursor:
        # what autovacuum does after a bulk insert: merge the GIN index's pending list (which the planner
        # otherwise prices as a full read)
        cursor.execute("SELECT gin_clean_pending_list('pause_pending_reason_trgm'::regclass)")
        cursor.execute("ANALYZE approvals_pause")
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Seq Scan" not in plan, plan
    assert "pause_pending_reason_trgm" in plan, plan  # the reason, the arm a join used to hide
    if word == "owner_0042":
        assert "Index Cond: (owner_id = " in plan, plan
    if word == "account-bot":
        assert "pause_pending_agent" in plan, plan
