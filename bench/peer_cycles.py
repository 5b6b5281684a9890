#!/usr/bin/env python
"""The peer's approval cycle (LangGraph interrupt -> resume on PostgresSaver), measured like cycles.py.

Runs with the peer's virtualenv, bench/peer/.venv (``bench/peer/setup`` makes it; compare_peer.py runs
this script with it):

    bench/peer/.venv/bin/python bench/peer_cycles.py -c 4 -d 15 --db lgbench
    bench/peer/.venv/bin/python bench/peer_cycles.py -c 4 -d 15 --db lgbench --in-process

Over HTTP: the peer's FastAPI app (bench/peer/server.py) under ``uvicorn --workers 2`` (a PostgresSaver
per request thread on the worker's pool of 4 connections, TCP_NODELAY set), each route checking a bearer
token. A cycle is its 4 requests: POST /threads, POST say (runs to the interrupt), POST resume (runs to
the end, answers the final state), GET the state, each answer checked. In process: C threads, each with
its own connection, PostgresSaver and compiled graph (bench/peer/graph.py); a cycle is ``pause`` (invoke
until the interrupt) then ``resume`` (invoke ``Command(resume=...)`` to the end).

C clients each run --warmup untimed cycles, then cycles back to back for D seconds; the figures are those of
cycles.py (CostMeter in _stack.py): cycles/s, cycle and resume latency, transactions and CPU per cycle.
The database's LangGraph tables are dropped and created afresh at the start.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _cost import CostMeter, Window, report_figures
from _figures import machine_line, print_latency
from _stack import LOG_DIR, conninfo, free_port, raise_exit, stop_group

HERE = Path(__file__).resolve().parent
PEER_VENV = HERE / "peer" / ".venv"
TOKEN = "peer-cycles-token"


class Results:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cycles: list[float] = []
        self.resumes: list[float] = []
        self.errors: Counter[str] = Counter()

    def add(self, cycle: float, resume: float) -> None:
        with self.lock:
            self.cycles.append(cycle)
            self.resumes.append(resume)


class PeerServer:
    """uvicorn serving the peer's app, in its own process group; stopped with the group."""

    def __init__(self, *, dsn: str, port: int, workers: int) -> None:
        self.port, self.workers = port, workers
        self.url = f"http://127.0.0.1:{port}"
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.log_path = LOG_DIR / "bench-peer-uvicorn.log"
        env = dict(
            os.environ,
            PEER_DSN=dsn,
            PEER_TOKEN=TOKEN,
            PEER_POOL="4",
            PYTHONDONTWRITEBYTECODE="1",
        )
        argv = [
            sys.executable,
            "-m",
            "uvicorn",
            "peer.server:app",
            "--app-dir",
            str(HERE),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            str(workers),
            "--http",
            "peer.server:NoDelayProtocol",
            "--loop",
            "asyncio",
            "--no-access-log",
            "--log-level",
            "info",
        ]
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                argv,
                cwd=HERE,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def wait_ready(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = self.log_path.read_text()[-3000:]
                raise RuntimeError(f"peer uvicorn exited with {self.proc.returncode}:\n{tail}")
            if self.log_path.read_text().count("Application startup complete.") >= self.workers:
                return
            time.sleep(0.1)
        raise RuntimeError(f"peer uvicorn not ready within {timeout:.0f} s")

    def stop(self) -> None:
        stop_group(self.proc)


def http_cycle(client: Any, results: Results) -> None:
    def check(response: Any, status: int, what: str) -> dict[str, Any]:
        if response.status_code != status:
            raise RuntimeError(f"{what}: {response.status_code} {response.text[:200]}")
        return response.json()

    t0 = time.perf_counter()
    thread_id = check(client.post("/threads"), 201, "create")["thread_id"]
    said = check(
        client.post(f"/threads/{thread_id}/say", json={"text": "  please delete file x  "}), 200, "say"
    )
    if [i["value"] for i in said["interrupts"]] != [{"reason": "approve delete"}]:
        raise RuntimeError(f"say: interrupts {said['interrupts']}")
    t1 = time.perf_counter()
    resumed = check(client.post(f"/threads/{thread_id}/resume", json={"verdict": "APPROVED"}), 200, "resume")
    t2 = time.perf_counter()
    if resumed["state"].get("acted") is not True:
        raise RuntimeError(f"resume: state {resumed['state']}")
    state = check(client.get(f"/threads/{thread_id}"), 200, "get")
    if state["next"] or state["interrupts"] or state["values"].get("acted") is not True:
        raise RuntimeError(f"get: {state}")
    results.add(time.perf_counter() - t0, t2 - t1)


def in_process_cycle(graph: Any, results: Results) -> None:
    from peer.graph import new_thread_id, pause, resume

    thread_id = new_thread_id()
    t0 = time.perf_counter()
    pause(graph, thread_id)
    t1 = time.perf_counter()
    resume(graph, thread_id)
    t2 = time.perf_counter()
    results.add(t2 - t0, t2 - t1)


def client_loop(window: Window, warmup: int, results: Results, *, dsn: str, url: str | None) -> None:
    """One client: an httpx client over HTTP, or its own connection + PostgresSaver + graph in process."""
    if url:
        import httpx

        resource = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30.0)
        cycle = lambda into: http_cycle(resource, into)  # noqa: E731
    else:
        from langgraph.checkpoint.postgres import PostgresSaver
        from peer.graph import build_graph, connect

        resource = connect(dsn)
        graph = build_graph(PostgresSaver(resource))
        cycle = lambda into: in_process_cycle(graph, into)  # noqa: E731
    try:
        for _ in range(warmup):
            try:
                cycle(Results())
            except Exception as exc:
                with results.lock:
                    results.errors[f"warm-up: {str(exc)[:150]}"] += 1
        window.ready.wait()
        while time.perf_counter() < window.until:
            try:
                cycle(results)
            except Exception as exc:  # count and go on: the figures say how many failed
                with results.lock:
                    results.errors[str(exc)[:160]] += 1
        window.finished.wait()
    finally:
        resource.close()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "-c", "--clients", type=int, default=4, help="concurrent clients (threads), default 4"
    )
    parser.add_argument("-d", "--duration", type=float, default=20.0, help="seconds of cycles (default 20)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed cycles per client first (default 2)")
    parser.add_argument("--in-process", action="store_true", help="the graph in this process instead of HTTP")
    parser.add_argument("--workers", type=int, default=2, help="uvicorn workers (default 2)")
    parser.add_argument("--port", type=int, default=0, help="uvicorn port (default: a free one)")
    parser.add_argument("--db", default="lgbench", help="database name (default lgbench; made when missing)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures to PATH (for compare_peer.py)")
    args = parser.parse_args()
    from peer.graph import ensure_database, reset_schema

    dsn = conninfo(args.db)
    ensure_database(dsn, args.db)
    reset_schema(dsn)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, raise_exit)

    server = None
    results = Results()
    try:
        if not args.in_process:
            server = PeerServer(dsn=dsn, port=args.port or free_port(), workers=args.workers)
            server.wait_ready()
        meter = CostMeter(
            db=args.db, groups={"uvicorn": server.proc.pid} if server else {}, count_self=args.in_process
        )
        window = Window(clients=args.clients, duration=args.duration, meter=meter)
        threads = [
            threading.Thread(
                target=client_loop,
                args=(window, args.warmup, results),
                kwargs={"dsn": dsn, "url": server.url if server else None},
            )
            for _ in range(args.clients)
        ]
        for thread in threads:
            thread.start()
        window.wait()
        for thread in threads:
            thread.join()
    finally:
        if server is not None:
            server.stop()
    meter.end_transactions()
    wall = meter.wall
    cycles = len(results.cycles)

    print(machine_line())
    where = (
        "IN PROCESS (own connection + PostgresSaver per thread)"
        if args.in_process
        else f"FastAPI + uvicorn --workers {args.workers} (a saver per request thread, TCP_NODELAY)"
    )
    print(
        f"peer cycles (LangGraph interrupt -> resume): {args.clients} clients for {args.duration:.0f} s, "
        f"{where}"
    )
    requests = "" if args.in_process else f", {4 * cycles / wall:.0f} req/s"
    print(
        f"throughput: {cycles / wall:.1f} cycles/s ({cycles} cycles in {wall:.1f} s{requests}) "
        f"[load {meter.load_before:.2f} -> {meter.load_after:.2f}]"
    )
    print_latency("cycle latency", results.cycles)
    print_latency("  resume", results.resumes)
    for line in meter.lines(cycles):
        print(line)
    report_figures(
        errors=results.errors,
        cycles=cycles,
        wall=wall,
        cycle_samples=results.cycles,
        resume_samples=results.resumes,
        meter=meter,
        json_path=args.json,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
