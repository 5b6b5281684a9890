#!/usr/bin/env python
"""What the per-user request rates cost a counted request (docs/performance.md, "Request throttles").

In this process, on a database of its own (bench/_in_process.py), through DRF's test client: `say` on a
rules-only agent (a turn) and `undo` (a write), each timed with the rate off and with it on, in
alternating blocks, with the counts in the default database cache table. The rate on is 600/min, the
default writes rate, and a run sends fewer requests than that, so none is refused: the user's window
grows to the most entries it ever holds at that rate, its costliest. Prints the statements a counted
request adds (Django's query log) and the latency with and without, with the load average.

    .venv/bin/python bench/throttle_cost.py                   # 400 requests of each kind
    .venv/bin/python bench/throttle_cost.py --requests 200
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from _in_process import prepare

DB = "hitl_bench_throttle"
RATE = "600/min"


def timed(call, count: int) -> list[float]:
    latencies = []
    for _ in range(count):
        started = time.perf_counter()
        response = call()
        latencies.append((time.perf_counter() - started) * 1000)
        assert response.status_code in (200, 409), (response.status_code, response.content[:300])
    return latencies


def set_rate(rate: str) -> None:
    from django.conf import settings

    settings.HITL_THROTTLE_TURNS_RATE = settings.HITL_THROTTLE_WRITES_RATE = rate


def statements_of(calls: dict) -> dict[tuple[str, str], list[str]]:
    """The SQL of one request of each kind, with the rate off and on."""
    from django.core.cache import caches
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    statements = {}
    for rate in ("off", RATE):
        set_rate(rate)
        for name, call in calls.items():
            with CaptureQueriesContext(connection) as queries:
                call()
            statements[(name, rate)] = [q["sql"] for q in queries.captured_queries]
    caches["throttle"].clear()
    return statements


def latencies_of(calls: dict, *, requests: int, block: int) -> dict[tuple[str, str], list[float]]:
    """Each kind timed in alternating blocks with the rate off and on (the window emptied between kinds)."""
    from django.core.cache import caches

    latencies: dict[tuple[str, str], list[float]] = {}
    for name, call in calls.items():
        for _ in range(requests // block):
            for rate in ("off", RATE):
                set_rate(rate)
                latencies.setdefault((name, rate), []).extend(timed(call, block))
        caches["throttle"].clear()
    return latencies


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=400, help="requests of each kind, rate on and off")
    parser.add_argument("--block", type=int, default=50, help="requests per alternating block")
    args = parser.parse_args()
    prepare(DB)

    from harnesses.factories import deployed_agent, start
    from harnesses.users import client_for, make_user

    client = client_for(make_user("alice"))
    conversation_id = start(client, deployed_agent())
    calls = {
        "say": lambda: client.post(f"/agents/{conversation_id}", {"input": "hello"}, format="json"),
        "undo": lambda: client.post(f"/agents/{conversation_id}/undo"),
    }
    statements = statements_of(calls)
    latencies = latencies_of(calls, requests=args.requests, block=args.block)

    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} (1, 5 min)")
    for name in calls:
        counted = [sql for sql in statements[(name, RATE)] if "hitl_throttle_cache" in sql]
        print(
            f"{name}: {len(statements[(name, RATE)])} statements with the rate on, {len(counted)} of them the count's:"
        )
        for sql in counted:
            print(f"    {sql[:110]}")
        for rate in ("off", RATE):
            values = sorted(latencies[(name, rate)])
            p95 = values[int(len(values) * 0.95) - 1]
            print(
                f"  rate {rate:>7}: p50 {statistics.median(values):.2f} ms, p95 {p95:.2f} ms "
                f"({len(values)} requests, in process)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
