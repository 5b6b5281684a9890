#!/usr/bin/env python
"""What each web server costs per request on its own: server CPU per request of a minimal WSGI
application, under each server the project runs, driven by raw-socket clients on loopback.

The application (``_minimal_wsgi.py``) answers every request with the same small JSON body as Django's
``HttpResponse`` (about the size of a decision's answer) and does nothing else, so what each request
costs is the server's own work: accepting, parsing, building the environ, writing the answer, closing or
keeping the connection, and the kernel's side of it. The servers, as the project runs them:

- ``granian``: its WSGI interface, ``--workers W --blocking-threads 2`` (docs/operations.md's
  recommendation for the REST API alone);
- ``gunicorn``: ``--workers 2W`` sync workers (one request at a time each, the connection closed after
  it), and ``gunicorn-gthread``: ``--workers W --threads 4`` (keep-alive);
- ``uvicorn-fast``: ``--workers W`` on uvloop and httptools with the application on the thread pool of
  ``hitl_project.wsgi_bridge`` (the REST API's path under ``./scripts/start``).

C client threads (``-c``) each send POST requests with a 13-byte JSON body back to back for D seconds,
over one kept-alive connection where the server keeps it (a new connection per request where it closes
it). CPU is user + system of the server's process group from /proc, over the window; the clients' own
CPU is not counted. Rounds interleave the servers. It prints; nothing is asserted.

    .venv/bin/python bench/wsgi_servers.py                  # 4 clients, 10 s, 2 rounds, 2 workers
    .venv/bin/python bench/wsgi_servers.py -d 5 --rounds 1 --servers granian,gunicorn
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

from _cost import load_average
from _figures import machine_line
from _stack import PYTHON, ROOT

HERE = Path(__file__).resolve().parent
BIN = Path(PYTHON).parent
REQUEST = (
    b"POST /agents/a/resume HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b"Authorization: Token 0123456789abcdef\r\nContent-Length: 13\r\n\r\n" + b'{"input":"h"}'
)
TICKS = os.sysconf("SC_CLK_TCK")


def server_argv(name: str, port: int, workers: int) -> list[str]:
    bind = ["--host", "127.0.0.1", "--port", str(port)]
    if name == "granian":
        return [str(BIN / "granian"), "--interface", "wsgi", "_minimal_wsgi:application", *bind,
                "--workers", str(workers), "--blocking-threads", "2", "--log-level", "warning"]  # fmt: skip
    if name.startswith("gunicorn"):
        threads = ["--workers", str(workers), "--threads", "4"] if name == "gunicorn-gthread" else [
            "--workers", str(2 * workers)]  # fmt: skip
        return [str(BIN / "gunicorn"), "_minimal_wsgi:application", "--bind", f"127.0.0.1:{port}", *threads,
                "--log-level", "warning"]  # fmt: skip
    return [PYTHON, "-m", "uvicorn", "_minimal_wsgi:on_thread_pool", *bind, "--workers", str(workers),
            "--loop", "uvloop", "--http", "httptools", "--log-level", "warning", "--no-access-log"]  # fmt: skip


def group_cpu_seconds(pgid: int) -> float:
    ticks = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # the process group, field 5 of stat
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / TICKS


def answer(sock: socket.socket) -> bool:
    """Reads one answer; whether the server keeps the connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the answer")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    headers = {
        name.strip().lower(): value.strip()
        for name, _, value in (line.partition(b":") for line in head.split(b"\r\n")[1:])
    }
    while len(body) < int(headers[b"content-length"]):
        body += sock.recv(65536)
    return headers.get(b"connection", b"").lower() != b"close"


def drive(port: int, clients: int, duration: float) -> int:
    counts = [0] * clients
    deadline = time.monotonic() + duration

    def client(index: int) -> None:
        sock = None
        while time.monotonic() < deadline:
            if sock is None:
                sock = socket.create_connection(("127.0.0.1", port))
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(REQUEST)
            kept = answer(sock)
            counts[index] += 1
            if not kept:
                sock.close()
                sock = None
        if sock is not None:
            sock.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts)


def measure(name: str, port: int, args: argparse.Namespace) -> tuple[int, float]:
    env = {**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{ROOT}"}
    process = subprocess.Popen(
        server_argv(name, port, args.workers), cwd=HERE, env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"{name} did not start") from None
                time.sleep(0.1)
        drive(port, args.clients, 1.0)  # warm up
        before = group_cpu_seconds(process.pid)
        requests = drive(port, args.clients, args.duration)
        return requests, group_cpu_seconds(process.pid) - before
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-c", "--clients", type=int, default=4, help="client threads (default 4)")
    parser.add_argument("-d", "--duration", type=float, default=10.0, help="seconds per run (default 10)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds over the servers (default 2)")
    parser.add_argument("--workers", type=int, default=2, help="W: the servers' workers (default 2)")
    parser.add_argument("--port", type=int, default=8197, help="the servers' port (default 8197)")
    parser.add_argument(
        "--servers",
        default="granian,gunicorn,gunicorn-gthread,uvicorn-fast",
        help="comma-separated (default granian,gunicorn,gunicorn-gthread,uvicorn-fast)",
    )
    args = parser.parse_args()
    servers = [name.strip() for name in args.servers.split(",") if name.strip()]
    print(machine_line())
    print(f"{args.clients} clients, {args.duration:.0f} s per run, W = {args.workers}")
    print("| round | server | requests/s | server CPU per request | load |")
    print("|---|---|---|---|---|")
    for round_no in range(1, args.rounds + 1):
        for name in servers:
            requests, cpu = measure(name, args.port, args)
            print(
                f"| {round_no} | {name} | {requests / args.duration:,.0f} | "
                f"{cpu / max(requests, 1) * 1e6:.0f} µs | {load_average():.2f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
