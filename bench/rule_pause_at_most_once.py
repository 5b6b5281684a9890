"""Full size of the at-most-once harness for rule pauses (docs/reliability.md, "At most once for rule pauses").

Runs tests/conversations/test_rule_pause_at_most_once.py's crash-rounds test with ``--rounds`` rounds
(default 20): each round SIGKILLs a child process running an approved rule pause's continuation while one
of its two http calls is in flight, recovers the pause, approves again, and checks that no call reached
the loopback server twice. Prints the figure and the load average beside it.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hitl_bench python bench/rule_pause_at_most_once.py --rounds 20
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEST = (
    "tests/conversations/test_rule_pause_at_most_once.py::test_crash_rounds_never_send_a_rule_http_call_twice"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    env = {**os.environ, "HITL_AT_MOST_ONCE_ROUNDS": str(args.rounds), "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", TEST],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    elapsed = time.monotonic() - started
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else ["?"]
    figure = re.search(r"at-most-once rounds: .*", run.stdout)
    if run.returncode != 0 or figure is None:
        sys.stdout.write(run.stdout[-4000:] + run.stderr[-2000:])
        print(f"FAILED after {elapsed:.0f} s (load {' '.join(load)})")
        return 1
    print(f"{figure.group(0)} in {elapsed:.0f} s (load {' '.join(load)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
