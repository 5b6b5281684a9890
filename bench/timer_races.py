"""R2 at full size: timers at least once, decisions exactly once (docs/reliability.md, R2).

Runs tests/e2e/test_live_timer_races.py's full-size test: two timer q-clusters and a work cluster as real
processes on the test database; ``--pauses`` pauses (1:1 and group, the three finite policies) each
fired ``--fires`` times on the timer queue beside the drainer while reviewer threads approve, reject or
cancel a random subset around the deadline. Prints the figure (decisions, by winner, duplicate fires,
lateness, elapsed) with the load average beside it; exits 1 if any check failed.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hitl_bench python bench/timer_races.py --pauses 200 --fires 3
"""

from __future__ import annotations

import argparse
import sys

from _fullsize import run_fullsize_test

TEST = (
    "tests/e2e/test_live_timer_races.py::"
    "test_timers_at_full_size_fire_at_least_once_and_each_pause_is_decided_exactly_once"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pauses", type=int, default=200)
    parser.add_argument("--fires", type=int, default=3)
    parser.add_argument("--seed", type=int, default=None, help="replay the reviewers' plan of an earlier run")
    args = parser.parse_args()
    sizes = {"HITL_TIMER_RACE_PAUSES": str(args.pauses), "HITL_TIMER_RACE_FIRES": str(args.fires)}
    if args.seed is not None:
        sizes["HITL_TIMER_RACE_SEED"] = str(args.seed)
    run = run_fullsize_test(TEST, sizes)
    lines = run.stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("timer races:")), None)
    figure = lines[start : start + 7] if start is not None else []
    print("\n".join(figure))
    print(
        f"bench: {'passed' if run.returncode == 0 else 'FAILED'} in {run.elapsed:.0f} s (load average {run.load})"
    )
    if run.returncode != 0 or not figure:
        sys.stdout.write(run.tail())
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
