"""ISO-8601 durations read exactly as Java's Duration.parse reads them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from common.durations import (
    InvalidDuration,
    NonPositiveDuration,
    parse_duration,
    positive_duration,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PT30S", timedelta(seconds=30)),
        ("PT15M", timedelta(minutes=15)),
        ("PT2H", timedelta(hours=2)),
        ("P1D", timedelta(days=1)),
        ("PT0.5S", timedelta(milliseconds=500)),
        ("pt2h", timedelta(hours=2)),
        ("P1DT2H", timedelta(days=1, hours=2)),
        ("P1DT2H3M4.25S", timedelta(days=1, hours=2, minutes=3, seconds=4.25)),
        ("+PT1M", timedelta(minutes=1)),
        ("PT1,5S", timedelta(seconds=1.5)),
        ("PT1.S", timedelta(seconds=1)),
        ("PT0.123456789S", timedelta(microseconds=123456)),
        ("PT90M", timedelta(minutes=90)),
    ],
)
def test_java_accepted_durations_parse(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected
    assert positive_duration(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "30m",
        "P1W",
        "P1M",
        "P1Y",
        "P1Y2M",
        "PT",
        "P",
        "",
        "P1DT",
        "P1S",
        "PT1D",
        "PT.5S",
        "PT1.1234567891S",
        "PT1H2H",
        "PT1M1H",
        " PT1S",
        "PT1S ",
        "PT1S\n",
        "PT\u0663S",  # an Arabic-Indic digit: Java's [0-9] is ASCII only
        "PT1\u017f",  # long s folds to 's' only under Unicode case folding, which Java does not use
        "T1H",
        "1D",
    ],
)
def test_durations_java_refuses_are_invalid(text: str) -> None:
    with pytest.raises(InvalidDuration):
        parse_duration(text)
    with pytest.raises(InvalidDuration):
        positive_duration(text)


def test_a_duration_too_large_for_java_is_invalid() -> None:
    with pytest.raises(InvalidDuration):
        parse_duration("PT9223372036854775808S")
    with pytest.raises(InvalidDuration):
        parse_duration("P106751991167301D")


def test_each_component_may_carry_its_own_sign_as_in_java() -> None:
    assert parse_duration("-PT5M") == timedelta(minutes=-5)
    assert parse_duration("PT-5M") == timedelta(minutes=-5)
    assert parse_duration("PT1H-30M") == timedelta(minutes=30)
    assert parse_duration("-PT-0.5S") == timedelta(milliseconds=500)
    assert parse_duration("PT-0.5S") == timedelta(milliseconds=-500)


@pytest.mark.parametrize("text", ["PT0S", "P0D", "PT0.0S", "-PT5M", "PT-5M", "P-1DT1H", "-PT0.5S"])
def test_zero_or_negative_durations_are_not_positive(text: str) -> None:
    parse_duration(text)  # well-formed
    with pytest.raises(NonPositiveDuration):
        positive_duration(text)


def test_a_sub_microsecond_duration_is_positive_and_never_returned_as_zero() -> None:
    assert positive_duration("PT0.0000001S") == timedelta(microseconds=1)


def test_both_failures_are_value_errors() -> None:
    assert issubclass(InvalidDuration, ValueError)
    assert issubclass(NonPositiveDuration, ValueError)
