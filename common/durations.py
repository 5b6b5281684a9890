"""ISO-8601 durations exactly as Java's ``Duration.parse`` reads them.

The stored agent documents were written for a Java service, so a duration that Java accepts must be
accepted here and one it refuses must be refused: ``PT30S``, ``PT15M``, ``P1D``, ``PT0.5S`` and
``pt2h`` are durations; ``30m``, ``P1W``, ``P1M``, ``P1Y``, ``PT`` and ``P`` are not. General-purpose
ISO parsers (``isodate``) accept weeks, months and years, which Java does not.

Grammar (case-insensitive, ASCII only)::

    [-+]? P ([-+]?n D)? (T ([-+]?n H)? ([-+]?n M)? ([-+]?n ([.,] f{0,9})? S)?)?

with at least one component, and a ``T`` that must be followed by at least one component. Like Java,
each component may carry its own sign (``PT1H-30M`` is thirty minutes) and the fraction separator may
be a comma. Java keeps nanoseconds; a ``timedelta`` keeps microseconds, so a sub-microsecond remainder
is dropped (toward zero) after the sign has been decided on the exact value.
"""

from __future__ import annotations

import datetime
import re

_JAVA_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?"
    r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE | re.ASCII,
)
_LONG_MIN = -(2**63)
_LONG_MAX = 2**63 - 1
_NANOS_PER_SECOND = 1_000_000_000


class InvalidDuration(ValueError):
    """The text is not an ISO-8601 duration that Java's ``Duration.parse`` would accept."""


class NonPositiveDuration(ValueError):
    """The duration is well-formed but zero or negative where a positive one is required."""


def parse_duration(text: str) -> datetime.timedelta:
    """Parse ``text`` like Java's ``Duration.parse``; raise InvalidDuration when Java would refuse it."""
    seconds, nanos = _parse_seconds_and_nanos(text)
    return _to_timedelta(text, seconds, nanos)


def positive_duration(text: str) -> datetime.timedelta:
    """Parse ``text`` and insist on a positive duration (``PT0S`` and ``-PT5M`` raise NonPositiveDuration).

    Positivity is judged on Java's exact value, so ``PT0.0000001S`` is positive; it is returned as the
    smallest positive ``timedelta`` rather than as zero.
    """
    seconds, nanos = _parse_seconds_and_nanos(text)
    if seconds < 0 or (seconds == 0 and nanos == 0):
        raise NonPositiveDuration(f"'{text}' is not a positive duration")
    return max(_to_timedelta(text, seconds, nanos), datetime.timedelta(microseconds=1))


def _parse_seconds_and_nanos(text: str) -> tuple[int, int]:
    """Java's (seconds, nanos) normalisation: nanos in [0, 1e9), seconds carrying the sign."""
    if not isinstance(text, str):
        raise InvalidDuration(f"'{text}' is not a valid ISO-8601 duration")
    match = _JAVA_DURATION.fullmatch(text)
    if match is None:
        raise InvalidDuration(f"'{text}' is not a valid ISO-8601 duration")
    sign, days, t_section, hours, minutes, secs, fraction = match.groups()
    if t_section is not None and hours is None and minutes is None and secs is None:
        raise InvalidDuration(f"'{text}' is not a valid ISO-8601 duration: 'T' must be followed by a time")
    if days is None and t_section is None:
        raise InvalidDuration(f"'{text}' is not a valid ISO-8601 duration: it has no component")
    try:
        total = _add(
            _component(days, 86_400),
            _add(_component(hours, 3600), _add(_component(minutes, 60), _component(secs, 1))),
        )
    except OverflowError:
        raise InvalidDuration(f"'{text}' is not a valid ISO-8601 duration: it is too large") from None
    nanos = 0
    if fraction:
        nanos = int(fraction.ljust(9, "0"))
        if secs is not None and secs.startswith("-"):
            nanos = -nanos
    total_nanos = total * _NANOS_PER_SECOND + nanos
    if sign == "-":
        total_nanos = -total_nanos
    seconds, nanos = divmod(total_nanos, _NANOS_PER_SECOND)
    if not _LONG_MIN <= seconds <= _LONG_MAX:
        raise InvalidDuration(f"'{text}' is not a valid ISO-8601 duration: it is too large")
    return seconds, nanos


def _component(number: str | None, seconds_per_unit: int) -> int:
    if number is None:
        return 0
    value = int(number)
    if not _LONG_MIN <= value <= _LONG_MAX:
        raise OverflowError
    return _checked(value * seconds_per_unit)


def _add(a: int, b: int) -> int:
    return _checked(a + b)


def _checked(value: int) -> int:
    if not _LONG_MIN <= value <= _LONG_MAX:
        raise OverflowError
    return value


def _to_timedelta(text: str, seconds: int, nanos: int) -> datetime.timedelta:
    micros = nanos // 1000
    if seconds < 0 and nanos % 1000:
        # truncate toward zero: -1.0000015s becomes -1.000001s, not -1.000002s
        micros += 1
    try:
        return datetime.timedelta(seconds=seconds, microseconds=micros)
    except OverflowError:
        raise InvalidDuration(f"'{text}' is too large to be represented") from None
