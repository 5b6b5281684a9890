"""Short leases kept alive by a heartbeat: a running turn or continuation proves it is alive.

Rules:

- A claim (a continuation's ``Pause.lease_until``, a turn's ``Conversation.turn_alive_until``) is short:
  ``HITL_CONTINUATION_LEASE_SECONDS`` (15 s). While the work runs, the process's heartbeat thread (one
  per process, for every claim it holds) pushes it forward every ``HITL_LEASE_RENEW_SECONDS`` (5 s), on
  a database connection of its own.
- When the process dies, the heartbeat dies with it and the claim expires within one lease; crash
  recovery, swept every few seconds (``approvals.recovery.recover_expired_leases``), then restores the
  pause to PENDING or interrupts the turn: back in the inbox within 30 s, never run twice.
- Work that ends before the first renewal never touches the database from the heartbeat.
- A turn that runs in one transaction (conversations.local_turns) commits no claim, so it needs no lease.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, connections, transaction
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
    """Run the block while the process's heartbeat calls ``renew(new expiry)`` every ``renew_seconds()``.

    One heartbeat thread per process serves every lease it keeps alive (``_Heartbeat``): entering and
    leaving costs a registration, not a thread, so work that ends before its first renewal (a
    continuation of local tasks) pays next to nothing. When the block ends, no renewal of it runs any
    more: leaving waits for one in flight. A renewal waits at most a second for a row lock (then it is
    retried at the next beat), so one blocked renewal cannot hold up the others past their lease."""
    key = _HEARTBEAT.add(renew, what)
    try:
        yield
    finally:
        _HEARTBEAT.remove(key)


class _Heartbeat:
    """The process's one heartbeat thread and the renewals it runs, each every ``renew_seconds()``."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._due: dict[int, list[Any]] = {}  # key -> [renew, what, when it is next due (monotonic)]
        self._keys = itertools.count()
        self._running: int | None = None  # the key whose renewal runs now
        self._thread: threading.Thread | None = None

    def add(self, renew: Callable[[datetime], object], what: str) -> int:
        with self._changed:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._beat, name="hitl-lease-heartbeat", daemon=True)
                self._thread.start()
            key = next(self._keys)
            self._due[key] = [renew, what, time.monotonic() + renew_seconds()]
            self._changed.notify_all()
            return key

    def remove(self, key: int) -> None:
        with self._changed:
            self._due.pop(key, None)
            while self._running == key:
                self._changed.wait()

    def _beat(self) -> None:
        while True:
            with self._changed:
                now = time.monotonic()
                due = [key for key, (_, _, at) in self._due.items() if at <= now]
                if not due:
                    soonest = min((at for _, _, at in self._due.values()), default=None)
                    self._changed.wait(None if soonest is None else soonest - now)
                    continue
            for key in due:
                self._renew(key)
            connections.close_all()  # this thread's own connections only, back to the pool between beats

    def _renew(self, key: int) -> None:
        with self._changed:
            entry = self._due.get(key)
            if entry is None:  # its work ended meanwhile
                return
            entry[2] = time.monotonic() + renew_seconds()
            renew, what = entry[0], entry[1]
            self._running = key
        try:
            with transaction.atomic():
                if connection.vendor == "postgresql":
                    # One renewal waiting on a row lock (its own turn's, say) must not hold up the others'.
                    with connection.cursor() as cursor:
                        cursor.execute("SET LOCAL lock_timeout = '1s'")
                renew(lease_expiry())
        except Exception:  # a missed beat is survivable; the next one tries again
            logger.exception("could not renew the lease of %s", what)
        finally:
            with self._changed:
                self._running = None
                self._changed.notify_all()


_HEARTBEAT = _Heartbeat()


def _new_heartbeat_after_fork() -> None:
    """A forked child (a q-cluster worker) starts with no heartbeat thread and no lock held."""
    global _HEARTBEAT
    _HEARTBEAT = _Heartbeat()


os.register_at_fork(after_in_child=_new_heartbeat_after_fork)
