#!/usr/bin/env python
"""Approval inbox latency with a large backlog: `GET /agents/pending-approvals?limit=200`.

Inserts --rows PENDING pauses straight into approvals_pause of the bench database with one
`INSERT ... SELECT generate_series` (owners spread over ~1,000 users created in bulk with SQL, and a
share for alice), runs VACUUM ANALYZE, then times --requests inbox reads as the approver (sees every pause)
and as alice (owner-scoped inside the query). Prints the EXPLAIN ANALYZE of both queries, taken from
the ORM's own SQL (approvals.selectors.pending_pauses_for), so one can see which index serves them.
The synthetic rows (reason 'bench-inbox') are deleted at the start and, unless --keep, at the end.

    .venv/bin/python bench/inbox.py                   # 100,000 pending pauses
    .venv/bin/python bench/inbox.py --rows 1000000    # a million
    .venv/bin/python bench/inbox.py --due 50          # and 50 newer pauses with a deadline

With --due, it says how many pauses with a deadline the first page shows; where the checkout has the
caps of pending approvals (approvals.pause_caps), it also prints the plans of their two counts.

    .venv/bin/python bench/inbox.py --rows 1000000 --routed 0.5   # half of them routed to a group

With --routed SHARE, that share of the pauses is routed to the group 'bench-finance' (one route row each,
docs/approvals-routing.md), which the approver is not in: the approver's inbox must leave them out in
its query, and the figures say what that costs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from _figures import machine_line, print_latency, summarize
from _stack import Stack, add_stack_args, connect, database_url

MARK = "bench-inbox"
OWNERS = 1000

USERS_SQL = """
INSERT INTO auth_user (password, last_login, is_superuser, username, first_name, last_name, email,
                       is_staff, is_active, date_joined)
SELECT '!', NULL, false, 'bench_owner_' || lpad(g::text, 4, '0'), '', '', '', false, true, now()
FROM generate_series(1, %(owners)s) AS g
ON CONFLICT (username) DO NOTHING
"""

PAUSES_SQL = """
INSERT INTO approvals_pause (
    id, surface, kind, subject_type, subject_id, owner_id, agent_id, agent_version, group_id, epoch,
    status, reason, timeout_policy, approval_timeout, paused_at, due_at, bookmark, details, tool_names,
    verdict, note, decided_by, decided_by_user_id, automated, decided_at, decision_details,
    lease_until, resolved_at, schedule_id, allow_self_approval, cancel_requested_by)
SELECT gen_random_uuid(), 'regular', 'RULE', 'conversation', gen_random_uuid(),
       CASE WHEN random() < %(alice_share)s THEN %(alice)s
            ELSE (%(owners)s::int[])[1 + (g %% cardinality(%(owners)s::int[]))] END,
       %(agent)s::uuid, 1, NULL, gen_random_uuid(),
       'PENDING', %(mark)s, 'WAIT_INDEFINITELY', '',
       now() - interval '30 days' + g * interval '10 milliseconds', NULL,
       '{}', '{"actions": ["PAUSE_CONVERSATION", "confirm_deletion"]}', '[]',
       '', '', '', NULL, false, NULL, '{}', NULL, NULL, NULL, true, ''
FROM generate_series(1, %(rows)s) AS g
"""


# --due: pauses with a deadline, newer than every other (a request raised after a flood of pauses that
# have none): how many of them the first page shows says whether the inbox puts what is due first.
DUE_SQL = PAUSES_SQL.replace(
    "now() - interval '30 days' + g * interval '10 milliseconds', NULL,",
    "now() + g * interval '1 millisecond', now() + interval '1 hour' + g * interval '1 minute',",
).replace("'WAIT_INDEFINITELY', ''", "'AUTO_REJECT', 'PT1H'")


ROUTED_SQL = "UPDATE approvals_pause SET routed = true WHERE reason = %(mark)s AND random() < %(share)s"
ROUTES_SQL = """
INSERT INTO approvals_pauseroute (pause_id, step, opens_at, username, group_name)
SELECT id, 0, paused_at, '', 'bench-finance' FROM approvals_pause WHERE reason = %(mark)s AND routed
"""
ROUTES_DELETE_SQL = (
    "DELETE FROM approvals_pauseroute WHERE pause_id IN (SELECT id FROM approvals_pause WHERE reason = %s)"
)


def cap_count_plans(username: str, agent_id: str) -> list[tuple[str, str, tuple]]:
    """The SQL of the open-pause caps' counts (approvals.pause_caps), when this checkout has them."""
    from django.contrib.auth import get_user_model

    try:
        from approvals.pause_caps import counted_pending_pauses
    except ImportError:
        return []
    user = get_user_model().objects.get(username=username)
    owner = counted_pending_pauses(cap=100, owner_id=user.pk).query.sql_with_params()
    agent = counted_pending_pauses(cap=1000, agent_id=agent_id).query.sql_with_params()
    return [(f"{username}'s pending pauses (cap 100)", *owner), ("the agent's (cap 1000)", *agent)]


