#!/usr/bin/env python
"""The Python client (clients/python, ``hitl_client``) against the live stack: what a gated call costs an
agent, and what an ungated one costs (nothing: it never reaches the service).

Starts the stack of the other benches (bench/_stack.py: uvicorn with one worker, pool on, database
--db; no q-cluster: a decision's continuation is quick and runs in the deciding request) and a loopback
target, then times, one call at a time, with the 1-minute load average beside each figure:

- **ungated**: ``httpx.Client.send`` of the request straight to the target (what an ungated tool does);
- **execute**: ``HitlClient.execute`` of the same request, gated: file it pinned → a scripted reviewer
  approves it the moment it is filed (handed over in process: the reviewer adds no polling) → wait →
  claim with the approved request → send → report the outcome. The human's time is left out;
- **require_approval**: a gated function (a no-op) called through ``HitlClient.require_approval``,
  against the same function called directly.

    .venv/bin/python bench/python_client.py                 # 200 calls each, ~1 min
    .venv/bin/python bench/python_client.py --calls 20      # quick

It exits 1 when a gated call did not send exactly once or a check failed, else 0.
"""

from __future__ import annotations

import argparse
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
from _figures import format_latency, machine_line
from _service_accounts import load, run_id, service_account_tokens
from _stack import ROOT, UNTHROTTLED, Stack, add_stack_args, database_url
from hitl_client import HitlClient


def setup_django(db: str) -> None:
    """The ORM of this process on the bench database (the service accounts are made with it)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_project.settings.base")
    os.environ["DATABASE_URL"] = database_url(db)
    os.environ.update(UNTHROTTLED)
    os.environ.pop("HITL_DB_POOL", None)
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import django

    django.setup()


class HandingClient(HitlClient):
    """The client, handing each request it files to the scripted reviewer."""

    def __init__(self, *args: Any, filed: queue.Queue[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._filed = filed

    def request_approval(self, **kwargs: Any) -> Any:
        found = super().request_approval(**kwargs)
        self._filed.put(found.id)
        return found


def reviewer(url: str, token: str, filed: queue.Queue[str], stop: threading.Event) -> threading.Thread:
    def decide() -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Token {token}"}, timeout=30) as client:
            while not stop.is_set():
                try:
                    request_id = filed.get(timeout=0.2)
                except queue.Empty:
                    continue
                client.post(f"/approval-requests/{request_id}/decision", json={"verdict": "APPROVED"})

    thread = threading.Thread(target=decide, daemon=True)
    thread.start()
    return thread


def timed(calls: int, call: Callable[[int], Any]) -> tuple[list[float], float, float]:
    before = load()
    samples = []
    for number in range(calls):
        started = time.perf_counter()
        call(number)
        samples.append(time.perf_counter() - started)
    return samples, before, load()


def figure(label: str, run: tuple[list[float], float, float]) -> None:
    samples, before, after = run
    print(f"{format_latency(label, samples)}  [load {before:.2f} -> {after:.2f}]", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=200, help="timed calls of each kind (default 200)")
    add_stack_args(parser)
    args = parser.parse_args()
    args.qcluster = False
    print(machine_line())
    setup_django(args.db)
    from harnesses.echo_target import running_echo_target  # local import: needs Django set up

    errors = 0
    with Stack.from_args(args) as stack, running_echo_target() as target:
        print(f"{stack.describe_server()}, pool on, database {stack.db}")
        [token] = service_account_tokens("bench-client-agent", 1)
        filed: queue.Queue[str] = queue.Queue()
        stop = threading.Event()
        thread = reviewer(stack.url, stack.tokens["approver"], filed, stop)
        run = run_id()

        def request(number: int) -> httpx.Request:
            return httpx.Request(
                "POST",
                f"{target.url}/refunds/{run}/{number}",
                json={"amount": number},
                headers={"Authorization": "Bearer sk-live-bench"},
            )

        with HandingClient(stack.url, token, agent="bench", filed=filed) as hitl, httpx.Client() as sender:
            figure(
                "ungated: send straight to the target", timed(args.calls, lambda n: sender.send(request(n)))
            )
            sent_before = len(target.received)

            def gated(number: int) -> None:
                hitl.execute(
                    request(number),
                    run_id=run,
                    call_id=f"x{number}",
                    action="refund",
                    reason="bench",
                    sender=sender,
                    timeout=30,
                )

            figure("execute: file, approved at once, claim, send, report", timed(args.calls, gated))
            sent = len(target.received) - sent_before
            if sent != args.calls:
                print(f"errors: {sent} requests reached the target for {args.calls} gated calls")
                errors += 1

            def noop(number: int) -> int:
                return number

            gated_noop = hitl.require_approval(reason="bench", run_id=f"{run}-fn")(noop)
            figure("ungated function, called directly", timed(args.calls, noop))
            figure(
                "require_approval: file, approved at once, claim, run, report", timed(args.calls, gated_noop)
            )
        stop.set()
        thread.join(5)
    print(f"\nerrors in all: {errors}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
