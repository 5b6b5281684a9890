"""bench/approval_requests.py at a tiny size, so that the script keeps working as the app changes.

The script runs as bench runs it, in a process of its own, on this test's database: it starts uvicorn
and (for the webhooks) a q-cluster, runs its three scenarios and stops them. It exits 0 only when every
answer it checked and every check of the database was right; its figures are printed, never asserted.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
TINY = (
    "--pending", "300", "--decided", "100",
    "--agents", "1,3", "--cycles", "6", "--warmup", "1",
    "--requests", "3", "--admin-requests", "2",
    "--webhooks", "2", "--webhook-warmup", "1",
)  # fmt: skip

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.long,
]  # the script's processes see committed rows only


def test_the_bench_script_runs_its_three_scenarios_at_a_tiny_size():
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}  # the bench's own settings
    run = subprocess.run(  # this interpreter on the repository's bench script
        [sys.executable, "bench/approval_requests.py", "--db", connection.settings_dict["NAME"], *TINY],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )

    output = run.stdout
    assert run.returncode == 0, output[-6000:] + run.stderr[-4000:]
    for heading in (
        "== 1. gated call, 1 agent:",
        "== 1. gated call, 3 agents:",
        "== 2. lists with 300 pending approval requests ==",
        "== 3. webhook delivery after a decision",
    ):
        assert heading in output, output
    assert output.count("errors: 0") == 3, output
    assert "database: filed 7 of 7, claimed with an outcome 7, audit entries 28" in output, output
    assert "errors in all: 0" in output, output
