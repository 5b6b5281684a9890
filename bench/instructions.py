#!/usr/bin/env python
"""Instructions per approval cycle, counted by valgrind: ours through the REST views and through the
services, and the peer's ``graph.invoke``, each in process in one thread.

On a shared machine a timed figure moves with whatever else runs (the same code measured 8–11 ms of CPU
per cycle within minutes here); the count of instructions a process executes hardly moves at all, so it
shows a change of a few percent in the Python a cycle costs, which timings cannot. What it leaves out:
PostgreSQL's own work (another process), time spent waiting, and the kernel's work in system calls.

Each side runs its cycle in a child process under ``valgrind --tool=callgrind`` twice, ``--cycles`` and
``--cycles + --more`` times; the difference of the two counts over ``--more`` is what one cycle costs,
without the start-up both runs share. Ours runs on the bench database as cycles.py leaves it (a Stack
is started once to migrate it, make the users and deploy the bench agent, then stopped), the REST
views through Django's WSGI handler with the pool as the servers run (``say_rules_only.InProcessClient``)
and the services as ``cycles.py --services`` calls them; the peer on its database, its tables as the
last run left them (bench/peer_cycles.py). Needs valgrind; about 5 minutes with the defaults. It prints;
nothing is asserted.

    .venv/bin/python bench/instructions.py
    .venv/bin/python bench/instructions.py --which rest --cycles 5 --more 20
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import types
from pathlib import Path

from _figures import machine_line
from _stack import PYTHON, Stack, add_stack_args
from _valgrind import per_repetition, require_valgrind
from peer_cycles import PEER_VENV

HERE = Path(__file__).resolve().parent
SIDES = ("rest", "services", "peer")


def child_ours(cycles_to_run: int, side: str, tokens: dict[str, str], agent_id: str, db: str) -> None:
    from _stack import django_in_process

    django_in_process(db, fresh=False, pool=True, migrate=False)
    import cycles

    if side == "services":
        from _services import ServicesClient as Client
    else:
        from say_rules_only import InProcessClient as Client
    alice, approver = Client(tokens["alice"]), Client(tokens["approver"])
    stack = types.SimpleNamespace(agent_id=agent_id)
    results = cycles.Results()
    for _ in range(cycles_to_run):
        cycles.one_cycle(stack, alice, approver, results)
    from django.db import connection

    connection.close()


def child_peer(cycles_to_run: int, dsn: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver
    from peer.graph import build_graph, connect, new_thread_id, pause, resume

    with connect(dsn) as conn:
        graph = build_graph(PostgresSaver(conn))
        for _ in range(cycles_to_run):
            thread_id = new_thread_id()
            pause(graph, thread_id)
            resume(graph, thread_id)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--which", default=",".join(SIDES), help=f"comma-separated: {', '.join(SIDES)}")
    parser.add_argument("--cycles", type=int, default=10, help="cycles of the shorter run (default 10)")
    parser.add_argument("--more", type=int, default=30, help="cycles the longer run adds (default 30)")
    parser.add_argument("--peer-db", default="lgbench", help="the peer's database (default lgbench)")
    parser.add_argument("--child", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--child-cycles", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child-setup", help=argparse.SUPPRESS)
    add_stack_args(parser, workers=1, server="gunicorn")
    args = parser.parse_args()
    peer_dsn = f"postgresql://postgres@127.0.0.1:5432/{args.peer_db}"

    if args.child == "peer":
        child_peer(args.child_cycles, peer_dsn)
        return 0
    if args.child:
        setup = json.loads(args.child_setup)
        child_ours(args.child_cycles, args.child, setup["tokens"], setup["agent"], setup["db"])
        return 0

    require_valgrind()
    which = [name.strip() for name in args.which.split(",") if name.strip()]
    if set(which) - set(SIDES):
        parser.error(f"--which takes {', '.join(SIDES)}")
    args.qcluster = False  # resume?wait continues in its own request: no worker needed
    figures: dict[str, float] = {}
    if {"rest", "services"} & set(which):
        with Stack.from_args(args) as stack:  # migrated, users made, the bench agent deployed
            setup = json.dumps({"tokens": stack.tokens, "agent": stack.agent_id, "db": stack.db})
        for side in ("rest", "services"):
            if side in which:
                figures[side] = per_repetition(
                    PYTHON,
                    [__file__, "--child", side, "--child-setup", setup],
                    "--child-cycles",
                    args.cycles,
                    args.more,
                )
    if "peer" in which:
        python = str(PEER_VENV / "bin" / "python")
        if not Path(python).exists():
            sys.exit("the peer's virtualenv is missing: run bench/peer/setup (or bench/compare_peer.py once)")
        figures["peer"] = per_repetition(
            python,
            [__file__, "--child", "peer", "--peer-db", args.peer_db],
            "--child-cycles",
            args.cycles,
            args.more,
        )

    print(machine_line())
    print(
        f"instructions per cycle (valgrind, user space of the one process; {args.more} cycles past "
        f"{args.cycles}), database {args.db}:"
    )
    labels = {
        "rest": "ours, the REST views (Django's WSGI handler)",
        "services": "ours, the services",
        "peer": "the peer, graph.invoke",
    }
    for side, value in figures.items():
        ratio = f"   ours/peer {value / figures['peer']:.2f}" if "peer" in figures and side != "peer" else ""
        print(f"  {labels[side]:46s} {value / 1e6:6.2f} M{ratio}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
