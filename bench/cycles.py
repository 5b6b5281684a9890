#!/usr/bin/env python
"""Full pause -> decision -> continuation cycles per second against a live server.

A cycle (3 requests): alice starts a conversation, says "please delete my account" (the rules pause
it: AWAITING_HUMAN), the approver resumes it with `?wait=10`, which returns the continued snapshot
once the q-cluster ran the continuation; the cycle counts if its output is "Deletion APPROVED.".
C clients (one thread each, keep-alive connections) run cycles back to back for D seconds.

    .venv/bin/python bench/cycles.py                          # 4 clients, 20 s, 1 uvicorn worker
    .venv/bin/python bench/cycles.py --workers 2 --nodelay    # two workers with TCP_NODELAY
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections import Counter

from _stack import Stack, add_stack_args, machine_line, print_latency, say, start_conversation


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
    response = approver.post(f"/agents/{conversation_id}/resume", params={"wait": 10},
                             json={"verdict": "APPROVED", "note": "bench"})
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


def client_loop(stack: Stack, until: float, results: Results) -> None:
    alice, approver = stack.client("alice"), stack.client("approver")
    while time.perf_counter() < until:
        try:
            one_cycle(stack, alice, approver, results)
        except Exception as exc:  # count and go on: the figures say how many failed
            with results.lock:
                results.errors[str(exc)[:160]] += 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-c", "--clients", type=int, default=4, help="concurrent clients (threads), default 4")
    parser.add_argument("-d", "--duration", type=float, default=20.0, help="seconds of cycles (default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed cycles first (default 3)")
    add_stack_args(parser)
    args = parser.parse_args()

    with Stack.from_args(args) as stack:
        warm = Results()
        alice, approver = stack.client("alice"), stack.client("approver")
        for _ in range(args.warmup):
            one_cycle(stack, alice, approver, warm)
        results = Results()
        start = time.perf_counter()
        until = start + args.duration
        threads = [threading.Thread(target=client_loop, args=(stack, until, results)) for _ in range(args.clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - start

    print(machine_line())
    print(f"cycles: {args.clients} clients for {args.duration:.0f} s, uvicorn --workers {args.workers}"
          f"{' +TCP_NODELAY' if args.nodelay else ''}, q-cluster {args.q_workers} workers")
    print(f"throughput: {len(results.cycles) / wall:.1f} cycles/s ({len(results.cycles)} cycles in {wall:.1f} s, "
          f"{3 * len(results.cycles) / wall:.0f} req/s)")
    print_latency("cycle latency", results.cycles)
    for name, samples in results.phases.items():
        print_latency(f"  {name}", samples)
    print(f"errors: {sum(results.errors.values())}")
    for message, count in results.errors.most_common(5):
        print(f"  {count} x {message}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
