"""Instructions a process executes, counted by valgrind (bench/instructions.py, request_overhead.py)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

COLLECTED = re.compile(r"Collected : (\d+)")


def require_valgrind() -> None:
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")


def counted(python: str, argv: list[str]) -> int:
    """The instructions valgrind counted in one run of ``python argv`` (a script and its arguments)."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", python, *argv],
        capture_output=True,
        text=True,
    )
    found = COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        sys.exit(f"{' '.join(argv)} failed under valgrind ({done.returncode}):\n{done.stderr[-3000:]}")
    return int(found.group(1))


def per_repetition(python: str, argv: list[str], flag: str, first: int, more: int) -> float:
    """What one repetition costs: ``argv`` run with ``flag first`` and with ``flag first+more``, the
    difference of the two counts over ``more`` (the start-up both runs share drops out)."""
    few = counted(python, [*argv, flag, str(first)])
    many = counted(python, [*argv, flag, str(first + more)])
    return (many - few) / more
