"""The gate refuses a tool call without an id also under ``python -O`` (bandit B101: it must not be an assert;
docs/reliability.md, S6). The refusal itself: tests/toolgate/test_precedence.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CONFIG = {"requireApproval": ["*"]}


def test_the_id_check_survives_python_dash_o() -> None:
    """An ``assert`` would be compiled away by ``-O`` and the id-less call gated under an empty id."""
    code = (
        "from toolgate.gate import classify; from toolgate.tools import ToolCall, ToolSet\n"
        "try:\n"
        f"    classify([ToolCall(id='', name='delete_file')], {CONFIG!r}, ToolSet())\n"
        "except ValueError as error:\n"
        "    print('refused:', error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-O", "-c", code],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "refused: tool call 'delete_file' has no id" in result.stdout, result.stdout + result.stderr