def orm_inbox_sql(username: str) -> tuple[str, tuple]:
    """The SQL the inbox view runs for ``username`` (surface 'regular', limit 200), from the ORM."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from approvals.models import Engine
    from approvals.selectors import pending_pauses_for

    user = get_user_model().objects.get(username=username)
    queryset = pending_pauses_for(user, limit=200, surface=Engine.REGULAR)
    sql, params = queryset.query.sql_with_params()
    return sql, params


def explain(conn, sql: str, params: tuple) -> str:
    rows = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params).fetchall()
    return "\n".join("    " + row[0] for row in rows)


def time_inbox(client, requests: int, limit: int) -> tuple[list[float], int, int]:
    """The latencies, the rows of the page and how many of them have a deadline."""
    latencies = []
    rows = due = 0
    client.get("/agents/pending-approvals", params={"limit": limit}).raise_for_status()  # warm up
    for _ in range(requests):
        t0 = time.perf_counter()
        response = client.get("/agents/pending-approvals", params={"limit": limit})
        latencies.append(time.perf_counter() - t0)
        response.raise_for_status()
        rows = len(response.json())
        due = sum(1 for row in response.json() if row["deadline"] is not None)
    return latencies, rows, due


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000, help="PENDING pauses to insert (default 100000)")
    parser.add_argument(
        "--alice-share", type=float, default=0.005, help="share of the rows owned by alice (default 0.005)"
    )
    parser.add_argument("--requests", type=int, default=300, help="timed inbox reads per user (default 300)")
    parser.add_argument("--limit", type=int, default=200, help="inbox limit (default 200)")
    parser.add_argument("--keep", action="store_true", help="keep the synthetic pauses at the end")
    parser.add_argument(
        "--due", type=int, default=0, help="also this many pauses with a deadline, the newest (default 0)"
    )
    parser.add_argument(
        "--routed", type=float, default=0.0, help="share of the pauses routed to a group (default 0)"
    )
    add_stack_args(parser, qcluster=False)
    args = parser.parse_args()
    os.environ["DATABASE_URL"] = database_url(args.db)

    with Stack.from_args(args) as stack, connect(stack.db, autocommit=True) as conn:
        conn.execute(ROUTES_DELETE_SQL, (MARK,))
        deleted = conn.execute("DELETE FROM approvals_pause WHERE reason = %s", (MARK,)).rowcount
        if deleted:
            print(f"(removed {deleted} synthetic pauses of an earlier run)", file=sys.stderr)
        t0 = time.perf_counter()
        conn.execute(USERS_SQL, {"owners": OWNERS})
        owner_ids = [
            r[0]
            for r in conn.execute(
                "SELECT id FROM auth_user WHERE username LIKE 'bench_owner_%%' ORDER BY id LIMIT %s",
                (OWNERS,),
            )
        ]
        alice_id = conn.execute("SELECT id FROM auth_user WHERE username = 'alice'").fetchone()[0]
        conn.execute(
            PAUSES_SQL,
            {
                "owners": owner_ids,
                "alice": alice_id,
                "alice_share": args.alice_share,
                "agent": stack.agent_id,
                "mark": MARK,
                "rows": args.rows,
            },
        )
        if args.due:
            conn.execute(
                DUE_SQL,
                {
                    "owners": owner_ids,
                    "alice": alice_id,
                    "alice_share": args.alice_share,
                    "agent": stack.agent_id,
                    "mark": MARK,
                    "rows": args.due,
                },
            )
        if args.routed:
            conn.execute(ROUTED_SQL, {"mark": MARK, "share": args.routed})
            conn.execute(ROUTES_SQL, {"mark": MARK})
            conn.execute("VACUUM (ANALYZE) approvals_pauseroute")
        inserted = time.perf_counter() - t0
        conn.execute("VACUUM (ANALYZE) approvals_pause")  # also clears what an earlier run deleted
        conn.execute("ANALYZE auth_user")
        pending = conn.execute("SELECT count(*) FROM approvals_pause WHERE status = 'PENDING'").fetchone()[0]
        alice_pending = conn.execute(
            "SELECT count(*) FROM approvals_pause WHERE status = 'PENDING' AND owner_id = %s", (alice_id,)
        ).fetchone()[0]
        sizes = conn.execute(
            "SELECT pg_size_pretty(pg_relation_size('approvals_pause')), "
            "pg_size_pretty(pg_relation_size('pause_pending_inbox')), "
            "pg_size_pretty(pg_relation_size('pause_pending_owner_inbox'))"
        ).fetchone()

        approver_sql, approver_params = orm_inbox_sql("approver")
        alice_sql, alice_params = orm_inbox_sql("alice")
        for sql, params in ((approver_sql, approver_params), (alice_sql, alice_params)):
            conn.execute(sql, params).fetchall()  # warm the cache before EXPLAIN ANALYZE
        approver_plan = explain(conn, approver_sql, approver_params)
        alice_plan = explain(conn, alice_sql, alice_params)
        cap_plans = [
            (title, explain(conn, sql, params))
            for title, sql, params in cap_count_plans("alice", stack.agent_id)
        ]
        db_times: dict[str, list[float]] = {"approver": [], "alice": []}
        for name, sql, params in (
            ("approver", approver_sql, approver_params),
            ("alice", alice_sql, alice_params),
        ):
            for _ in range(50):
                t = time.perf_counter()
                conn.execute(sql, params).fetchall()
                db_times[name].append(time.perf_counter() - t)

        approver_latencies, approver_rows, approver_due = time_inbox(
            stack.client("approver"), args.requests, args.limit
        )
        alice_latencies, alice_rows, alice_due = time_inbox(stack.client("alice"), args.requests, args.limit)
        alice_due_total = conn.execute(
            "SELECT count(*) FROM approvals_pause WHERE status = 'PENDING' AND owner_id = %s "
            "AND due_at IS NOT NULL",
            (alice_id,),
        ).fetchone()[0]

        if not args.keep:
            t = time.perf_counter()
            conn.execute(ROUTES_DELETE_SQL, (MARK,))
            conn.execute("DELETE FROM approvals_pause WHERE reason = %s", (MARK,))
            conn.execute("VACUUM approvals_pause")
            print(f"(deleted the synthetic pauses in {time.perf_counter() - t:.1f} s)", file=sys.stderr)

    print(machine_line())
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    print(
        f"inbox: inserted {args.rows} PENDING pauses in {inserted:.1f} s over {len(owner_ids)} owners + alice; "
        f"PENDING now {pending} (alice {alice_pending}); table {sizes[0]}, "
        f"pause_pending_inbox {sizes[1]}, pause_pending_owner_inbox {sizes[2]}"
    )
    print(
        f"uvicorn --workers {args.workers}{' +TCP_NODELAY' if args.nodelay else ''}, "
        f"GET /agents/pending-approvals?limit={args.limit}, {args.requests} requests each, one keep-alive client"
    )
    print_latency(f"approver inbox ({approver_rows} rows)", approver_latencies)
    print_latency(f"alice inbox    ({alice_rows} rows)", alice_latencies)
    if args.due:
        print(
            f"  with a deadline on page 1: approver {approver_due} of {min(args.due, args.limit)}, "
            f"alice {alice_due} of {min(alice_due_total, args.limit)}"
        )
    for name in ("approver", "alice"):
        s = summarize(db_times[name])
        print(f"  SQL alone, {name}: p50={s['p50']:.2f} ms  p95={s['p95']:.2f} ms (psycopg, 50 runs)")
    print("\napprover query (ORM SQL):\n    " + approver_sql)
    print("EXPLAIN ANALYZE:\n" + approver_plan)
    print("\nalice query (ORM SQL):\n    " + alice_sql)
    print("EXPLAIN ANALYZE:\n" + alice_plan)
    for title, plan in cap_plans:
        print(f"\nthe count of {title}, EXPLAIN ANALYZE:\n" + plan)
    return 0


if __name__ == "__main__":
    sys.exit(main())
