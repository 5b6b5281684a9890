#!/usr/bin/env python
"""Tool-approval pattern matching: our linear GlobPattern against a naive ``*`` -> ``.*`` regex and fnmatch.

The adversarial case: a pattern with nine stars (``*a*a*a*a*a*a*a*b*a``) against a 60-character name
that does not match (``aaaa…a``). A backtracking regex tries every way of spreading the name over the
stars before it gives up; GlobPattern finds each piece once, left to right. The naive regex runs in a
subprocess killed after ``--timeout`` seconds, so the bench always ends; smaller star counts show how
its time grows. fnmatch is timed too, though it is the wrong language (``?`` and ``[`` are wildcards
there, literals in ours).

    .venv/bin/python bench/glob_match.py                 # naive regex capped at 10 s
    .venv/bin/python bench/glob_match.py --timeout 60
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from toolgate.patterns import GlobPattern

NAME = "a" * 60

_NAIVE_CHILD = """
import re, sys, time
pattern, name = sys.argv[1], sys.argv[2]
regex = re.compile("^" + ".*".join(map(re.escape, pattern.split("*"))) + "$")
started = time.perf_counter()
matched = regex.fullmatch(name) is not None
print(time.perf_counter() - started, matched)
"""


def adversarial_pattern(stars: int) -> str:
    """``stars`` stars and a ``b`` the name never contains, placed so that the prefix and suffix checks
    pass and every matcher has to work through the middle pieces before it fails."""
    return "*a" * (stars - 2) + "*b*a"


def per_match(matches, text: str, repeat: int) -> float:
    started = time.perf_counter()
    for _ in range(repeat):
        matches(text)
    return (time.perf_counter() - started) / repeat


def naive_regex_seconds(pattern: str, name: str, timeout: float) -> float | None:
    """One naive match in a subprocess; None when it did not finish within ``timeout`` seconds."""
    try:
        completed = subprocess.run(
            [sys.executable, "-c", _NAIVE_CHILD, pattern, name],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )
    except subprocess.TimeoutExpired:
        return None
    return float(completed.stdout.split()[0])


def fnmatch_matcher(pattern: str):
    regex = re.compile(fnmatch.translate(pattern))
    return lambda text: regex.match(text) is not None


def show(label: str, seconds: float | None, timeout: float) -> str:
    if seconds is None:
        return f"{label:>11}: did not finish within {timeout:g} s (killed)"
    return f"{label:>11}: {seconds * 1000:12.4f} ms per match"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--timeout", type=float, default=10.0, help="cap on one naive regex match (seconds)")
    parser.add_argument("--repeat", type=int, default=10_000, help="matches averaged for GlobPattern/fnmatch")
    args = parser.parse_args()

    print(f"name: {len(NAME)} characters ({NAME[:8]}…), never matches\n")
    for stars in (3, 5, 7, 9):
        pattern = adversarial_pattern(stars)
        glob = GlobPattern(pattern)
        assert not glob.matches(NAME)
        print(f"pattern {pattern!r} ({stars} stars)")
        print(show("GlobPattern", per_match(glob.matches, NAME, args.repeat), args.timeout))
        print(show("fnmatch", per_match(fnmatch_matcher(pattern), NAME, args.repeat), args.timeout))
        print(show("naive .*", naive_regex_seconds(pattern, NAME, args.timeout), args.timeout))
        print()

    print("fnmatch is the wrong language: '?' and '[' are wildcards there, literals here")
    for pattern, name in (("delete_?", "delete_x"), ("tool[ab]", "toola")):
        print(
            f"  {pattern!r} vs {name!r}: fnmatch {fnmatch.fnmatchcase(name, pattern)}, "
            f"GlobPattern {GlobPattern(pattern).matches(name)}"
        )


if __name__ == "__main__":
    main()
