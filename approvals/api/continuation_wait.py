"""``?wait``: a deciding request that holds its answer until the decision's continuation has run."""

from __future__ import annotations

import time
from typing import Any

from approvals.continuation_runs import CONTINUED, QUEUED, RESTORED
from approvals.models import PauseStatus
from approvals.selectors import pause_status

MAX_WAIT = 60.0


def clamp_wait(value: Any) -> float:
    """``?wait``'s seconds, 0..60; anything that is not a number is 0 (no wait)."""
    try:
        return max(0.0, min(MAX_WAIT, float(value)))
    except (TypeError, ValueError):
        return 0.0


def wait_until_settled(pause_id: Any, wait: float) -> str:
    """Poll until the q-cluster has run the continuation or ``wait`` seconds passed (the request's worker,
    or under ASGI its thread, waits with it). ``CONTINUED`` once it ran, ``RESTORED`` when it could not
    start (the pause is pending again), ``QUEUED`` when it still runs."""
    deadline = time.monotonic() + wait
    while True:
        current = pause_status(pause_id=pause_id)
        if current != PauseStatus.RESOLVING:
            return RESTORED if current == PauseStatus.PENDING else CONTINUED
        if time.monotonic() >= deadline:
            return QUEUED
        time.sleep(0.05)
