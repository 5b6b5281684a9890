#!/usr/bin/env python
"""The group approval inboxes with a large backlog: `GET /groups/pending-approvals` (every group) and
`GET /groups/{groupId}/conversations/pending-approvals` (one group), limit 200.

Seeds --rows discussions paused at a PHASE gate with one SQL statement, as inbox.py seeds 1:1 pauses
(`INSERT ... SELECT generate_series`): a GroupConversation (AWAITING_APPROVAL, question 'bench-group-inbox')
and its PENDING Pause (surface 'group', kind PHASE, subject_type 'discussion', the gate's bookmark and
details) each. Owners: alice and --owners - 1 other users, evenly; groups: --groups groups created through
the REST API, evenly, plus one "rare" group with --rare-share of the rows (a group whose own list must be
found among everybody else's pauses). --regular-rows adds inbox.py's 1:1 pauses, older than the group
ones (docs/performance.md finding 7: a surface filter reads past them unless an index keys on the
surface). Then VACUUM ANALYZE.

Measured for the approver (sees every pause) and alice (owner-scoped inside the query), on four lists:
every group's, group 1's, the rare group's, and the 1:1 inbox (`GET /agents/pending-approvals`, surface
'regular') beside the group backlog:
  - in process, the selector the endpoints use: approvals.selectors.pending_inbox_rows(user, limit=200,
    surface="group"), with the group's id for one group's list;
  - the SQL alone (psycopg), and its EXPLAIN (ANALYZE, BUFFERS), with the index it uses;
  - over HTTP, each endpoint, when it answers 200 with a list ("endpoint not present" otherwise).
Every figure line carries the 1-minute load average. The synthetic rows (inbox.py's too) are deleted at
the start and, unless --keep, at the end.

    .venv/bin/python bench/group_inbox.py                          # 100,000 pending group pauses
    .venv/bin/python bench/group_inbox.py --regular-rows 100000    # and 100,000 older 1:1 pauses
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from _cost import load_average
from _figures import format_latency, machine_line, summarize
from _groups import GATE_INDEX, TURNS_TO_GATE, create_group, deploy_members
from _stack import Stack, add_stack_args, connect
from inbox import MARK as REGULAR_MARK
from inbox import PAUSES_SQL as REGULAR_PAUSES_SQL
from inbox import USERS_SQL, explain

MARK = "bench-group-inbox"
GROUPS_GLOBAL = "/groups/pending-approvals"

DISCUSSIONS_AND_PAUSES_SQL = """
WITH seeded AS MATERIALIZED (
    SELECT gen_random_uuid() AS id,
           (%(owners)s::int[])[1 + (g %% cardinality(%(owners)s::int[]))] AS owner_id,
           CASE WHEN random() < %(rare_share)s THEN %(rare)s::uuid
                ELSE (%(groups)s::uuid[])[1 + (g %% cardinality(%(groups)s::uuid[]))] END AS group_id,
           now() - interval '1 day' + g * interval '10 milliseconds' AS paused_at
    FROM generate_series(1, %(rows)s) AS g
), discussions AS (
    INSERT INTO groups_groupconversation (
        id, group_id, group_version, owner_id, question, state, phase_index, turn_count, transcript, tasks,
        member_conversations, budget_base, last_pause_fingerprint, turn_alive_until, cancel_requested_at,
        cancel_requested_by, created_at, updated_at)
    SELECT id, group_id, 1, owner_id, %(mark)s, 'AWAITING_APPROVAL', %(gate)s, %(turns)s, '[]', '[]', '{}', 0,
           '', NULL, NULL, '', paused_at, paused_at
    FROM seeded
    RETURNING id
)
INSERT INTO approvals_pause (
    id, surface, kind, subject_type, subject_id, owner_id, raised_by_id, agent_id, agent_version, group_id,
    epoch, status, reason, timeout_policy, approval_timeout, paused_at, due_at, bookmark, details, tool_names,
    verdict, note, decided_by, decided_by_user_id, automated, decided_at, decision_details, lease_until,
    resolved_at, schedule_id, allow_self_approval, cancel_requested_by)
