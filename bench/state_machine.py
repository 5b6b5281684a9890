"""Full size of R5, state-machine conformance (docs/reliability.md, "R5 — the pause state machine").

Runs tests/test_pause_state_machine.py's fullsize test: the hypothesis state machine of pause, decide,
cancel, time out and restore on 1:1 conversations and group discussions, ``--examples`` examples of up to
``--steps`` steps (default 200 x 50, random seeds), every step compared with PostgreSQL. Prints the
examples, steps, rules run, each rule's hits, the elapsed time and the load average beside them.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hitl_bench python bench/state_machine.py [--examples 200 --steps 50]
"""

from __future__ import annotations

import argparse
import sys

from _fullsize import run_fullsize_test

TEST = "tests/test_pause_state_machine.py::test_full_size_state_machine_conformance"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=200)
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    run = run_fullsize_test(
        TEST, {"HITL_STATE_MACHINE_SIZE": f"{args.examples}x{args.steps}"}, "-p", "no:logging"
    )
    figure = [line for line in run.stdout.splitlines() if line.startswith("R5 ")]
    if run.returncode != 0 or not figure:
        sys.stdout.write(run.tail())
        print(f"FAILED after {run.elapsed:.0f} s (load {run.load})")
        return 1
    print("\n".join(figure))
    print(
        f"bench/state_machine.py: {args.examples} examples x {args.steps} steps passed in {run.elapsed:.0f} s (load {run.load})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
