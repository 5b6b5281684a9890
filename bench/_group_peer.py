"""group_cycles.py --with-peer: the peer's interrupt cycle interleaved with the group cycle, round by round.

The peer's graph (bench/peer/graph.py, run by peer_cycles.py over HTTP as compare_peer.py runs it) is
already three nodes with one interrupt between them: parse -> gate (``interrupt()``) -> act,
on PostgresSaver. That is the shape of our discussion (OPINION, CHALLENGE, the gate, SYNTHESIS), but its
nodes are plain functions, where each of our phases is three member turns through the 1:1 engine. So
the ratio says what a discussion costs beside the cheapest graph of the same shape, not that the two do
the same work. The peer's cycle is its 4 requests; ours is 2.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _cost import load_average
from _figures import machine_line
from _stack import LOG_DIR
from compare_peer import FIGURES, cell, command, mean, peer_versions, run, set_up_peer
from peer_cycles import PEER_VENV


def add_peer_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("peer (--with-peer)")
    group.add_argument(
        "--with-peer",
        action="store_true",
        help="interleave the peer's 3-node interrupt cycle (peer_cycles.py over HTTP), --rounds times",
    )
    group.add_argument("--rounds", type=int, default=2, help="rounds of peer then ours (default 2)")
    group.add_argument(
        "--peer-venv", type=Path, default=PEER_VENV, help="the peer's virtualenv (default bench/peer/.venv)"
    )
    group.add_argument(
        "--peer-db", default=None, help="the peer's database (default: ours, --db; it owns its own tables)"
    )


def run_with_peer(args: argparse.Namespace, run_ours: Callable[[argparse.Namespace, str], None]) -> int:
    args.peer_db = args.peer_db or args.db
    set_up_peer(args.peer_venv, force=False)
    started, load_at_start = time.monotonic(), load_average()
    runs: dict[str, list[dict | None]] = {"peer": [], "ours": []}
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="group-peer-") as tmp:
        for round_no in range(1, args.rounds + 1):
            out = Path(tmp) / f"peer-{round_no}.json"
            print(f"\n== round {round_no}: peer, HTTP (3 nodes, one interrupt) ==", flush=True)
            stdout = run(
                command("peer", "HTTP", args, out),
                timeout=args.duration + 300,
                log=LOG_DIR / f"group-peer-{round_no}.log",
            )
            if stdout is not None:
                print("".join(f"  {line}\n" for line in stdout.splitlines()), end="", flush=True)
            runs["peer"].append(json.loads(out.read_text()) if stdout is not None else None)
            time.sleep(1.0)
            out = Path(tmp) / f"ours-{round_no}.json"
            print(f"\n== round {round_no}: ours, HTTP (group discussion) ==", flush=True)
            run_ours(args, str(out))
            runs["ours"].append(json.loads(out.read_text()))
            time.sleep(1.0)
    print(
        f"\n# the group cycle beside the peer's 3-node interrupt cycle; {machine_line()}; peer: "
        f"{peer_versions(args.peer_venv)}, uvicorn --workers {args.workers} (bench/peer/server.py)"
    )
    print(
        f"{args.clients} clients, {args.duration:.0f} s per run, {args.rounds} rounds interleaved; 1-min load "
        f"average {load_at_start:.2f} at the start, {load_average():.2f} at the end, "
        f"{time.monotonic() - started:.0f} s in all; each cell: the figure (the load at the end of its run); "
        "'resume' is our approve (3 member turns) and the peer's resume"
    )
    rounds = range(args.rounds)
    header = ["figure", *[f"peer r{i + 1}" for i in rounds], *[f"ours r{i + 1}" for i in rounds], "ours/peer"]
    print("\n| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for key, label, unit, decimals in FIGURES:
        cells = [cell(r, key, decimals) for r in runs["peer"] + runs["ours"]]
        peer_mean = mean(runs["peer"], key)
        ratio = mean(runs["ours"], key) / peer_mean if peer_mean else math.nan
        print(f"| {label}{unit} | " + " | ".join(cells) + f" | {ratio:.2f} |")
    errors = {side: sum(r["errors"] for r in side_runs if r) for side, side_runs in runs.items()}
    print(f"\nerrors: peer {errors['peer']}, ours {errors['ours']}")
    return 0
