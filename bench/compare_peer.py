#!/usr/bin/env python
"""Ours and the peer (LangGraph interrupt -> resume on PostgresSaver) side by side, interleaved.

1. sets up the peer: bench/peer/setup makes its virtualenv, bench/peer/.venv, from the pinned
   bench/peer/requirements.txt; run only when that python cannot import the peer yet, or with --setup
   (it installs from the package index);
2. runs, --rounds times (default 2), each scenario as its own script with the same clients and
   duration: peer over HTTP, ours over HTTP (once per --servers entry), peer in process, ours in process
   through Django's WSGI handler (the REST views, no HTTP) and through the services the views call
   (cycles.py --services: no HTTP and no DRF, the level of the peer's graph.invoke) (peer_cycles.py
   under the peer's python, cycles.py under ours; each stops what it started);
   Both sides start every run on empty tables: peer_cycles.py empties the checkpointer's, and ours runs
   on its database dropped and migrated afresh (cycles.py --fresh);
3. prints every figure of every run with the 1-minute load average at its end, and the ratios
   ours/peer of the means of the rounds: cycles/s (higher is better), CPU and transactions per
   cycle, cycle and resume latency (lower is better).

Ours runs on each of --servers (default: granian, its WSGI interface serving the REST API alone as
docs/operations.md recommends, and uvicorn-fast, uvicorn on uvloop and httptools as ./scripts/start runs
it: the one server for everything, the REST API through Django's WSGI handler on its thread pool;
"uvicorn" is the same on h11, with TCP_NODELAY when W > 1; "gunicorn", its sync WSGI workers), W workers
each (granian with --granian-threads blocking threads each, default 2) but gunicorn, which runs
--gunicorn-workers (default 4: a sync worker serves one request at a time and closes its connection
after it), and a q-cluster with
--q-workers; the peer `uvicorn --workers W` (--peer-workers to change it; bench/peer/server.py: a saver
per request thread, TCP_NODELAY). Nothing is asserted: it prints. About 4-5 minutes with the defaults.

    .venv/bin/python bench/compare_peer.py                        # 4 clients, 15 s, 2 rounds
    .venv/bin/python bench/compare_peer.py -d 10 --rounds 1 --db hitl_bench_me --peer-db lgbench_me
    .venv/bin/python bench/compare_peer.py -c 1 -d 3 --rounds 1 --servers uvicorn   # a quick check
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _cost import load_average
from _figures import machine_line
from _stack import DEFAULT_DB, LOG_DIR, PYTHON, ROOT, stop_group
from peer_cycles import PEER_VENV

HERE = Path(__file__).resolve().parent
SERVERS = ("granian", "uvicorn-fast", "uvicorn", "gunicorn")


def scenarios(servers: list[str]) -> list[tuple[str, str]]:
    """(side, mode) in the order they run; ours over HTTP once per server ("HTTP gunicorn")."""
    return [
        ("peer", "HTTP"),
        *[("ours", f"HTTP {server}") for server in servers],
        ("peer", "in process"),
        ("ours", "in process"),
        ("ours", "in process services"),
    ]


# (key in the figures, label, unit, decimals)
FIGURES = (
    ("cycles_per_s", "cycles/s", "", 1),
    ("cpu_ms_per_cycle", "CPU per cycle", " ms", 1),
    ("xact_per_cycle", "transactions per cycle", "", 1),
    ("cycle_p50_ms", "cycle p50", " ms", 0),
    ("cycle_p95_ms", "cycle p95", " ms", 0),
    ("resume_p50_ms", "resume p50", " ms", 1),
    ("resume_p95_ms", "resume p95", " ms", 1),
)


def peer_python(venv: Path) -> str:
    return str(venv / "bin" / "python")


def peer_ready(venv: Path) -> bool:
    probe = "import langgraph.checkpoint.postgres, fastapi, uvicorn, httpx"
    return (
        Path(peer_python(venv)).exists()
        and subprocess.run([peer_python(venv), "-c", probe], capture_output=True).returncode == 0
    )


SETUP = HERE / "peer" / "setup"


def set_up_peer(venv: Path, force: bool) -> None:
    if peer_ready(venv) and not force:
        print(f"peer: virtualenv {venv} ready (--setup runs bench/peer/setup again)", flush=True)
        return
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log = LOG_DIR / "compare-peer-setup.log"
    print(f"peer: {SETUP} (log {log}) ...", flush=True)
    with open(log, "w") as out:
        done = subprocess.run([str(SETUP)], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0 or not peer_ready(venv):
        sys.exit(f"peer setup failed ({done.returncode}):\n{log.read_text()[-3000:]}")


def peer_versions(venv: Path) -> str:
    code = (
        "from importlib.metadata import version as v; "
        "print(', '.join(f'{p} {v(p)}' for p in ('langgraph', 'langgraph-checkpoint-postgres', 'psycopg', "
        "'fastapi', 'uvicorn')))"
    )
    return subprocess.run([peer_python(venv), "-c", code], capture_output=True, text=True).stdout.strip()


def workers_of(side: str, mode: str, args: argparse.Namespace) -> int:
    """The web server workers of a scenario: the peer's, gunicorn's, or W."""
    if side == "peer":
        return args.peer_workers or args.workers
    return args.gunicorn_workers if mode == "HTTP gunicorn" else args.workers


def command(side: str, mode: str, args: argparse.Namespace, out: Path) -> list[str]:
    common = [
        "-c",
        str(args.clients),
        "-d",
        str(args.duration),
        "--workers",
        str(workers_of(side, mode, args)),
        "--json",
        str(out),
    ]
    if mode == "HTTP granian":
        common += ["--threads", str(args.granian_threads)]
    if mode == "in process":
        common.append("--in-process")
    elif mode == "in process services":
        common.append("--services")
    if side == "peer":
        return [
            peer_python(args.peer_venv),
            str(HERE / "peer_cycles.py"),
            *common,
            "--db",
            args.peer_db,
        ]
    server = mode.split(" ", 1)[1] if mode.startswith("HTTP ") else "uvicorn"
    nodelay = ["--nodelay"] if args.workers > 1 and server == "uvicorn" else []
    return [
        PYTHON,
        str(HERE / "cycles.py"),
        *common,
        "--db",
        args.db,
        "--q-workers",
        str(args.q_workers),
        "--server",
        server,
        *nodelay,
        "--fresh",  # every run on empty tables, as the peer's (peer_cycles.py empties its tables first)
    ]


def run(argv: list[str], *, timeout: float, log: Path) -> str | None:
    """Runs one scenario in its own process group; its stdout is returned (None if it failed), its
    stderr goes to ``log``."""
    with open(log, "w") as err:
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        try:
            stdout, _ = proc.communicate(timeout=timeout)
        except BaseException:  # timeout, Ctrl-C, SIGTERM: stop it (it stops its own stack on SIGTERM)
            stop_group(proc, grace=30)
            raise
    if proc.returncode != 0:
        print(f"  FAILED: exited with {proc.returncode}; {log}:\n{log.read_text()[-2000:]}", flush=True)
        return None
    return stdout


def cell(run: dict | None, key: str, decimals: int) -> str:
    if run is None:
        return "failed"
    return "-" if math.isnan(run[key]) else f"{run[key]:.{decimals}f} ({run['load1_after']:.2f})"


def mean(runs: list[dict | None], key: str) -> float:
    values = [r[key] for r in runs if r is not None and not math.isnan(r[key])]
    return statistics.fmean(values) if values else math.nan


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "-c", "--clients", type=int, default=4, help="client threads of every run (default 4)"
    )
    parser.add_argument("-d", "--duration", type=float, default=15.0, help="seconds of each run (default 15)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the four scenarios (default 2)")
    parser.add_argument("--workers", type=int, default=2, help="uvicorn workers of both (default 2)")
    parser.add_argument(
        "--gunicorn-workers",
        type=int,
        default=4,
        help="our gunicorn's sync workers (default 4, as docs/operations.md recommends)",
    )
    parser.add_argument(
        "--granian-threads",
        type=int,
        default=2,
        help="blocking threads of each granian worker (default 2, as docs/operations.md recommends)",
    )
    parser.add_argument(
        "--peer-workers", type=int, default=0, help="the peer's uvicorn workers (default: --workers)"
    )
    parser.add_argument("--q-workers", type=int, default=2, help="our q-cluster's workers (default 2)")
    parser.add_argument("--db", default=DEFAULT_DB, help=f"our database (default {DEFAULT_DB})")
    parser.add_argument("--peer-db", default="lgbench", help="the peer's database (default lgbench)")
    parser.add_argument(
        "--peer-venv", type=Path, default=PEER_VENV, help="the peer's virtualenv (default bench/peer/.venv)"
    )
    parser.add_argument(
        "--setup", action="store_true", help="run bench/peer/setup even if the peer's virtualenv works"
    )
    parser.add_argument(
        "--servers",
        default="granian,uvicorn-fast",
        help="our web servers over HTTP, comma-separated: granian (its WSGI interface, the REST API alone), "
        "uvicorn-fast (what ./scripts/start runs: uvloop, httptools), uvicorn (h11), gunicorn (sync "
        "workers) (default granian,uvicorn-fast)",
    )
    args = parser.parse_args()
    servers = [name.strip() for name in args.servers.split(",") if name.strip()]
    if not servers or set(servers) - set(SERVERS):
        parser.error(f"--servers takes {', '.join(SERVERS)}")
    order = scenarios(servers)

    set_up_peer(args.peer_venv, args.setup)
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True
    ).stdout.strip()
    started = time.monotonic()
    load_at_start = load_average()
    results: dict[tuple[str, str], list[dict | None]] = {scenario: [] for scenario in order}
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="compare-peer-") as tmp:
        for round_no in range(1, args.rounds + 1):
            for side, mode in order:
                out = Path(tmp) / f"{side}-{mode.replace(' ', '-')}-{round_no}.json"
                log = LOG_DIR / f"compare-{side}-{mode.replace(' ', '-')}-{round_no}.log"
                print(f"\n== round {round_no}: {side}, {mode} ==", flush=True)
                stdout = run(command(side, mode, args, out), timeout=args.duration + 300, log=log)
                if stdout is not None:
                    print("".join(f"  {line}\n" for line in stdout.splitlines()), end="", flush=True)
                results[(side, mode)].append(json.loads(out.read_text()) if stdout is not None else None)
                time.sleep(1.0)

    print(f"\n# ours and the peer side by side ({datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC)")
    nodelay = " +TCP_NODELAY" if args.workers > 1 else ""
    described = {
        "granian": f"granian --interface wsgi --workers {args.workers} --blocking-threads {args.granian_threads}",
        "gunicorn": f"gunicorn --workers {args.gunicorn_workers} (sync)",
        "uvicorn": f"uvicorn --workers {args.workers}{nodelay}",
        "uvicorn-fast": f"uvicorn --workers {args.workers} (uvloop, httptools: ./scripts/start's)",
    }
    print(
        f"ours: commit {commit}, over HTTP on {' and on '.join(described[s] for s in servers)}, "
        f"in process through Django's WSGI handler (the REST views) and through the services the views call (bench/_services.py); q-cluster {args.q_workers} workers, database {args.db}"
    )
    print(
        f"peer: {peer_versions(args.peer_venv)}; uvicorn --workers {args.peer_workers or args.workers} "
        "(bench/peer/server.py), "
        f"database {args.peer_db}"
    )
    print(
        f"{machine_line()}; shared with other work: 1-min load average {load_at_start:.2f} at the start, "
        f"{load_average():.2f} at the end; {time.monotonic() - started:.0f} s in all"
    )
    print(
        f"{args.clients} clients, {args.duration:.0f} s per run, {args.rounds} rounds interleaved "
        f"({', '.join(f'{side} {mode}' for side, mode in order)}); each cell: the figure (the 1-min load "
        "average at the end of that run); ratio: ours/peer of the means"
    )
    rounds = range(args.rounds)
    header = ["figure", *[f"peer r{i + 1}" for i in rounds], *[f"ours r{i + 1}" for i in rounds], "ours/peer"]
    print("\n| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    pairs = [
        *[("HTTP", f"HTTP {server}") for server in servers],
        ("in process", "in process"),
        ("in process", "in process services"),
    ]
    for peer_mode, ours_mode in pairs:
        peer, ours = results[("peer", peer_mode)], results[("ours", ours_mode)]
        for key, label, unit, decimals in FIGURES:
            cells = [cell(r, key, decimals) for r in peer + ours]
            ratio = mean(ours, key) / mean(peer, key) if mean(peer, key) else math.nan
            print(f"| {ours_mode}: {label}{unit} | " + " | ".join(cells) + f" | {ratio:.2f} |")
    errors = {f"{side} {mode}": sum(r["errors"] for r in runs if r) for (side, mode), runs in results.items()}
    print("\nerrors: " + ", ".join(f"{name} {count}" for name, count in errors.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