SELECT gen_random_uuid(), 'group', 'PHASE', 'discussion', s.id, s.owner_id, s.owner_id, NULL, NULL, s.group_id,
       gen_random_uuid(), 'PENDING', %(mark)s, 'WAIT_INDEFINITELY', '', s.paused_at, NULL,
       jsonb_build_object('phaseIndex', %(gate)s, 'phaseName', 'Challenge', 'phaseType', 'CHALLENGE',
                          'granularity', 'PHASE', 'turnCount', %(turns)s, 'groupVersion', 1),
       jsonb_build_object('phaseIndex', %(gate)s, 'phaseName', 'Challenge', 'phaseType', 'CHALLENGE',
                          'granularity', 'PHASE', 'awaitingTaskIds', '[]'::jsonb),
       '[]', '', '', '', NULL, false, NULL, '{}', NULL, NULL, NULL, true, ''
FROM seeded s JOIN discussions d ON d.id = s.id
"""


def delete_synthetic(conn: Any) -> tuple[int, int]:
    pauses = conn.execute(
        "DELETE FROM approvals_pause WHERE reason = %s OR reason = %s", (MARK, REGULAR_MARK)
    ).rowcount
    discussions = conn.execute("DELETE FROM groups_groupconversation WHERE question = %s", (MARK,)).rowcount
    return pauses, discussions


# --- the queries ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Inbox:
    """One list measured: its title, the surface and group the selector is asked for, its endpoint."""

    title: str
    surface: str
    group_id: str | None
    path: str


def inboxes(groups: list[str], rare: str) -> list[Inbox]:
    one_group = "/groups/{}/conversations/pending-approvals"
    return [
        Inbox("every group", "group", None, GROUPS_GLOBAL),
        Inbox("group 1", "group", groups[0], one_group.format(groups[0])),
        Inbox("rare group", "group", rare, one_group.format(rare)),
        # the 1:1 inbox beside the group backlog (finding 7 the other way round)
        Inbox("1:1 inbox", "regular", None, "/agents/pending-approvals"),
    ]


def inbox_query(user: Any, *, limit: int, inbox: Inbox) -> Any:
    """The values() queryset behind pending_inbox_rows for ``inbox``: for its SQL and plan."""
    # local import: needs Django, which the Stack sets up
    from approvals.selectors import INBOX_COLUMNS, pending_pauses_for

    pending = pending_pauses_for(user, limit=limit, surface=inbox.surface, group_id=inbox.group_id)
    return pending.values(*INBOX_COLUMNS)


def inbox_rows(user: Any, *, limit: int, inbox: Inbox) -> Callable[[], list]:
    """One in-process read: the selector the endpoints call (groups.discussion_status.pending_group_approvals
    and the 1:1 inbox view turn its rows into their answers)."""
    # local import: needs Django, which the Stack sets up
    from approvals.selectors import pending_inbox_rows

    return lambda: pending_inbox_rows(user, limit=limit, surface=inbox.surface, group_id=inbox.group_id)


def index_summary(plan: str) -> str:
    """Which index (or sequential scan) a plan reads the pauses with, the rows its filter threw away and
    its execution time."""
    scans = [
        f"{kind} using {name}"
        for kind, name in re.findall(
            r"(Index Only Scan|Index Scan)(?: Backward)? using (\w+) on approvals_pause", plan
        )
    ]
    scans += [f"Bitmap Index Scan on {name}" for name in re.findall(r"Bitmap Index Scan on (\w+)", plan)]
    seq = "Seq Scan on approvals_pause " in plan  # the pauses, not their routes
    removed = sum(int(n) for n in re.findall(r"Rows Removed by Filter: (\d+)", plan))
    executed = re.search(r"Execution Time: ([\d.]+) ms", plan)
    used = ", ".join(scans) or "no index on approvals_pause"
    return (
        f"{used}{'; a sequential scan of approvals_pause' if seq else ''}; rows removed by filter {removed}; "
        f"execution {executed.group(1) if executed else '?'} ms"
    )


# --- timing ----------------------------------------------------------------------------------------------


def timed(call: Callable[[], Any], runs: int) -> tuple[list[float], int]:
    call()  # warm up
    samples, rows = [], 0
    for _ in range(runs):
        t0 = time.perf_counter()
        result = call()
        samples.append(time.perf_counter() - t0)
        rows = len(result)
    return samples, rows


def http_call(client: Any, path: str, limit: int) -> Callable[[], list] | str:
    """A call of the endpoint, or why it cannot be measured ("endpoint not present ...")."""
    probe = client.get(path, params={"limit": limit})
    if probe.status_code != 200 or not isinstance(probe.json(), list):
        return f"endpoint not present (GET {path} answered {probe.status_code})"

    def call() -> list:
        response = client.get(path, params={"limit": limit})
        response.raise_for_status()
        return response.json()

    return call


def line(label: str, samples: list[float], rows: int) -> str:
    return format_latency(f"{label} ({rows} rows)", samples) + f" [load {load_average():.2f}]"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000, help="pending group pauses (default 100000)")
    parser.add_argument("--owners", type=int, default=5, help="owners, alice one of them (default 5)")
    parser.add_argument("--groups", type=int, default=4, help="groups sharing the rows evenly (default 4)")
    parser.add_argument(
        "--rare-share", type=float, default=0.005, help="share of the rows in the rare group (default 0.005)"
    )
    parser.add_argument(
        "--regular-rows", type=int, default=0, help="older 1:1 pending pauses besides (inbox.py's; default 0)"
    )
    parser.add_argument(
        "--requests", type=int, default=300, help="timed reads per list and user (default 300)"
    )
    parser.add_argument("--limit", type=int, default=200, help="inbox limit (default 200)")
    parser.add_argument("--keep", action="store_true", help="keep the synthetic rows at the end")
    add_stack_args(parser, qcluster=False)
    return parser.parse_args()


def seed(conn: Any, stack: Stack, args: argparse.Namespace, alice_id: int) -> dict[str, Any]:
    admin = stack.client("admin")
    members = deploy_members(admin)
    groups = [create_group(admin, f"bench-group-inbox-{n}", members) for n in range(1, args.groups + 1)]
    rare = create_group(admin, "bench-group-inbox-rare", members)
    conn.execute(USERS_SQL, {"owners": max(1, args.owners - 1)})
    others = [
        r[0]
        for r in conn.execute(
            "SELECT id FROM auth_user WHERE username LIKE 'bench_owner_%%' ORDER BY id LIMIT %s",
            (max(1, args.owners - 1),),
        )
    ]
    owners = [alice_id, *others][: max(1, args.owners)]
    t0 = time.perf_counter()
    conn.execute(
        DISCUSSIONS_AND_PAUSES_SQL,
        {
            "owners": owners,
            "groups": groups,
            "rare": rare,
            "rare_share": args.rare_share,
            "rows": args.rows,
            "mark": MARK,
            "gate": GATE_INDEX,
            "turns": TURNS_TO_GATE,
        },
    )
    inserted = time.perf_counter() - t0
    if args.regular_rows:
        conn.execute(
            REGULAR_PAUSES_SQL,
            {
                "owners": owners,
                "alice": alice_id,
                "alice_share": 0.0,
                "agent": stack.agent_id,
                "mark": REGULAR_MARK,
                "rows": args.regular_rows,
            },
        )
    conn.execute("VACUUM (ANALYZE) approvals_pause")
    conn.execute("VACUUM (ANALYZE) groups_groupconversation")
    counts = conn.execute(
        "SELECT count(*) FILTER (WHERE surface = 'group'), count(*) FILTER (WHERE surface = 'group' "
        "AND owner_id = %s), count(*) FILTER (WHERE group_id = %s), count(*) FILTER (WHERE group_id = %s), "
        "count(*) FILTER (WHERE surface = 'regular') FROM approvals_pause WHERE status = 'PENDING'",
        (alice_id, groups[0], rare),
    ).fetchone()
    return {"groups": groups, "rare": rare, "owners": owners, "inserted": inserted, "counts": counts}


def measure_in_process(users: dict[str, Any], inboxes: list[Inbox], args: argparse.Namespace) -> list[str]:
    out = [f"\nin process, limit {args.limit}, {args.requests} reads each (pending_inbox_rows):"]
    for inbox in inboxes:
        for name, user in users.items():
            samples, rows = timed(inbox_rows(user, limit=args.limit, inbox=inbox), args.requests)
            out.append(line(f"  {inbox.title}, {name}", samples, rows))
    return out


def measure_sql(
    conn: Any, users: dict[str, Any], inboxes: list[Inbox], limit: int
) -> tuple[list[str], list[tuple[str, str, str]]]:
    """The SQL alone (50 runs each) and its plans: (title, SQL, EXPLAIN ANALYZE) each."""
    out, plans = ["\nthe SQL alone (psycopg, 50 runs) and its plan:"], []
    for inbox in inboxes:
        title = inbox.title
        for name, user in users.items():
            sql, params = inbox_query(user, limit=limit, inbox=inbox).query.sql_with_params()
            conn.execute(sql, params).fetchall()  # warm the cache before EXPLAIN ANALYZE
            plan = explain(conn, sql, params)
            samples = []
            for _ in range(50):
                t = time.perf_counter()
                conn.execute(sql, params).fetchall()
                samples.append(time.perf_counter() - t)
            s = summarize(samples)
            out.append(
                f"  {title}, {name}: p50={s['p50']:.2f} ms  p95={s['p95']:.2f} ms; {index_summary(plan)} "
                f"[load {load_average():.2f}]"
            )
            plans.append((f"{title}, {name}", sql, plan))
    return out, plans


def measure_http(
    stack: Stack, users: dict[str, Any], inboxes: list[Inbox], args: argparse.Namespace
) -> list[str]:
    out = [
        f"\nover HTTP ({stack.describe_server()}, one keep-alive client per user), limit {args.limit}, "
        f"{args.requests} requests each:"
    ]
    for inbox in inboxes:
        for name in users:
            call = http_call(stack.client(name), inbox.path, args.limit)
            if isinstance(call, str):
                out.append(f"  {inbox.title}, {name}: {call}")
                continue
            samples, rows = timed(call, args.requests)
            out.append(line(f"  {inbox.title}, {name}", samples, rows))
    return out


def main() -> int:
    args = parse_args()
    with Stack.from_args(args) as stack, connect(stack.db, autocommit=True) as conn:
        removed = delete_synthetic(conn)
        if any(removed):
            print(
                f"(removed {removed[0]} pauses, {removed[1]} discussions of an earlier run)", file=sys.stderr
            )
        alice_id = conn.execute("SELECT id FROM auth_user WHERE username = 'alice'").fetchone()[0]
        seeded = seed(conn, stack, args, alice_id)
        group_total, alice_total, common_total, rare_total, regular_total = seeded["counts"]
        out = [
            machine_line(),
            f"seeded {args.rows} discussions + PENDING PHASE pauses in {seeded['inserted']:.1f} s; pending group "
            f"pauses {group_total} (alice {alice_total}, {len(seeded['owners'])} owners), group 1 {common_total}, "
            f"rare group {rare_total} of {args.groups + 1} groups; pending 1:1 pauses {regular_total}; "
            f"load {load_average():.2f}",
        ]

        from django.contrib.auth import get_user_model  # local import: needs Django, which the Stack sets up

        users = {name: get_user_model().objects.get(username=name) for name in ("approver", "alice")}
        lists = inboxes(seeded["groups"], seeded["rare"])
        out += measure_in_process(users, lists, args)
        sql_lines, plans = measure_sql(conn, users, lists, args.limit)
        out += sql_lines
        out += measure_http(stack, users, lists, args)
        if not args.keep:
            t = time.perf_counter()
            delete_synthetic(conn)
            conn.execute("VACUUM approvals_pause")
            conn.execute("VACUUM groups_groupconversation")
            print(f"(deleted the synthetic rows in {time.perf_counter() - t:.1f} s)", file=sys.stderr)

    print("\n".join(out))
    for title, sql, plan in plans:
        print(f"\n{title} (ORM SQL):\n    {sql}\nEXPLAIN ANALYZE:\n{plan}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
