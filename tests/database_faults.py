"""Injected database faults on a real PostgreSQL connection: errors before a statement, and after a commit.

``DatabaseFaults`` hooks one connection for the length of one operation (``with faults.injected():``):

- **before**: a statement is about to run and ``OperationalError`` is raised instead (the statement never
  reaches the server, as when the connection drops on the way);
- **after commit**: the commit reaches the server and lands, then ``OperationalError`` is raised (the
  reply is lost: the change is in the database, the caller sees an error). Django commits an atomic
  block through ``connection.commit()``, not through ``execute``, so the connection's ``_commit`` is
  wrapped for the operation; a write statement run in autocommit mode commits by itself and is hooked
  the same way, after it ran.

Each statement rolls ``before_rate``, each commit ``after_rate``, on a seeded ``random.Random``: the same
seed and the same sequence of statements give the same faults. The counts say how many were injected.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import OperationalError
from django.db import connection as default_connection

WRITES = ("INSERT", "UPDATE", "DELETE")


class InjectedFault(OperationalError):
    """An injected database fault: an OperationalError, as a dropped connection raises."""


class DatabaseFaults:
    def __init__(
        self,
        rng: random.Random,
        *,
        before_rate: float = 0.05,
        after_rate: float = 0.05,
        connection: Any = None,
    ) -> None:
        self.rng = rng
        self.before_rate, self.after_rate = before_rate, after_rate
        self.connection = connection or default_connection
        self.counts: Counter = Counter()  # "before", "after", "statements", "commits"
        self.fired_in_operation: list[str] = []

    @contextmanager
    def injected(self) -> Iterator[list[str]]:
        """Faults on this connection while the block runs; yields the list of faults fired in it."""
        self.fired_in_operation = []
        wrapper = self.connection
        real_commit = wrapper._commit

        def faulty_commit() -> None:
            real_commit()
            self._after("COMMIT")

        wrapper._commit = faulty_commit  # the instance attribute shadows the method for this operation
        try:
            with wrapper.execute_wrapper(self._statement):
                yield self.fired_in_operation
        finally:
            del wrapper._commit

    def _statement(self, execute: Callable, sql: str, params: Any, many: bool, context: dict) -> Any:
        self.counts["statements"] += 1
        if self.rng.random() < self.before_rate:
            self._fire("before", sql)
        result = execute(sql, params, many, context)
        if not context["connection"].in_atomic_block and sql.lstrip().upper().startswith(WRITES):
            self._after(sql)  # autocommit: this statement committed itself
        return result

    def _after(self, sql: str) -> None:
        self.counts["commits"] += 1
        if self.rng.random() < self.after_rate:
            self._fire("after", sql)

    def _fire(self, when: str, sql: str) -> None:
        self.counts[when] += 1
        self.fired_in_operation.append(when)
        words = " ".join(sql.split()[:3])
        raise InjectedFault(
            f"injected database fault {when} {'commit' if when == 'after' else 'statement'}: {words}"
        )
