"""The one time format of the inbox: relative, absolute on hover, a passed deadline overdue.

tests/browser/test_admin_times_browser.py checks that the page script (approvals/hitl_times.js) says the
same as these rules, and keeps it current without a reload.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from approvals.admin.times import relative_text, span_text, time_html

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

CASES = [
    (timedelta(seconds=20), False, "in <1 min"),
    (timedelta(minutes=12, seconds=59), False, "in 12 min"),
    (timedelta(hours=3, minutes=5), False, "in 3 h 5 min"),
    (timedelta(hours=2), False, "in 2 h"),
    (timedelta(hours=47, minutes=59), False, "in 47 h 59 min"),
    (timedelta(days=2, hours=4, minutes=30), False, "in 2 days 4 h"),
    (timedelta(days=9), False, "in 9 days"),
    (-timedelta(minutes=3), False, "3 min ago"),
    (-timedelta(hours=1, minutes=1), False, "1 h 1 min ago"),
    (-timedelta(minutes=4, seconds=30), True, "overdue by 4 min"),
    (-timedelta(seconds=5), True, "overdue by <1 min"),
    (timedelta(minutes=4), True, "in 4 min"),
]


@pytest.mark.parametrize(("offset", "deadline", "expected"), CASES)
def test_relative_text(offset: timedelta, deadline: bool, expected: str) -> None:
    assert relative_text(NOW + offset, NOW, deadline=deadline) == expected


def test_span_text_counts_whole_units_down_never_up() -> None:
    assert span_text(59.9) == "<1 min"
    assert span_text(3599) == "59 min"


def test_time_html_carries_the_absolute_time_and_marks_a_passed_deadline(settings) -> None:
    settings.TIME_ZONE = "UTC"
    html = time_html(datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC), deadline=True)
    assert 'datetime="2020-01-02T03:04:05+00:00"' in html
    assert 'title="2020-01-02 03:04:05 UTC"' in html
    assert 'class="hitl-time hitl-overdue"' in html and 'data-deadline="1"' in html
    assert ">overdue by " in html
    assert time_html(None) == "-" and time_html(None, empty="none") == "none"
