"""The request rates of the throttles (common/throttles.py), checked where the settings are read: a
rate that is not one refuses to start every process (web, manage.py, q-cluster) rather than failing each
request or being guessed."""

from __future__ import annotations

import re

from django.core.exceptions import ImproperlyConfigured

OFF = "off"
RATE = re.compile(r"^\s*(\d+)\s*/\s*(s|sec|second|m|min|minute|h|hour|d|day)\s*$", re.IGNORECASE)


def throttle_rate(value: str, *, setting: str = "a throttle rate") -> str:
    """``N/<period>`` as DRF reads it (``60/min``), or ``off`` for an empty value or ``off``."""
    text = (value or "").strip()
    if text.lower() in ("", OFF):
        return OFF
    match = RATE.match(text)
    if match is None or int(match.group(1)) < 1:
        raise ImproperlyConfigured(
            f"{setting}={text!r} is not a rate: write N/s, N/min, N/hour or N/day (N at least 1), or off"
        )
    return f"{int(match.group(1))}/{match.group(2).lower()}"
