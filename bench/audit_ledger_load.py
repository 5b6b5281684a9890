#!/usr/bin/env python
"""The audit ledger under load, full size: 16 threads x 500 operations against PostgreSQL, then tampering.

Runs the harness of harnesses/ledger_load.py (the fast size is tests/approvals/test_audit_ledger_load.py)
in this process against a bench database (default ``hitl_bench_ledger``, flushed first): racing
threads open pauses, decide and cancel them through the decision service and append plain entries,
all to many subjects' chains. Then it checks the ledger (chains verify through the service and
``manage.py hitl_audit_verify``, sequences gap-free and unique, one entry per decision), times a full
verification, tampers with five chains by raw SQL and checks each is detected, naming its first bad
sequence. Prints entries/s, the verify time and the figure; exits 1 if any check failed.

    .venv/bin/python bench/audit_ledger_load.py                       # 16 threads x 500
    .venv/bin/python bench/audit_ledger_load.py --threads 8 --ops 100 --db hitl_bench_ledger
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from _in_process import prepare


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--ops", type=int, default=500, help="operations per thread")
    parser.add_argument("--db", default="hitl_bench_ledger")
    args = parser.parse_args()
    prepare(args.db)

    from approvals.audit import verify_ledger
    from harnesses.ledger_load import TAMPERINGS, check_ledger, run_load, tamper_and_detect

    result = run_load(threads=args.threads, ops=args.ops)
    counts = result.counts
    print(
        f"load: {args.threads} threads x {args.ops} ops in {result.seconds:.1f} s: {result.entries} entries "
        f"({result.entries / result.seconds:.0f} entries/s) - {counts['pause']} pauses opened, "
        f"{counts['decided']} decided, {counts['cancelled']} cancelled, {counts['lost']} lost races, "
        f"{counts['note']} plain appends, {len(result.subjects)} subjects"
    )
    failures = check_ledger(result)
    started = time.monotonic()
    report = verify_ledger()
    verify_seconds = time.monotonic() - started
    print(
        f"verify: {report.entries_checked} entries in {report.subjects_checked} subjects in "
        f"{verify_seconds:.2f} s ({report.entries_checked / verify_seconds:.0f} entries/s), "
        f"{len(report.problems)} problems"
    )
    for failure in failures[:20]:
        print(f"FAIL {failure}")
    outcomes = tamper_and_detect()
    for name, detected, first_problem in outcomes:
        print(f"tamper {name}: {'detected' if detected else 'MISSED'} - {first_problem}")
    detected = sum(1 for _, hit, _ in outcomes if hit)
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(
        f"figure: {result.entries} entries by {args.threads} threads, gap-free and verified: "
        f"{'yes' if not failures else 'NO'}; tampering cases detected {detected}/{len(TAMPERINGS)} "
        f"(load average {' '.join(load)})"
    )
    return 0 if not failures and detected == len(TAMPERINGS) else 1


if __name__ == "__main__":
    sys.exit(main())
