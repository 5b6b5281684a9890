"""Full size of the exactly-one-decision harness (docs/reliability.md, R1).

In process (default): tests/approvals/test_exactly_one_decision_per_pause.py's full-size test with
``--rounds`` rounds (default 500) of eight racers, one per surface (REST resume ×2, REST cancel, admin
page, timer, MCP resume and cancel, Slack), on RULE, TOOL_CALL, group and approval-request pauses (an
approval request's own eight: REST, the admin page, the timer, MCP and Slack on its operations). ``--http``: the same
racers over HTTP against two live uvicorn processes (tests/e2e/test_decision_races_live.py, default 100
rounds). Prints the harness's report (rounds, winners histogram, wins by surface, errors, elapsed) and the
load average beside it.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hitl_bench python bench/decision_races.py --rounds 500
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hitl_bench python bench/decision_races.py --http --rounds 100
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IN_PROCESS = (
    "tests/approvals/test_exactly_one_decision_per_pause.py"
    "::test_exactly_one_decision_per_pause_with_eight_surfaces_racing_full_size"
)
OVER_HTTP = "tests/e2e/test_decision_races_live.py::test_exactly_one_decision_per_pause_over_http_with_two_web_processes"


def report_of(stdout: str) -> list[str]:
    """The harness's report (harnesses/decision_race.py ``Summary.report``), printed or in a failed assert."""
    lines = [line.removeprefix("E").rstrip() for line in stdout.splitlines()]
    first = next((i for i, line in enumerate(lines) if line.strip().startswith("rounds:")), None)
    if first is None:
        return []
    indent = len(lines[first]) - len(lines[first].lstrip())
    report = []
    for line in lines[first:]:
        ended = not line.strip() or line.strip().startswith("assert") or set(line.strip()) <= set(".FEsx")
        if ended or len(line) - len(line.lstrip()) < indent:
            break
        report.append(line[indent:])
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=None, help="default 500 in process, 100 over HTTP")
    parser.add_argument("--http", action="store_true", help="over HTTP, two uvicorn processes")
    args = parser.parse_args()
    rounds = args.rounds or (100 if args.http else 500)
    variable = "DECISION_RACE_HTTP_ROUNDS" if args.http else "DECISION_RACE_ROUNDS"
    env = {**os.environ, variable: str(rounds), "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-p", "no:logging"]
    command += ["-m", "fullsize", OVER_HTTP if args.http else IN_PROCESS]
    started = time.monotonic()
    run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    where = "over HTTP, two uvicorn processes" if args.http else "in process"
    print(f"R1 exactly one decision per pause ({where})")
    print("\n".join(report_of(run.stdout)))
    load = os.getloadavg()
    status = "passed" if run.returncode == 0 else "FAILED"
    print(f"{status} in {elapsed:.0f} s with pytest; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if run.returncode != 0:
        sys.stdout.write(run.stdout[-6000:] + run.stderr[-2000:])
    return run.returncode


if __name__ == "__main__":
    raise SystemExit(main())
