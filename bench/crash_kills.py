"""Full size of the crash-safety harness (docs/reliability.md, "R3 — crash safety under random SIGKILLs").

Runs tests/e2e/test_crash_kills.py::test_crash_kills_full_size: ``--kills`` SIGKILLs (default 30) of
whole process groups — ``--webs`` uvicorn processes (default 2) and ``--clusters`` q-clusters of each
kind (default 2 default + 2 timer clusters) — while ``--drivers`` threads (default 3) run approval
cycles over HTTP; then checks that no pause was lost, no request reached the recorder twice and every
conversation took a turn again within 30 s of each kill. Prints the figure with the load average.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hitl_bench python bench/crash_kills.py --kills 30
"""

from __future__ import annotations

import argparse
import re
import sys

from _fullsize import run_fullsize_test

TEST = "tests/e2e/test_crash_kills.py::test_crash_kills_full_size"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--webs", type=int, default=2)
    parser.add_argument("--clusters", type=int, default=2, help="q-clusters of each kind (default, timers)")
    parser.add_argument("--drivers", type=int, default=3)
    parser.add_argument("--seed", type=int, default=16)
    args = parser.parse_args()
    run = run_fullsize_test(
        TEST,
        {
            "HITL_CRASH_KILLS": str(args.kills),
            "HITL_CRASH_WEBS": str(args.webs),
            "HITL_CRASH_CLUSTERS": str(args.clusters),
            "HITL_CRASH_DRIVERS": str(args.drivers),
            "HITL_CRASH_SEED": str(args.seed),
        },
    )
    figure = re.search(r"R3 crash kills: .*", run.stdout)
    print(
        f"{args.webs} web, {args.clusters} default + {args.clusters} timer q-clusters, {args.drivers} drivers, seed {args.seed}"
    )
    if run.returncode != 0 or figure is None:
        sys.stdout.write(run.tail())
        print(f"FAILED after {run.elapsed:.0f} s (load average {run.load})")
        return 1
    print(f"{figure.group(0)}; wall {run.elapsed:.0f} s (load average {run.load})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
