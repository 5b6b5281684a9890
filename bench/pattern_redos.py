#!/usr/bin/env python
"""S5: the worst case of tool-approval pattern matching, 256-character patterns × a 4 KiB tool name.

Prints, for each adversarial pattern (harnesses/pattern_adversaries.py) and name, the time per match of
``GlobPattern.matches`` (best of 5 rounds of 200), then the worst case against the 5 ms bound.

    .venv/bin/python bench/pattern_redos.py
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harnesses.pattern_adversaries import NAMES, adversarial_patterns
from toolgate.patterns import GlobPattern, validate_pattern

BOUND_MS = 5.0
REPEAT = 200


def per_match_ms(glob: GlobPattern, name: str) -> float:
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(REPEAT):
            glob.matches(name)
        best = min(best, (time.perf_counter() - started) / REPEAT)
    return best * 1000


def main() -> int:
    worst = 0.0
    cells = 0
    for pattern in adversarial_patterns():
        assert validate_pattern(pattern) is None, pattern
        glob = GlobPattern(pattern)
        for name in NAMES:
            ms = per_match_ms(glob, name)
            cells += 1
            worst = max(worst, ms)
            print(f"{pattern[:24]}… ({len(pattern)} chars) × {len(name)}-char name: {ms:.4f} ms")
    with open("/proc/loadavg") as loadavg:
        load = loadavg.read().split()[0]
    print(f"{cells} cells; worst {worst:.4f} ms per match (bound {BOUND_MS} ms); load {load}")
    return 0 if worst <= BOUND_MS else 1


if __name__ == "__main__":
    raise SystemExit(main())
