"""Full size of M1, the model cannot widen its approval (docs/reliability.md, "M1 — the model cannot
widen its approval").

Runs tests/toolgate/test_model_cannot_widen_its_approval.py's fullsize test: every strategy of the
catalogue (harnesses/model_attacks.py) with the openai client against the local Chat Completions stub and
the single-response ones with the scripted provider, then ``--rounds`` random mixes drawn from
``--seed``; every round checked against the invariant on the loopback targets and the ledger. Prints the
rounds, pauses, decisions, requests that reached the target and violations, with the elapsed time and
the load average beside them.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hitl_bench python bench/model_attacks.py [--rounds 200 --seed 26]
"""

from __future__ import annotations

import argparse
import sys

from _fullsize import run_fullsize_test

TEST = "tests/toolgate/test_model_cannot_widen_its_approval.py::test_full_size_model_attacks"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--seed", type=int, default=26)
    args = parser.parse_args()
    run = run_fullsize_test(
        TEST, {"HITL_M1_ROUNDS": str(args.rounds), "HITL_M1_SEED": str(args.seed)}, "-p", "no:logging"
    )
    figure = [line for line in run.stdout.splitlines() if line.startswith("M1 ")]
    if run.returncode != 0 or not figure:
        sys.stdout.write(run.tail())
        print(f"FAILED after {run.elapsed:.0f} s (load {run.load})")
        return 1
    print("\n".join(figure))
    print(
        f"bench/model_attacks.py: {args.rounds} random rounds (seed {args.seed}) passed in "
        f"{run.elapsed:.0f} s (load {run.load})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
