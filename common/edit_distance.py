"""Edit distance, and the near-miss lint built on it (``Pause_Conversation`` is not ``PAUSE_CONVERSATION``)."""

from __future__ import annotations

from collections.abc import Iterable

NEAR_MISS_DISTANCE = 2


def levenshtein(a: str, b: str) -> int:
    """Classic Levenshtein distance (insert, delete, substitute; a transposition costs 2)."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            current.append(
                min(
                    previous[j] + 1,
                    current[j - 1] + 1,
                    previous[j - 1] + (char_a != char_b),
                )
            )
        previous = current
    return previous[-1]


def near_miss(candidate: str, reserved: Iterable[str]) -> str | None:
    """The first reserved name that ``candidate`` nearly, but not exactly, spells.

    A near miss differs from the reserved name yet is equal to it ignoring case, or is within edit
    distance 2 of it (compared case-sensitively). A candidate that *is* a reserved name is no near miss.
    """
    names = list(reserved)
    if candidate in names:
        return None
    folded = candidate.casefold()
    for name in names:
        if folded == name.casefold() or levenshtein(candidate, name) <= NEAR_MISS_DISTANCE:
            return name
    return None
