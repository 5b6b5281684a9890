#!/usr/bin/env python
"""Group discussion cycles per second over HTTP: start -> pause at the gate -> approve -> COMPLETED.

The group (bench/_groups.py): three deterministic members (groups.demo_group, local, no network), phases
OPINION, CHALLENGE with ``requiresApproval`` (a PHASE pause) and SYNTHESIS. A cycle (2 requests):
alice starts a discussion (`POST /groups/{id}/conversations`: 6 member turns in the request, answers
AWAITING_APPROVAL at phase 1), the approver approves it (`POST .../approve`: the continuation runs in
the approving request, 3 more member turns, answers COMPLETED with 9 OK entries). Each answer is checked.
C clients (one thread each, keep-alive connections) each run --warmup untimed cycles, then cycles back
to back for D seconds.

It prints cycles/s, p50/p95/p99 of the cycle and of each step, PostgreSQL transactions and CPU per cycle
(CostMeter in _cost.py, as cycles.py) and per member turn (a cycle's figures over its 9 member turns, so the
discussion's own work, its start, gate, approval and end, is shared among them), each with the 1-minute
load average before -> after the run. --json adds the per-turn figures (``*_per_member_turn``).
No q-cluster by default: an approval continues the discussion in the request (``HITL_CONTINUE_INLINE``),
and a 202 (queued) counts as an error.

    .venv/bin/python bench/group_cycles.py                        # 4 clients, 15 s, 2 gunicorn sync workers
    .venv/bin/python bench/group_cycles.py -c 1 -d 10             # one client
    .venv/bin/python bench/group_cycles.py --server uvicorn --db hitl_bench_groups
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections import Counter
from typing import Any

from _cost import CostMeter, Window, report_figures
from _figures import format_latency, machine_line
from _group_peer import add_peer_args, run_with_peer
from _groups import GATE_INDEX, TURNS_IN_ALL, TURNS_TO_GATE, create_group, deploy_members
from _stack import Stack, add_stack_args

QUESTION = "Should we move the team to a four-day week?"


class Results:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cycles: list[float] = []
        self.steps: dict[str, list[float]] = {
            "start (to AWAITING_APPROVAL)": [],
            "approve (to COMPLETED)": [],
        }
        self.errors: Counter[str] = Counter()


def checked(response: Any, status: int, state: str, entries: int, what: str) -> dict[str, Any]:
    if response.status_code != status:
        raise RuntimeError(f"{what}: {response.status_code} {response.text[:200]}")
    body = response.json()
    oks = [e for e in body["transcript"] if e["status"] == "OK"]
    if body["state"] != state or len(oks) != entries or len(body["transcript"]) != entries:
        raise RuntimeError(
            f"{what}: state {body['state']}, {len(oks)} of {len(body['transcript'])} entries OK"
        )
    return body


def one_cycle(group_id: str, alice: Any, approver: Any, results: Results) -> None:
    t0 = time.perf_counter()
    started = alice.post(f"/groups/{group_id}/conversations", json={"question": QUESTION})
    t1 = time.perf_counter()
    body = checked(started, 201, "AWAITING_APPROVAL", TURNS_TO_GATE, "start")
    if body["phaseIndex"] != GATE_INDEX:
        raise RuntimeError(f"start: paused at phase {body['phaseIndex']}, expected {GATE_INDEX}")
    approved = approver.post(
        f"/groups/{group_id}/conversations/{body['discussionId']}/approve?wait=60",
        json={"decision": {"verdict": "APPROVED", "note": "bench"}},
    )
    t2 = time.perf_counter()
    checked(approved, 200, "COMPLETED", TURNS_IN_ALL, "approve")
    with results.lock:
        results.cycles.append(t2 - t0)
        start, approve = results.steps.values()
        start.append(t1 - t0)
        approve.append(t2 - t1)


def client_loop(stack: Stack, group_id: str, window: Window, warmup: int, results: Results) -> None:
    alice, approver = stack.client("alice"), stack.client("approver")
    window.client(
        lambda into: one_cycle(group_id, alice, approver, into),
        warmup=warmup,
        results=results,
        scratch=Results,
    )


def run_ours(args: argparse.Namespace, json_path: str | None) -> None:
    """One stack, one timed window: prints the figures (and writes them to ``json_path``)."""
    with Stack.from_args(args) as stack:
        admin = stack.client("admin")
        group_id = create_group(admin, "bench-group-cycles", deploy_members(admin))
        meter = CostMeter(db=stack.db, groups=stack.process_groups(), count_self=False)
        window = Window(clients=args.clients, duration=args.duration, meter=meter)
        results = Results()
        threads = [
            threading.Thread(target=client_loop, args=(stack, group_id, window, args.warmup, results))
            for _ in range(args.clients)
        ]
        for thread in threads:
            thread.start()
        window.wait()
        for thread in threads:
            thread.join()
    meter.end_transactions()
    wall, cycles = meter.wall, len(results.cycles)
    load = f"[load {meter.load_before:.2f} -> {meter.load_after:.2f}]"

    print(machine_line())
    print(
        f"group cycles: {args.clients} clients for {args.duration:.0f} s, {stack.describe_server()}, "
        f"{'q-cluster ' + str(args.q_workers) + ' workers' if args.qcluster else 'no q-cluster'}; "
        f"3 members, OPINION -> CHALLENGE (PHASE gate) -> SYNTHESIS, {TURNS_IN_ALL} member turns a cycle"
    )
    print(
        f"throughput: {cycles / wall:.1f} cycles/s ({cycles} cycles in {wall:.1f} s, "
        f"{2 * cycles / wall:.0f} req/s, {TURNS_IN_ALL * cycles / wall:.0f} member turns/s) {load}"
    )
    print(format_latency("cycle latency", results.cycles) + f" {load}")
    for name, samples in results.steps.items():
        print(format_latency(f"  {name}", samples) + f" {load}")
    for line in meter.lines(cycles):
        print(line)
    per_turn = {
        "xact_per_member_turn": meter.figures["xact_per_cycle"] / TURNS_IN_ALL,
        "cpu_ms_per_member_turn": meter.figures["cpu_ms_per_cycle"] / TURNS_IN_ALL,
    }
    meter.figures.update(per_turn)
    print(
        f"per member turn: {per_turn['xact_per_member_turn']:.1f} transactions, "
        f"{per_turn['cpu_ms_per_member_turn']:.1f} ms CPU (a cycle's over its {TURNS_IN_ALL} member turns, "
        f"the discussion's start, gate, approval and end shared among them) {load}"
    )
    report_figures(
        errors=results.errors,
        cycles=cycles,
        wall=wall,
        cycle_samples=results.cycles,
        resume_samples=results.steps["approve (to COMPLETED)"],
        meter=meter,
        json_path=json_path,
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "-c", "--clients", type=int, default=4, help="concurrent clients (threads), default 4"
    )
    parser.add_argument("-d", "--duration", type=float, default=15.0, help="seconds of cycles (default 15)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed cycles per client first (default 2)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures to PATH")
    add_peer_args(parser)
    add_stack_args(parser, workers=2, server="gunicorn", qcluster=False)  # docs/operations.md's REST topology
    args = parser.parse_args()
    args.nodelay = args.nodelay or (args.server == "uvicorn" and args.workers > 1)
    if args.with_peer:
        return run_with_peer(args, run_ours)
    run_ours(args, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
