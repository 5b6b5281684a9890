"""R6 at full size: the API contract with every schemathesis phase and more examples, every role.

Runs tests/test_api_contract.py::test_full_api_contract (examples, coverage, fuzzing and stateful phases;
``--examples`` per operation in the generated phases) against a live WSGI server on the pytest test
database, then prints the figure: requests, failures by check, elapsed, and the load average.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<db> python bench/api_contract.py [--examples 25]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEST = "tests/test_api_contract.py::test_full_api_contract"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=25, help="examples per operation (default 25)")
    parser.add_argument("--seed", type=int, default=16)
    args = parser.parse_args()
    env = {
        **os.environ,
        "HITL_CONTRACT_EXAMPLES": str(args.examples),
        "HITL_CONTRACT_SEED": str(args.seed),
        "PYTHONPATH": str(ROOT),
    }
    started = time.monotonic()
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-s",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "-m",
            "fullsize",
            TEST,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    figure = [line for line in run.stdout.splitlines() if line.startswith(("R6 ", "  "))]
    print("\n".join(figure) or run.stdout[-3000:])
    print(
        f"wall time {time.monotonic() - started:.0f} s; load average: {' '.join(f'{v:.2f}' for v in os.getloadavg())}"
    )
    if run.returncode:
        print(run.stdout[-6000:], run.stderr[-2000:])
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
