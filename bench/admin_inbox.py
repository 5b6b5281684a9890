#!/usr/bin/env python
"""The admin "Pending approvals" page with a large backlog (target: under 300 ms at 100,000 pending).

Inserts --rows PENDING pauses like bench/inbox.py, logs in to Django admin as the approver (who sees
every pause) through the real login form, and times --requests loads of the first changelist page,
then of a filtered page (overdue = no, pause type RULE) and a search by owner name. Prints p50/p95/p99.

    .venv/bin/python bench/admin_inbox.py
    .venv/bin/python bench/admin_inbox.py --rows 1000000
"""

from __future__ import annotations

import argparse
import os
import re
import time

import httpx
from _figures import machine_line, print_latency
from _stack import Stack, add_stack_args, connect, database_url
from inbox import MARK, OWNERS, PAUSES_SQL, USERS_SQL

PASSWORD = "bench-admin-inbox-pass"
PAGE = "/admin/approvals/pendingapproval/"


def set_password(stack: Stack, username: str, role: str) -> None:
    stack.manage("hitl_user", username, "--role", role, "--password", PASSWORD)


def admin_session(base_url: str, username: str) -> httpx.Client:
    client = httpx.Client(base_url=base_url, timeout=30, follow_redirects=False)
    login = client.get("/admin/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
    answer = client.post(
        "/admin/login/?next=/admin/",
        data={"csrfmiddlewaretoken": token, "username": username, "password": PASSWORD, "next": "/admin/"},
        headers={"Referer": f"{base_url}/admin/login/"},
    )
    if answer.status_code != 302:
        raise SystemExit(f"admin login failed ({answer.status_code})")
    return client


def time_page(client: httpx.Client, path: str, requests: int) -> list[float]:
    client.get(path).raise_for_status()
    samples = []
    for _ in range(requests):
        started = time.perf_counter()
        response = client.get(path)
        samples.append(time.perf_counter() - started)
        response.raise_for_status()
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--keep", action="store_true")
    add_stack_args(parser, qcluster=False)
    args = parser.parse_args()
    os.environ["DATABASE_URL"] = database_url(args.db)
    print(machine_line())
    with Stack.from_args(args) as stack, connect(stack.db, autocommit=True) as conn:
        conn.execute("DELETE FROM approvals_pause WHERE reason = %s", (MARK,))
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
                "alice_share": 0.005,
                "agent": stack.agent_id,
                "mark": MARK,
                "rows": args.rows,
            },
        )
        conn.execute("VACUUM (ANALYZE) approvals_pause")
        pending = conn.execute("SELECT count(*) FROM approvals_pause WHERE status = 'PENDING'").fetchone()[0]
        set_password(stack, "approver", "approver")
        browser = admin_session(stack.url, "approver")
        try:
            first = time_page(browser, PAGE, args.requests)
            filtered = time_page(browser, PAGE + "?overdue=no&kind__exact=RULE", args.requests)
            searched = time_page(browser, PAGE + "?q=bench_owner_0042", args.requests)
        finally:
            browser.close()
        if not args.keep:
            conn.execute("DELETE FROM approvals_pause WHERE reason = %s", (MARK,))
    print(f"pending pauses: {pending}")
    print_latency("admin inbox, first page (approver sees all)", first)
    print_latency("admin inbox, filtered (not overdue, RULE)", filtered)
    print_latency("admin inbox, search by owner", searched)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
