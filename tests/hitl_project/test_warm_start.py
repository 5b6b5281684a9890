"""A web process loads its URLconf at start and freezes what it loaded out of the garbage collector's
passes (hitl_project.warm_start), under either entry point."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
REPORT = (
    "import gc, sys; import {module}; "
    "print(gc.get_freeze_count(), 'hitl_project.urls' in sys.modules, 'approvals.api.operator_views' in sys.modules)"
)


@pytest.mark.parametrize("module", ["hitl_project.wsgi", "hitl_project.asgi"])
def test_a_web_process_starts_with_its_urls_loaded_and_frozen_out_of_the_collector(module):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "hitl_project.settings.base"}
    result = subprocess.run(
        [sys.executable, "-c", REPORT.format(module=module)],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    frozen, urls_loaded, views_loaded = result.stdout.split()
    assert int(frozen) > 50_000  # Django, DRF and every module the URLconf imports
    assert urls_loaded == "True" and views_loaded == "True"
