"""The worst inputs for the pattern matcher: longest legal patterns against a 4 KiB tool name.

Each pattern is ``PATTERN_MAX`` (256) characters of stars and ``a``s with a ``b`` the name never holds,
placed so that the prefix and suffix checks pass and a matcher must work through every middle piece.
A backtracking translation (``*`` -> ``.*``) tries every way of spreading 4 096 characters over ~127
stars and never ends; the linear matcher does one ``str.find`` per piece. Shared by
tests/toolgate/test_pattern_redos.py and bench/pattern_redos.py.
"""

from __future__ import annotations

from toolgate.patterns import PATTERN_MAX

NAME_LENGTH = 4096
NAMES = ("a" * NAME_LENGTH, "a" * (NAME_LENGTH - 1) + "c")


def adversarial_patterns() -> list[str]:
    patterns = [
        "*a" * 126 + "*b*a",  # fails on the last middle piece
        "*a" * 127 + "*b",  # fails on the suffix
        "*aa" * 84 + "*b*a",  # longer pieces
        "a*" * 127 + "b*",  # a literal prefix, then stars
        "*" * (PATTERN_MAX - 1) + "b",  # stars only
        "a*" * 128,  # matches
    ]
    return [pattern[:PATTERN_MAX] for pattern in patterns]
