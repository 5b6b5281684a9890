"""S5 (a): the longest legal patterns against a 4 KiB tool name finish in a subprocess with a hard
timeout; no wall-clock time is asserted. The linear matcher needs milliseconds for all of them; a
matcher that backtracks (``*`` -> ``.*``) would need longer than the age of the universe, so the
timeout, generous by orders of magnitude, only ever fails on a regression."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from harnesses.pattern_adversaries import NAMES, adversarial_patterns
from toolgate.patterns import PATTERN_MAX, GlobPattern, validate_pattern

ROOT = Path(__file__).resolve().parents[2]
HARD_TIMEOUT_SECONDS = 20
_CHILD = """
from harnesses.pattern_adversaries import NAMES, adversarial_patterns
from toolgate.patterns import GlobPattern
print([GlobPattern(p).matches(n) for p in adversarial_patterns() for n in NAMES])
"""


def test_adversarial_patterns_are_the_longest_the_document_allows():
    for pattern in adversarial_patterns():
        assert len(pattern) == PATTERN_MAX and validate_pattern(pattern) is None
    assert validate_pattern("a" * (PATTERN_MAX + 1)) is not None


def test_the_longest_patterns_match_a_4_kib_name_without_backtracking():
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    completed = subprocess.run(
        [sys.executable, "-c", _CHILD],
        capture_output=True,
        text=True,
        timeout=HARD_TIMEOUT_SECONDS,
        cwd=ROOT,
        env=environment,
    )
    assert completed.returncode == 0, completed.stderr
    expected = [GlobPattern(p).matches(n) for p in adversarial_patterns() for n in NAMES]
    assert completed.stdout.strip() == str(expected)
    assert expected == [False] * 10 + [True, True]
