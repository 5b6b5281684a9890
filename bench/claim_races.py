"""Full size of the claim and filing races (approval requests: one grant per approval, one request per
idempotency key; harnesses/claim_races.py).

Runs tests/approval_requests/test_claim_races.py's full-size test: ``--rounds`` rounds (default 50) of
each race with 16 threads (claims, pinned every other round; claims racing the outcome report; claims
racing a withdrawal; different outcome reports; filings with one key and one, two or three bodies), on
real PostgreSQL through the REST views. Prints each race's answers over its rounds and the load average.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hitl_bench python bench/claim_races.py --rounds 50
"""

from __future__ import annotations

import argparse
import sys

from _fullsize import run_fullsize_test

TEST = "tests/approval_requests/test_claim_races.py::test_claim_and_filing_races_full_size"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50, help="rounds of each race (default 50)")
    args = parser.parse_args()
    run = run_fullsize_test(TEST, {"CLAIM_RACE_FULL_ROUNDS": str(args.rounds)}, "-p", "no:logging")
    print("\n".join(line for line in run.stdout.splitlines() if line.startswith("claim races")))
    status = "passed" if run.returncode == 0 else "FAILED"
    print(f"{status} in {run.elapsed:.0f} s; load average {run.load}")
    if run.returncode != 0:
        sys.stdout.write(run.tail())
    return run.returncode


if __name__ == "__main__":
    raise SystemExit(main())
