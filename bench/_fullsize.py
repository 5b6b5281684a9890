"""Run one ``fullsize`` test of the suite in a pytest subprocess, as the full-size harnesses of
docs/reliability.md do (bench/api_contract.py, crash_kills.py, state_machine.py, timer_races.py).

The sizes travel in environment variables the test reads; the test prints its figure (run with ``-s``),
the script picks it out of the output and prints it with the load average beside it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTEST = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-p", "no:xdist"]


@dataclass(frozen=True)
class FullSizeRun:
    returncode: int
    stdout: str
    stderr: str
    elapsed: float
    load: str  # the load average when it ended: "1-min 5-min 15-min"

    def tail(self) -> str:
        """What to show when it failed: the end of both streams."""
        return self.stdout[-6000:] + self.stderr[-2000:]


def run_fullsize_test(test: str, sizes: dict[str, str], *pytest_args: str) -> FullSizeRun:
    """``test`` (a node id) with ``-m fullsize``, its sizes in the environment, in the project's root;
    ``pytest_args`` go before it (``-p no:logging`` for a run too long to keep its log records)."""
    env = {**os.environ, **sizes, "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    run = subprocess.run(  # this interpreter running pytest on a node id of our own
        [*PYTEST, *pytest_args, "-m", "fullsize", test], cwd=ROOT, env=env, capture_output=True, text=True
    )
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    return FullSizeRun(run.returncode, run.stdout, run.stderr, time.monotonic() - started, load)
