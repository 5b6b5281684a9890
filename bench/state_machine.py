"""Full size of R5, state-machine conformance (docs/reliability.md, "R5 — the pause state machine").

Runs tests/test_pause_state_machine.py's fullsize test: the hypothesis state machine of pause, decide,
cancel, time out and restore on 1:1 conversations and group discussions, ``--examples`` examples of up to
``--steps`` steps (default 200 x 50, random seeds), every step compared with PostgreSQL. Prints the
examples, steps, rules run, each rule's hits, the elapsed time and the load average beside them.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hitl_bench python bench/state_machine.py [--examples 200 --steps 50]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEST = "tests/test_pause_state_machine.py::test_full_size_state_machine_conformance"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=200)
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    env = {**os.environ, "HITL_STATE_MACHINE_SIZE": f"{args.examples}x{args.steps}", "PYTHONPATH": str(ROOT)}
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
            "no:logging",
            "-m",
            "fullsize",
            TEST,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    elapsed = time.monotonic() - started
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    figure = [line for line in run.stdout.splitlines() if line.startswith("R5 ")]
    if run.returncode != 0 or not figure:
        sys.stdout.write(run.stdout[-6000:] + run.stderr[-2000:])
        print(f"FAILED after {elapsed:.0f} s (load {load})")
        return 1
    print("\n".join(figure))
    print(
        f"bench/state_machine.py: {args.examples} examples x {args.steps} steps passed in {elapsed:.0f} s (load {load})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
