#!/usr/bin/env python
"""Full pause -> decision -> continuation cycles per second, over HTTP or in process.

A cycle (3 requests): alice starts a conversation, says "please delete my account" (the rules pause
it: AWAITING_HUMAN), the approver resumes it with `?wait=10`, which returns the continued snapshot
once the continuation ran; the cycle counts if its output is "Deletion APPROVED.".
C clients (one thread each, keep-alive connections) each run --warmup untimed cycles, then cycles
back to back for D seconds.

--services calls, in this process, the services the three views call (access check, service, snapshot;
no routing, authentication per request, DRF or middleware): the level of the peer's in-process
``graph.invoke``. See _services.py.

--in-process sends the same requests through Django's WSGI handler inside this process, called as a
WSGI server calls it (no HTTP, no server; the connection pool as the servers run it), against the same
database and the same q-cluster; the web server still runs (it creates the agent) but serves nothing
during the run.

Besides cycles/s and latencies it prints, per cycle: PostgreSQL transactions (the database's
`pg_stat_database.xact_commit` delta) and CPU (web server + q-cluster process groups, this process when
in process, PostgreSQL), with the 1-minute load average (see CostMeter in _cost.py).

    .venv/bin/python bench/cycles.py                          # 4 clients, 20 s, 2 gunicorn sync workers
    .venv/bin/python bench/cycles.py --server uvicorn         # 2 uvicorn workers +TCP_NODELAY
    .venv/bin/python bench/cycles.py --workers 1              # one worker
    .venv/bin/python bench/cycles.py -c 4 -d 15 --in-process  # through the WSGI handler, no HTTP
    .venv/bin/python bench/cycles.py -c 4 -d 15 --services    # the services the views call
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections import Counter
from typing import Any

from _cost import CostMeter, Window, report_figures
from _figures import machine_line, print_latency
from _stack import Stack, add_stack_args, say, start_conversation


class Results:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cycles: list[float] = []
        self.phases: dict[str, list[float]] = {"start": [], "say": [], "resume?wait": []}
        self.errors: Counter[str] = Counter()


def one_cycle(stack: Stack, alice, approver, results: Results) -> None:
    t0 = time.perf_counter()
    conversation_id = start_conversation(alice, stack.agent_id)
    t1 = time.perf_counter()
    state = say(alice, conversation_id, "please delete my account")["state"]
    t2 = time.perf_counter()
    if state != "AWAITING_HUMAN":
        raise RuntimeError(f"say: state {state}, expected AWAITING_HUMAN")
    response = approver.post(
        f"/agents/{conversation_id}/resume",
        params={"wait": 10},
        json={"verdict": "APPROVED", "note": "bench"},
    )
    t3 = time.perf_counter()
    if response.status_code != 200:
        raise RuntimeError(f"resume: {response.status_code} {response.text[:200]}")
    body = response.json()
    if body.get("output") != ["Deletion APPROVED."]:
        raise RuntimeError(f"resume: state {body.get('state')} output {body.get('output')}")
    with results.lock:
        results.cycles.append(t3 - t0)
        results.phases["start"].append(t1 - t0)
        results.phases["say"].append(t2 - t1)
        results.phases["resume?wait"].append(t3 - t2)


def clients(stack: Stack, in_process: bool, services: bool = False) -> tuple[Any, Any]:
    if services:
        from _services import ServicesClient

        return ServicesClient(stack.tokens["alice"]), ServicesClient(stack.tokens["approver"])
    if in_process:
        from say_rules_only import InProcessClient

        return InProcessClient(stack.tokens["alice"]), InProcessClient(stack.tokens["approver"])
    return stack.client("alice"), stack.client("approver")


def client_loop(
    stack: Stack, window: Window, warmup: int, results: Results, in_process: bool, services: bool
) -> None:
    alice, approver = clients(stack, in_process, services)
    try:
        window.client(
            lambda into: one_cycle(stack, alice, approver, into),
            warmup=warmup,
            results=results,
            scratch=Results,
        )
    finally:
        if in_process:  # this thread's connection: its backend reports its counts when it exits
            from django.db import connection

            connection.close()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "-c", "--clients", type=int, default=4, help="concurrent clients (threads), default 4"
    )
    parser.add_argument("-d", "--duration", type=float, default=20.0, help="seconds of cycles (default 20)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed cycles per client first (default 2)")
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="through Django's WSGI handler in this process instead of HTTP",
    )
    parser.add_argument(
        "--services",
        action="store_true",
        help="in process, calling the services the views call (no HTTP, no DRF: the level of "
        "the peer's in-process graph.invoke); implies --in-process",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the figures to PATH (for compare_peer.py)")
    add_stack_args(parser, workers=2, server="gunicorn")  # the topology docs/operations.md recommends
    args = parser.parse_args()
    args.in_process = args.in_process or args.services
    # docs/operations.md: the REST API on gunicorn's sync workers; several uvicorn workers always with TCP_NODELAY
    args.nodelay = args.nodelay or (args.server == "uvicorn" and args.workers > 1)

    with Stack.from_args(args) as stack:
        meter = CostMeter(db=stack.db, groups=stack.process_groups(), count_self=args.in_process)
        window = Window(clients=args.clients, duration=args.duration, meter=meter)
        results = Results()
        threads = [
            threading.Thread(
                target=client_loop, args=(stack, window, args.warmup, results, args.in_process, args.services)
            )
            for _ in range(args.clients)
        ]
        for thread in threads:
            thread.start()
        window.wait()
        for thread in threads:
            thread.join()
    meter.end_transactions()
    wall = meter.wall
    cycles = len(results.cycles)

    print(machine_line())
    where = (
        "IN PROCESS (the services the views call: no HTTP, no DRF)"
        if args.services
        else "IN PROCESS (Django's WSGI handler, no HTTP)"
        if args.in_process
        else stack.describe_server()
    )
    print(
        f"cycles: {args.clients} clients for {args.duration:.0f} s, {where}, "
        f"q-cluster {args.q_workers} workers"
    )
    print(
        f"throughput: {cycles / wall:.1f} cycles/s ({cycles} cycles in {wall:.1f} s, "
        f"{3 * cycles / wall:.0f} req/s) [load {meter.load_before:.2f} -> {meter.load_after:.2f}]"
    )
    print_latency("cycle latency", results.cycles)
    for name, samples in results.phases.items():
        print_latency(f"  {name}", samples)
    for line in meter.lines(cycles):
        print(line)
    report_figures(
        errors=results.errors,
        cycles=cycles,
        wall=wall,
        cycle_samples=results.cycles,
        resume_samples=results.phases["resume?wait"],
        meter=meter,
        json_path=args.json,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
