"""One way the inbox says when: a relative time ("in 12 min", "3 h 5 min ago", "overdue by 4 min") with
the absolute time on hover, rendered here and kept current in the browser by approvals/hitl_times.js.

The Python and JavaScript formats are the same rules; tests/approvals/test_admin_times.py pins both.
"""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone
from django.utils.dateformat import format as date_format
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

ABSOLUTE_FORMAT = "Y-m-d H:i:s T"
MINUTE, HOUR, DAY = 60, 3600, 86400


def span_text(seconds: float) -> str:
    """A duration as a reviewer reads it at a glance: "<1 min", "12 min", "3 h 5 min", "2 days 4 h"."""
    whole = int(abs(seconds))
    if whole < MINUTE:
        return "<1 min"
    if whole < HOUR:
        return f"{whole // MINUTE} min"
    if whole < 2 * DAY:
        hours, minutes = divmod(whole // MINUTE, 60)
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(whole // HOUR, 24)
    return f"{days} days {hours} h" if hours else f"{days} days"


def relative_text(when: datetime, now: datetime, *, deadline: bool = False) -> str:
    """ "in 12 min" / "12 min ago"; a deadline in the past reads "overdue by 12 min"."""
    seconds = (when - now).total_seconds()
    if seconds >= 0:
        return f"in {span_text(seconds)}"
    return f"overdue by {span_text(seconds)}" if deadline else f"{span_text(seconds)} ago"


def absolute_text(when: datetime) -> str:
    return date_format(timezone.localtime(when), ABSOLUTE_FORMAT)


def time_html(when: datetime | None, *, deadline: bool = False, empty: str = "-") -> SafeString:
    """A <time> element the page script keeps current; a past deadline is marked overdue (class and word)."""
    if when is None:
        return format_html("{}", empty)
    now = timezone.now()
    overdue = deadline and when < now
    return format_html(
        '<time class="hitl-time{}" datetime="{}" title="{}"{}>{}</time>',
        " hitl-overdue" if overdue else "",
        when.isoformat(),
        absolute_text(when),
        mark_safe(' data-deadline="1"') if deadline else "",  # nosec B308  # a constant, no user input
        relative_text(when, now, deadline=deadline),
    )
