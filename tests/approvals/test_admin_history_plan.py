"""The "Decided approvals" history is served by the decided pauses' partial indexes, not a walk over every
pause (approvals.admin.history; migration 0011): the page's own queries, as the admin sends them, EXPLAINed
over 20,000 decided and 20,000 pending pauses."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from harnesses.users import make_user
from tests.approvals.test_admin_history import HISTORY
from tests.approvals.test_admin_inbox import logged_in, staff

pytestmark = [pytest.mark.django_db, pytest.mark.long]

ROWS = 20_000


def backlog(owners: list[User], deciders: list[User]) -> None:
    """Decided pauses spread over ``owners`` and ``deciders`` (every 10th one a timeout), and as many pending."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO approvals_pause (id, surface, kind, subject_type, subject_id, owner_id, epoch, status,
                reason, timeout_policy, approval_timeout, paused_at, bookmark, details, tool_names, verdict,
                note, decided_by, decided_by_user_id, automated, decided_at, decision_details,
                allow_self_approval, cancel_requested_by)
            SELECT gen_random_uuid(), 'regular', 'RULE', 'conversation', gen_random_uuid(),
                   (%(owners)s::int[])[1 + g %% cardinality(%(owners)s::int[])], gen_random_uuid(),
                   CASE WHEN g %% 2 = 0 THEN 'PENDING' ELSE 'RESOLVED' END, 'routine check ' || g,
                   'AUTO_REJECT', 'PT15M', now() - g * interval '1 minute', '{}', '{}', '[]',
                   CASE WHEN g %% 2 = 0 THEN '' ELSE 'APPROVED' END, '',
                   CASE WHEN g %% 2 = 0 THEN '' WHEN g %% 10 = 1 THEN 'system:timeout' ELSE 'someone' END,
                   CASE WHEN g %% 2 = 0 OR g %% 10 = 1 THEN NULL
                        ELSE (%(deciders)s::int[])[1 + g %% cardinality(%(deciders)s::int[])] END,
                   g %% 10 = 1, CASE WHEN g %% 2 = 0 THEN NULL ELSE now() - g * interval '30 second' END,
                   '{}', true, ''
            FROM generate_series(1, %(rows)s) AS g
            """,
            {
                "owners": [owner.pk for owner in owners],
                "deciders": [decider.pk for decider in deciders],
                "rows": 2 * ROWS,
            },
        )
        # what autovacuum does after a bulk insert: merge the GIN indexes' pending lists
        cursor.execute("SELECT gin_clean_pending_list('pause_decided_reason_trgm'::regclass)")
        cursor.execute("ANALYZE approvals_pause")


def page_query_plans(user: User, params: dict[str, str]) -> tuple[str, str]:
    """The plans of the page's two queries over pauses: its rows (ordered by the decision time) and the
    pager's capped count."""
    client = logged_in(user)
    with CaptureQueriesContext(connection) as queries:
        assert client.get(HISTORY, params).status_code == 200
    sqls = [q["sql"] for q in queries.captured_queries if 'FROM "approvals_pause"' in q["sql"]]
    (rows,) = [sql for sql in sqls if "ORDER BY" in sql and "LIMIT" in sql]
    (count,) = [sql for sql in sqls if sql.startswith("SELECT COUNT(*)")]
    plans = []
    with connection.cursor() as cursor:
        for sql in (rows, count):
            cursor.execute("EXPLAIN " + sql)
            plans.append("\n".join(row[0] for row in cursor.fetchall()))
    return plans[0], plans[1]


@pytest.mark.parametrize(
    ("role", "params", "index"),
    [
        ("approver", {}, "pause_decided_by_user"),  # decided by me, the default
        ("approver", {"decided_by": "all"}, "pause_decided"),
        ("owner-staff", {"decided_by": "all"}, "pause_decided_owner"),
    ],
)
def test_the_history_page_is_served_by_a_decided_pauses_index(role, params, index):
    owners = [staff(f"owner_{i:03d}") for i in range(200)]
    deciders = [make_user(f"approver_{i:02d}", "approver") for i in range(20)]
    backlog(owners, deciders)
    reviewer = deciders[3] if role == "approver" else owners[7]
    plan, count = page_query_plans(reviewer, params)
    assert "Seq Scan on approvals_pause " not in plan, plan  # the pauses, not their routes
    assert f"using {index} on approvals_pause" in plan, plan
    assert "LIMIT" in count.upper(), count  # the pager counts at most COUNT_CAP + 1 rows


@pytest.mark.parametrize("word", ["owner_042", "routine check 1234", "0123abcd"])
def test_a_history_search_is_served_by_indexes_not_a_table_scan(word):
    owners = [staff(f"owner_{i:03d}") for i in range(200)]
    deciders = [make_user(f"approver_{i:02d}", "approver") for i in range(20)]
    backlog(owners, deciders)
    plan, count = page_query_plans(deciders[0], {"decided_by": "all", "q": word})
    for shown in (plan, count):
        assert "Seq Scan on approvals_pause " not in shown, shown
    if word.startswith("routine"):
        assert "pause_decided_reason_trgm" in count, count
