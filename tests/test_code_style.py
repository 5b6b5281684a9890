"""The whole tree is ruff-clean and ruff-formatted (pyproject.toml: the rules, C901's complexity limit
of 12 among them, and the formatter's line length), so ``./scripts/test`` fails on a change that is not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUFF = str(Path(sys.executable).with_name("ruff"))


def ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([RUFF, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_check_is_clean():
    checked = ruff("check", "--no-cache", ".")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_ruff_format_leaves_every_file_as_it_is():
    formatted = ruff("format", "--check", "--no-cache", ".")
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr
