#!/usr/bin/env python
"""Audit export in constant memory: stream GET /audit/export of 1,000,000 entries through live uvicorn.

Fills the audit ledger of a bench database (default ``hitl_bench_audit``) with --rows entries by one
`INSERT ... SELECT generate_series` (synthetic rows of realistic size; their hashes are not a valid
chain, which the export does not care about), starts uvicorn on it, and downloads exports with httpx
as a staff user, each time sampling the server process's resident memory (/proc/PID/status) every
20 ms. For each export it prints time to first byte, total time, size, rows/s, MB/s, and the server's
RSS before and at its peak. A smaller export (the first tenth of the rows, by `until`) runs first, so
the two peaks show whether memory grows with the size of the export.

    .venv/bin/python bench/audit_export.py                  # 1,000,000 entries, CSV and JSON Lines
    .venv/bin/python bench/audit_export.py --rows 200000 --format jsonl
    .venv/bin/python bench/audit_export.py --fresh          # drop and refill the bench database

Nothing is asserted; the figures go into docs/audit.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg

ROOT = Path(__file__).resolve().parent.parent
PYTHON = (
    str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable
)
PG = "host=127.0.0.1 port=5432 user=postgres"
START = "2026-01-01T00:00:00Z"

INSERT_ENTRIES = """
INSERT INTO approvals_auditentry (subject_type, subject_id, sequence, conversation_id, pause_id, epoch,
    verb, actor, automated, verdict, note, detail, created_at, prev_hash, entry_hash)
SELECT 'conversation', md5('subject' || (g / 4))::uuid, g %% 4 + 1, md5('subject' || (g / 4))::uuid,
       md5('pause' || (g / 4))::uuid, md5('epoch' || (g / 4))::uuid,
       (ARRAY['hitl.pause', 'hitl.approval', 'hitl.approval', 'hitl.continuation.discarded'])[g %% 4 + 1],
       (ARRAY['system:pipeline', 'approver', 'alice', 'system:continuation'])[g %% 4 + 1],
       g %% 4 IN (0, 3), (ARRAY['', 'APPROVED', 'REJECTED', ''])[g %% 4 + 1],
       CASE WHEN g %% 4 = 1 THEN 'Checked with the account owner, ok to delete.' ELSE '' END,
       jsonb_build_object('pauseType', 'RULE', 'agentId', md5('agent')::uuid, 'agentVersion', 3,
                          'owner', 'alice', 'reason', 'Account deletion requires manager sign-off',
                          'actions', jsonb_build_array('PAUSE_CONVERSATION', 'confirm_deletion')),
       timestamptz '2026-01-01' + g * interval '1 second', md5(g::text) || md5((g + 7)::text),
       md5((g + 1)::text) || md5((g + 8)::text)
FROM generate_series(0, %(rows)s - 1) AS g
"""


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def prepare_database(db: str, rows: int, *, fresh: bool) -> None:
    with psycopg.connect(f"{PG} dbname=postgres", autocommit=True) as conn:
        if fresh:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db,)).fetchone():
            conn.execute(f'CREATE DATABASE "{db}"')
    manage(db, "migrate", "--noinput", "-v0")
    with psycopg.connect(f"{PG} dbname={db}", autocommit=True) as conn:
        have = conn.execute("SELECT count(*) FROM approvals_auditentry").fetchone()[0]
        if have == rows:
            log(f"{db}: {rows:,} audit entries already there")
            return
        started = time.monotonic()
        # The ledger refuses DELETE; TRUNCATE only when the session asks for it on purpose.
        conn.execute("SET hitl.audit_truncate = 'allow'")
        conn.execute("TRUNCATE approvals_auditentry, approvals_audithead")
        conn.execute(INSERT_ENTRIES, {"rows": rows})
        conn.execute("ANALYZE approvals_auditentry")
        log(f"{db}: inserted {rows:,} audit entries in {time.monotonic() - started:.1f} s")


def env_for(db: str) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{db}",
        "DJANGO_SETTINGS_MODULE": "hitl_project.settings.base",
        "LOG_LEVEL": "WARNING",
    }


def manage(db: str, *argv: str) -> str:
    result = subprocess.run(
        [PYTHON, "manage.py", *argv], cwd=ROOT, env=env_for(db), capture_output=True, text=True
    )
    if result.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(argv)} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class RssSampler(threading.Thread):
    """Samples a process's resident set size until stopped; keeps the peak."""

    def __init__(self, pid: int, interval: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak = 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            self.peak = max(self.peak, rss_kib(self.pid))
            time.sleep(self.interval)

    def stop(self) -> int:
        self._done.set()
        self.join()
        return self.peak


def export_once(client: httpx.Client, pid: int, params: dict[str, str], label: str) -> dict[str, Any]:
    before = rss_kib(pid)
    sampler = RssSampler(pid)
    sampler.start()
    started = time.monotonic()
    first_byte = None
    size = lines = 0
    with client.stream("GET", "/audit/export", params=params) as response:
        response.raise_for_status()
        for chunk in response.iter_raw():
            if first_byte is None:
                first_byte = time.monotonic() - started
            size += len(chunk)
            lines += chunk.count(b"\n")
    elapsed = time.monotonic() - started
    peak = sampler.stop()
    rows = lines - 1 if params["format"] == "csv" else lines  # CSV: minus the header
    print(
        f"{label}: {rows:,} rows, {size / 1e6:,.1f} MB in {elapsed:.1f} s "
        f"(first byte after {first_byte or 0:.2f} s) = {rows / elapsed:,.0f} rows/s, {size / 1e6 / elapsed:.1f} MB/s; "
        f"server RSS {before / 1024:.0f} MiB before, peak {peak / 1024:.0f} MiB",
        flush=True,
    )
    return {"rows": rows, "peak_kib": peak, "before_kib": before}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--format", choices=["csv", "jsonl", "both"], default="both")
    parser.add_argument("--db", default="hitl_bench_audit")
    parser.add_argument("--fresh", action="store_true", help="drop and recreate the bench database")
    args = parser.parse_args()

    cpu = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")),
        "unknown CPU",
    )  # fmt: skip
    print(f"machine: {os.cpu_count()} cores, {cpu}, Python {platform.python_version()}", flush=True)
    prepare_database(args.db, args.rows, fresh=args.fresh)
    token = manage(args.db, "hitl_user", "bench-auditor", "--role", "admin").strip().splitlines()[-1]

    port = free_port()
    log_path = ROOT / "var" / "log" / "bench-audit-export-uvicorn.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as output:
        server = subprocess.Popen(
            [PYTHON, "-m", "uvicorn", "hitl_project.asgi:application", "--host", "127.0.0.1", "--port", str(port),
             "--log-level", "warning", "--no-access-log"],
            cwd=ROOT, env=env_for(args.db), stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        base_url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"uvicorn did not start; see {log_path}")
            try:
                if httpx.get(f"{base_url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        log(f"uvicorn (pid {server.pid}) on {base_url}")
        tenth_until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1767225600 + args.rows // 10))
        formats = ["csv", "jsonl"] if args.format == "both" else [args.format]
        headers = {"Authorization": f"Token {token}"}
        with httpx.Client(base_url=base_url, headers=headers, timeout=600) as client:
            client.get(
                "/audit/export", params={"format": "csv", "actor": "nobody"}
            ).raise_for_status()  # warm up
            for export_format in formats:
                export_once(
                    client,
                    server.pid,
                    {"format": export_format, "until": tenth_until},
                    f"{export_format} (a tenth)",
                )
                export_once(client, server.pid, {"format": export_format}, f"{export_format} (all)")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)


if __name__ == "__main__":
    main()
