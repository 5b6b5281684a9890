"""S1 at full size: the authorization matrix with every subject state and every method of every path.

Runs tests/test_authorization_matrix.py::test_full_authorization_matrix (REST with ownerless subjects,
HITL jobs and every undocumented method; the admin; MCP) against real PostgreSQL, then prints the
table as markdown and the figure: cells run, cells matching the one table (harnesses/authz_table.py).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<db> python bench/authz_matrix.py [--table-only]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEST = "tests/test_authorization_matrix.py::test_full_authorization_matrix"


def main() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        table = Path(scratch) / "matrix.md"
        env = {**os.environ, "HITL_AUTHZ_FULL": str(table), "PYTHONPATH": str(ROOT)}
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "fullsize", TEST],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        if table.exists():
            print(table.read_text())
        figure = [line for line in run.stdout.splitlines() if line.startswith("S1 full matrix")]
        print("\n".join(figure) or run.stdout[-3000:])
        print(f"load average: {Path('/proc/loadavg').read_text().split()[:3]}")
        if run.returncode:
            print(run.stdout[-4000:], run.stderr[-2000:])
        return run.returncode


if __name__ == "__main__":
    sys.exit(main())
