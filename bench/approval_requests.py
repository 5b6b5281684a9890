#!/usr/bin/env python
"""Approval requests over HTTP against the live stack: the gated call, the lists, the webhooks.

Starts the stack of the other benches (bench/_stack.py: uvicorn with one worker as ./scripts/start runs
it, pool on, database --db) and runs three scenarios (--scenarios picks some), printing every figure
with the 1-minute load average before and after it:

1. **The gated call** (bench/_request_cycles.py): service accounts file a pinned request, a scripted
   reviewer approves it as soon as it is filed, the agent claims it with the pinned request and
   reports the outcome. p50/p95 of each step and of the cycle (the four round trips, the reviewer's
   time left out), with 1 agent and with 16 concurrent agents (--agents), each a thread with its own
   token and httpx client; the statements of each step (one cycle in process); then what the database
   holds of the run (every cycle claimed once, with its outcome, and its audit entries).
2. **The lists with a backlog** (bench/_request_inbox.py): --pending PENDING requests with their pauses
   (and --decided newer approved ones) inserted with SQL, then p50/p95 of a reviewer's ``GET
   /approval-requests?status=PENDING&limit=50`` and of every status, of an agent's own list and of a
   person's (the requests made on their behalf), pending and every status, and of the admin "Pending
   approvals" page (--admin-requests, 0 skips it); the statements each list runs, its SQL alone, and
   the EXPLAIN ANALYZE of each query. Target: p95 ≤ 20 ms at 100,000 pending. The rows are deleted
   afterwards unless --keep.
3. **Webhook delivery** (bench/_webhook_receiver.py): a q-cluster is started, a loopback receiver
   verifies each delivery with ``standardwebhooks``; p50/p95 from the decision to the verified delivery.

    .venv/bin/python bench/approval_requests.py                                    # full size, ~3 min
    .venv/bin/python bench/approval_requests.py --pending 2000 --cycles 50 --webhooks 20   # quick
    .venv/bin/python bench/approval_requests.py --scenarios inbox --pending 1000000

It exits 1 when an answer was wrong or a check of the database failed (the ``errors:`` lines), else 0.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from _figures import format_latency, machine_line
from _request_cycles import CycleRun, cycle_check, run_cycles, statements_per_step
from _request_inbox import LIMIT, backlog, list_statements, plans, remove, seed, time_list
from _service_accounts import load, run_id, service_account_tokens, token_client
from _stack import Stack, add_stack_args, connect, database_url
from _webhook_receiver import Receiver, delivery_rows, run_deliveries

SCENARIOS = ("cycle", "inbox", "webhook")
INBOX_AGENT = "bench-inbox-agent"


def figure(label: str, samples: Sequence[float], before: float, after: float) -> None:
    print(f"{format_latency(label, samples)}  [load {before:.2f} -> {after:.2f}]", flush=True)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help=f"comma-separated, of {', '.join(SCENARIOS)} (default all)",
    )
    cycle = parser.add_argument_group("1. the gated call")
    cycle.add_argument(
        "--agents", default="1,16", help="concurrent agents of each run, comma-separated (default 1,16)"
    )
    cycle.add_argument(
        "--cycles", type=int, default=300, help="timed cycles of each run, over its agents (default 300)"
    )
    cycle.add_argument(
        "--reviewers", type=int, default=1, help="reviewer threads deciding the agents' requests (default 1)"
    )
    cycle.add_argument("--warmup", type=int, default=2, help="untimed cycles per agent first (default 2)")
    inbox = parser.add_argument_group("2. the lists")
    inbox.add_argument(
        "--pending", type=int, default=100_000, help="pending requests to insert (default 100000)"
    )
    inbox.add_argument(
        "--decided",
        type=int,
        default=0,
        help="also this many approved requests, newer than every pending one (default 0)",
    )
    inbox.add_argument(
        "--accounts", type=int, default=20, help="service accounts they belong to (default 20)"
    )
    inbox.add_argument(
        "--agent-share", type=float, default=0.05, help="share of them the timed agent filed (default 0.05)"
    )
    inbox.add_argument(
        "--person-share", type=float, default=0.005, help="share made on behalf of alice (default 0.005)"
    )
    inbox.add_argument("--requests", type=int, default=300, help="timed reads of each list (default 300)")
    inbox.add_argument(
        "--admin-requests",
        type=int,
        default=50,
        help="timed loads of the admin page; 0 skips it (default 50)",
    )
    inbox.add_argument("--keep", action="store_true", help="keep the synthetic requests at the end")
    hooks = parser.add_argument_group("3. webhooks")
    hooks.add_argument("--webhooks", type=int, default=100, help="timed deliveries (default 100)")
    hooks.add_argument("--webhook-warmup", type=int, default=3, help="untimed deliveries first (default 3)")
    add_stack_args(parser, qcluster=False)
    args = parser.parse_args()
    args.scenarios = [name.strip() for name in args.scenarios.split(",") if name.strip()]
    unknown = set(args.scenarios) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    args.agents = [int(count) for count in args.agents.split(",")]
    return args


# --- 1. the gated call ---------------------------------------------------------------------------


def gated_calls(stack: Stack, args: argparse.Namespace, run: str) -> int:
    tokens = service_account_tokens("bench-agent", max(args.agents))
    statements = statements_per_step("bench-agent-01", "approver", f"{run}-statements")
    errors = 0
    for agents in args.agents:
        prefix = f"{run}-c{agents}"
        result = run_cycles(
            stack.url,
            agent_tokens=tokens[:agents],
            reviewer_token=stack.tokens["approver"],
            reviewers=args.reviewers,
            cycles=args.cycles,
            warmup=args.warmup,
            prefix=prefix,
        )
        expected = args.cycles + args.warmup * agents
        checked = cycle_check(prefix, expected)
        wrong = [name for name in ("filed", "reported") if checked[name] != expected]
        if checked["audit"] != 4 * expected:
            wrong.append("audit")
        print_cycles(result, args, checked, statements)
        if wrong:
            print(f"errors: the database disagrees ({', '.join(wrong)})")
        errors += len(result.errors) + len(wrong)
    return errors


def print_cycles(
    result: CycleRun, args: argparse.Namespace, checked: dict[str, Any], statements: dict[str, int]
) -> None:
    before, after = result.load_before, result.load_after
    print(
        f"\n== 1. gated call, {result.agents} agent{'s' if result.agents > 1 else ''}: "
        "create -> decision -> claim -> outcome =="
    )
    print(
        f"{len(result.cycle)} timed cycles (+{args.warmup} warm-up per agent), {args.reviewers} reviewer(s); "
        f"{result.cycles_per_second:.1f} cycles/s; errors: {len(result.errors)}"
    )
    for error in result.errors[:5]:
        print(f"  error: {error}")
    figure("cycle (create+decision+claim+outcome)", result.cycle, before, after)
    figure("  create   POST /approval-requests", result.create, before, after)
    figure("  decision POST …/decision (reviewer)", result.decision, before, after)
    figure("  claim    POST …/claim (pinned request)", result.claim, before, after)
    figure("  outcome  POST …/outcome", result.outcome, before, after)
    print(
        "statements per step, in process: "
        + ", ".join(f"{name} {count}" for name, count in statements.items())
        + f" ({sum(statements.values())} per cycle)"
    )
    print("not in the cycle:")
    figure("  notice: decision answered -> agent's ?wait answers", result.notice, before, after)
    figure("  reviewer's queue (stands for human time)", result.reviewer_queue, before, after)
    print(
        f"database: filed {checked['filed']} of {checked['expected']}, claimed with an outcome "
        f"{checked['reported']}, audit entries {checked['audit']} (4 per request)"
    )


# --- 2. the lists --------------------------------------------------------------------------------


def lists_with_backlog(stack: Stack, args: argparse.Namespace) -> int:
    from django.contrib.auth import get_user_model

    [agent_token] = service_account_tokens(INBOX_AGENT, 1)
    agent = f"{INBOX_AGENT}-01"
    users = get_user_model().objects
    lists = {
        "reviewer ?status=PENDING": ("approver", "PENDING"),
        "reviewer, every status": ("approver", None),
        "agent's own ?status=PENDING": (agent, "PENDING"),
        "agent's own, every status": (agent, None),
        "person's ?status=PENDING": ("alice", "PENDING"),
        "person's, every status": ("alice", None),
    }
    with connect(stack.db, autocommit=True) as conn, token_client(stack.url, agent_token) as agent_client:
        if removed := remove(conn):
            print(f"(removed {removed} synthetic requests of an earlier run)", file=sys.stderr)
        seconds = seed(
            conn,
            rows=args.pending,
            decided=args.decided,
            accounts=args.accounts,
            agent_id=users.get(username=agent).pk,
            agent_share=args.agent_share,
            person_id=users.get(username="alice").pk,
            person_share=args.person_share,
        )
        summary = backlog(conn, agent=agent, person="alice")
        found_plans = plans(conn, lists)
        print(f"\n== 2. lists with {summary['pending']:,} pending approval requests ==")
        print(
            f"inserted {args.pending:,} pending requests"
            f"{f' and {args.decided:,} newer approved ones' if args.decided else ''} with their pauses in "
            f"{seconds:.1f} s, over {args.accounts} service accounts and the timed agent's "
            f"({summary['agent']:,} pending), {summary['person']:,} on behalf of alice; "
            f"tables: requests {summary['requests_size']}, pauses {summary['pauses_size']}"
        )
        print(f"{stack.describe_server()}, {args.requests} reads of each list, one keep-alive client each")
        clients = {"approver": stack.client("approver"), agent: agent_client, "alice": stack.client("alice")}
        for name, (username, status) in lists.items():
            params: dict[str, Any] = {"limit": LIMIT} | ({"status": status} if status else {})
            statements = list_statements(username, params)
            before = load()
            samples, rows, size = time_list(clients[username], params, args.requests)
            label = f"{name} ({rows} rows, {size / 1024:.0f} kB, {statements} statements)"
            figure(label, samples, before, load())
        if args.admin_requests:
            admin_page(stack, args.admin_requests)
        for name, (_, _, p95) in found_plans.items():
            print(
                f"  SQL alone, {name}: p95 {p95:.2f} ms (psycopg, 50 runs, prepared from the 6th as the server does)"
            )
        for name, (sql, plan, _) in found_plans.items():
            print(f"\n{name}, ORM SQL:\n    {sql}\nEXPLAIN (ANALYZE, BUFFERS):\n{plan}")
        if not args.keep:
            remove(conn)
    return 0


def admin_page(stack: Stack, requests: int) -> None:
    from admin_inbox import PAGE, admin_session, set_password, time_page

    set_password(stack, "approver", "approver")
    browser = admin_session(stack.url, "approver")
    try:
        before = load()
        samples = time_page(browser, PAGE, requests)
        figure("admin 'Pending approvals', first page (approver)", samples, before, load())
    finally:
        browser.close()


# --- 3. webhooks ---------------------------------------------------------------------------------


def webhook_deliveries(stack: Stack, args: argparse.Namespace, run: str) -> int:
    if not args.qcluster:
        stack.start_qcluster()
    [token] = service_account_tokens("bench-hook-agent", 1)
    prefix = f"{run}-w"
    with Receiver() as receiver, token_client(stack.url, token) as agent:
        rotated = agent.post("/approval-requests/webhook-secret")
        rotated.raise_for_status()
        receiver.secret = rotated.json()["secret"]
        result = run_deliveries(
            receiver,
            agent,
            stack.client("approver"),
            count=args.webhooks,
            warmup=args.webhook_warmup,
            prefix=prefix,
        )
    rows = delivery_rows(prefix)
    expected = args.webhooks + args.webhook_warmup
    wrong = (
        []
        if rows.get("DELIVERED", 0) == expected
        else [f"delivered {rows.get('DELIVERED', 0)} of {expected}"]
    )
    print(
        f"\n== 3. webhook delivery after a decision (q-cluster with {args.q_workers} workers, poll 0.2 s) =="
    )
    print(
        f"{len(result.from_answer)} timed deliveries (+{args.webhook_warmup} warm-up), decided one at a time; "
        f"deliveries by status {rows}; duplicates at the receiver {receiver.duplicates}; "
        f"refused signatures {len(receiver.refused)}; errors: {len(result.errors) + len(wrong)}"
    )
    for error in (result.errors + wrong + receiver.refused)[:5]:
        print(f"  error: {error}")
    before, after = result.load_before, result.load_after
    figure("delivery, from the decision's answer (lower bound)", result.from_answer, before, after)
    figure(
        "delivery, from decided_at in its transaction (upper bound)", result.from_decided_at, before, after
    )
    figure("  the decision itself (POST …/decision)", result.decision, before, after)
    return len(result.errors) + len(wrong) + len(receiver.refused)


def main() -> int:
    args = parse_args()
    os.environ["DATABASE_URL"] = database_url(args.db)
    print(machine_line())
    errors = 0
    with Stack.from_args(args) as stack:
        print(f"{stack.describe_server()}, pool on, database {stack.db}")
        run = f"bench-{run_id()}"
        if "cycle" in args.scenarios:
            errors += gated_calls(stack, args, run)
        if "inbox" in args.scenarios:
            errors += lists_with_backlog(stack, args)
        if "webhook" in args.scenarios:
            errors += webhook_deliveries(stack, args, run)
    print(f"\nerrors in all: {errors}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
