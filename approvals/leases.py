"""Short leases kept alive by a heartbeat: a running turn or continuation proves it is alive.

Rules:

- A claim (a continuation's ``Pause.lease_until``, a turn's ``Conversation.turn_alive_until``) is short:
  ``HITL_CONTINUATION_LEASE_SECONDS`` (15 s). While the work runs, a heartbeat thread of the same process
  pushes it forward every ``HITL_LEASE_RENEW_SECONDS`` (5 s), on a database connection of its own.
- When the process dies, the heartbeat dies with it and the claim expires within one lease; crash
  recovery, swept every few seconds (``approvals.recovery.recover_expired_leases``), then restores the
  pause to PENDING or interrupts the turn: back in the inbox within 30 s, never run twice.
- Work that ends before the first renewal never touches the database from the heartbeat.
- A turn that runs in one transaction (conversations.local_turns) commits no claim, so it needs no lease.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connections
from django.utils import timezone

logger = logging.getLogger(__name__)


def lease_seconds() -> int:
    return max(1, int(settings.HITL_CONTINUATION_LEASE_SECONDS))


def lease_expiry(now: datetime | None = None) -> datetime:
    return (now or timezone.now()) + timedelta(seconds=lease_seconds())


def renew_seconds() -> float:
    """Renew well inside the lease, so one late beat never lets a live claim expire."""
    return max(0.05, min(float(settings.HITL_LEASE_RENEW_SECONDS), lease_seconds() / 3))


@contextmanager
def kept_alive(renew: Callable[[datetime], object], *, what: str) -> Iterator[None]:
    """Run the block while a heartbeat calls ``renew(new expiry)`` every ``renew_seconds()``."""
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(renew_seconds()):
                try:
                    renew(lease_expiry())
                except Exception:  # a missed beat is survivable; the next one tries again
                    logger.exception("could not renew the lease of %s", what)
        finally:
            connections.close_all()  # this thread's own connections only

    heart = threading.Thread(target=beat, name=f"hitl-lease {what}", daemon=True)
    heart.start()
    try:
        yield
    finally:
        stop.set()
        heart.join(timeout=renew_seconds() + 5)
