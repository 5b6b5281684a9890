"""Injected database faults on a real PostgreSQL connection: errors before a statement, and after a commit.

``DatabaseFaults`` hooks one connection for the length of one operation (``with faults.injected():``):

- **before**: a statement is about to run and ``OperationalError`` is raised instead (the statement never
  reaches the server, as when the connection drops on the way);
- **after commit**: the commit reaches the server and lands, then ``OperationalError`` is raised (the
  reply is lost: the change is in the database, the caller sees an error). Django commits an atomic
  block through ``connection.commit()``, not through ``execute``, so the connection's ``_commit`` is
  wrapped for the operation; a write statement run in autocommit mode (one that begins with a write, or
  a WITH with a part that writes) commits by itself and is hooked the same way, after it ran.

Each statement rolls ``before_rate``, each commit ``after_rate``, on a seeded ``random.Random``: the same
seed and the same sequence of statements give the same faults. The counts say how many were injected.
``one_fault`` places a single fault instead: before the first statement that contains a text, or after
the n-th commit of the operation (the regression tests of each rule).
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


def writes(sql: str) -> bool:
    """Whether a statement writes: it begins with a write, or it is a WITH with a part that writes."""
    head = sql.lstrip().upper()
    return head.startswith(WRITES) or (head.startswith("WITH") and any(f"{word} " in head for word in WRITES))


class InjectedFault(OperationalError):
    """An injected database fault: an OperationalError, as a dropped connection raises."""


def one_fault(
    *, before_sql: str | tuple[str, ...] | None = None, after_commit: int | None = None
) -> DatabaseFaults:
    """A single fault: before the first statement containing ``before_sql`` (a tuple: one fault before
    each text's first statement, in that order), or after commit number ``after_commit`` (counting from
    1 within the injector's life)."""
    return DatabaseFaults(before_sql=before_sql, after_commit=after_commit)


class DatabaseFaults:
    def __init__(
        self,
        rng: random.Random | None = None,
        *,
        before_rate: float = 0.05,
        after_rate: float = 0.05,
        before_sql: str | tuple[str, ...] | None = None,
        after_commit: int | None = None,
        connection: Any = None,
    ) -> None:
        self.rng = rng or random.Random(0)
        self.before_rate, self.after_rate = before_rate, after_rate
        self.before_sql, self.after_commit = before_sql, after_commit
        self.targeted = before_sql is not None or after_commit is not None  # one fault, no dice
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
        if self.targeted:
            wanted = (self.before_sql,) if isinstance(self.before_sql, str) else self.before_sql or ()
            if self.counts["before"] < len(wanted) and wanted[self.counts["before"]] in sql:
                self._fire("before", sql)
        elif self.rng.random() < self.before_rate:
            self._fire("before", sql)
        result = execute(sql, params, many, context)
        if not context["connection"].in_atomic_block and writes(sql):
            self._after(sql)  # autocommit: this statement committed itself
        return result

    def _after(self, sql: str) -> None:
        self.counts["commits"] += 1
        if self.targeted:
            if self.counts["commits"] == self.after_commit:
                self._fire("after", sql)
        elif self.rng.random() < self.after_rate:
            self._fire("after", sql)

    def _fire(self, when: str, sql: str) -> None:
        self.counts[when] += 1
        self.fired_in_operation.append(when)
        words = " ".join(sql.split()[:3])
        raise InjectedFault(
            f"injected database fault {when} {'commit' if when == 'after' else 'statement'}: {words}"
        )
