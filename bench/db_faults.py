#!/usr/bin/env python
"""Injected database faults, full size: N REST operations with 5 % of statements failing before they run
and 5 % of commits failing after they landed, a client that re-reads and retries, then the invariants.

Runs the harness of harnesses/fault_load.py (the fast size is tests/conversations/test_database_faults.py,
200 operations) in this process against a bench database (default ``hitl_faults``, flushed first):
DRF's test client with token auth, real PostgreSQL, a loopback server for the gated tool. Prints the
faults injected, the client's retries, the answers, each invariant's result, the elapsed time and the
load average; exits 1 if an invariant failed.

    .venv/bin/python bench/db_faults.py                          # 500 operations, seed 1
    .venv/bin/python bench/db_faults.py --ops 500 --seed 7 --before 0.05 --after 0.05
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from _in_process import prepare


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ops", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--before", type=float, default=0.05, help="rate of statements failing before they run"
    )
    parser.add_argument("--after", type=float, default=0.05, help="rate of commits failing after they landed")
    parser.add_argument("--db", default="hitl_faults")
    args = parser.parse_args()
    prepare(args.db)
    if not os.environ.get("DB_FAULTS_LOG"):
        # Every injected fault is logged with its traceback; the figures say it (an unhandled one is
        # still caught by the harness's own handler and named in its FAIL line).
        for handler in logging.getLogger().handlers:
            handler.setLevel(logging.CRITICAL + 1)

    from harnesses.fault_load import check_invariants, run_fault_load, summary, transfer_server

    with transfer_server() as (url, received):
        result = run_fault_load(
            ops=args.ops, seed=args.seed, tool_server=url, before_rate=args.before, after_rate=args.after
        )
    transfers = received.count("/transfers")
    for line in summary(result, transfers=transfers):
        print(line)
    failures = check_invariants(result, transfers=transfers)
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    print(
        f"figure: {args.ops} operations (seed {args.seed}) in {result.seconds:.1f} s, "
        f"{result.faults['before']} faults before a statement and {result.faults['after']} after a commit; "
        f"invariants: {'all hold' if not failures else f'{len(failures)} VIOLATED'} (load average {load})"
    )
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
