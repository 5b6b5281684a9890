"""bench/python_client.py and bench/adapters.py at a tiny size, so that the scripts keep working as the
client, its adapters and the frameworks change.

Each script runs as bench runs it, in a process of its own, on this test's database: it starts uvicorn,
runs its calls with a scripted reviewer approving each at once, stops it, and exits 0 only when every
gated call reached its target (or ran its tool) once and was reported. Figures are printed, never
asserted.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.long,
]  # the script's processes see committed rows only


def run_bench(script: str, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}  # the bench's own settings
    env.pop("OPENAI_API_KEY", None)  # the examples' scripted models
    run = subprocess.run(  # this interpreter on the repository's bench script
        [sys.executable, script, "--db", connection.settings_dict["NAME"], *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-4000:]
    assert "errors in all: 0" in run.stdout, run.stdout
    return run.stdout


def test_the_client_bench_runs_each_kind_of_call_at_a_tiny_size():
    output = run_bench("bench/python_client.py", "--calls", "3")
    for label in ("ungated: send straight", "execute: file, approved at once", "require_approval: file"):
        assert label in output, output


def test_the_adapters_bench_runs_each_framework_at_a_tiny_size():
    output = run_bench("bench/adapters.py", "--runs", "2")
    for framework in ("LangGraph", "Pydantic AI", "OpenAI Agents SDK"):
        assert f"{framework}, ungated tool: n=2" in output, output
        assert f"{framework}, gated tool (approved at once): n=2" in output, output
