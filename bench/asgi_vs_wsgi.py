#!/usr/bin/env python
"""The same REST turns served by uvicorn (ASGI) and by gunicorn (WSGI), side by side.

Sync Django views under ASGI run on Django's thread-sensitive executor; under a WSGI server they run
directly in the worker. This measures what that costs for `say` ("hello", a rules-only pipeline), with
--workers processes for each server on the same database (connection pool on, TCP_NODELAY on for
uvicorn), from 1 and from --clients concurrent keep-alive clients. The topology question (one ASGI server for everything, or
a WSGI server for REST/admin beside an ASGI server for streams and MCP) is discussed in
docs/operations.md.

    .venv/bin/python bench/asgi_vs_wsgi.py [--workers 2 --requests 300 --clients 4]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import threading
import time

import httpx
from _figures import machine_line, print_latency
from _stack import ROOT, Stack, add_stack_args, database_url, free_port, stop_group


def start_gunicorn(stack: Stack, workers: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen(
        [
            str(ROOT / ".venv/bin/gunicorn"),
            "hitl_project.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=stack.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return process, url
        except httpx.HTTPError:
            time.sleep(0.2)
    raise RuntimeError("gunicorn did not become healthy")


def say_loop(url: str, token: str, agent_id: str, requests: int, out: list[float]) -> None:
    with httpx.Client(base_url=url, headers={"Authorization": f"Token {token}"}, timeout=30) as client:
        conversation = client.post(f"/agents/{agent_id}/start").json()["conversationId"]
        for _ in range(requests):
            started = time.perf_counter()
            client.post(f"/agents/{conversation}", json={"input": "hello"}).raise_for_status()
            out.append(time.perf_counter() - started)


def measure(url: str, stack: Stack, requests: int, clients: int) -> tuple[list[float], float]:
    samples: list[float] = []
    threads = [
        threading.Thread(
            target=say_loop, args=(url, stack.tokens["alice"], stack.agent_id, requests // clients, samples)
        )
        for _ in range(clients)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return samples, len(samples) / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--clients", type=int, default=4)
    add_stack_args(parser, workers=2, qcluster=False)
    args = parser.parse_args()
    os.environ["DATABASE_URL"] = database_url(args.db)
    print(machine_line())
    with Stack.from_args(args, nodelay=True) as stack:
        gunicorn, wsgi_url = start_gunicorn(stack, args.workers)
        try:
            for label, url in (("ASGI uvicorn", stack.url), ("WSGI gunicorn", wsgi_url)):
                for clients in (1, args.clients):
                    samples, rate = measure(url, stack, args.requests, clients)
                    print_latency(
                        f"{label}, {args.workers} workers, {clients} client(s): say ({rate:.0f} req/s)",
                        samples,
                    )
        finally:
            stop_group(gunicorn)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
