"""An audit entry appended inside a statement of the caller's, on the head an earlier read saw
(decision record 0015).

A read on the way to a change (a decision's access check, ``find_on_version(with_pending=True)``) also
reads the subject's audit head, unlocked: ``seen_head_join`` and ``seen_head_from``. The statement that
makes the change (the decision's move of its conversation to running, ``conversations.resume_rows``)
then carries the entry that follows that head (``AuditDraft.after``) as two more data-modifying parts
(``appended_parts``): a compare-and-set that moves the head from what was seen to the new entry, and
the entry's insert, which runs only when the compare-and-set won. When the head moved since the read
(another append committed, or one is in flight and commits first: the compare-and-set waits for its
lock, then finds a different head), nothing of the entry is written and the caller appends it the
locked way (``append_draft``): the chain never takes an entry on a head it did not find. A head that
did not exist when read is created by the same part, or is left to the locked way when someone else
created it first.

The parts add ``len(appended_params(...))`` parameters (19 to 21) to the statement: psycopg caches its
parsing of a statement only up to 50 parameters, and parses a longer one afresh on every execution
(about 140 µs for the pause's statement), which would cost more than the statement saved. A pause's
own statement is at that limit already, so its ``hitl.pause`` entry is appended the locked way.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection

from approvals.audit import AuditDraft
from approvals.models import AuditEntry, AuditHead
from common import rows

SEEN_HEAD_WIDTH = 3


@dataclass(frozen=True)
class SeenHead:
    """A subject's audit head as a read saw it, unlocked: whether its row existed, and where it was."""

    exists: bool
    last_sequence: int = 0
    last_hash: str = ""


def seen_head_join(alias: str, subject_type: str, subject_id: str) -> tuple[str, str]:
    """The select list (``SEEN_HEAD_WIDTH`` columns) and the LEFT JOIN that read the head of the subject
    whose type is the literal ``subject_type`` (a ``SubjectType`` value, from code) and whose id is the SQL
    expression ``subject_id``, as ``alias``."""
    table = rows.table(AuditHead)
    select = f'{alias}."id" IS NOT NULL, {alias}."last_sequence", {alias}."last_hash"'
    join = (
        f"LEFT JOIN {table} {alias} ON {alias}.\"subject_type\" = '{subject_type}' "
        f'AND {alias}."subject_id" = {subject_id}'
    )
    return select, join


def seen_head_from(values: Sequence[Any]) -> SeenHead:
    """The head ``seen_head_join``'s columns read."""
    exists, last_sequence, last_hash = values
    return SeenHead(True, last_sequence, last_hash) if exists else SeenHead(False)


def _entry_fields() -> list:
    return [field for field in AuditEntry._meta.concrete_fields if not field.primary_key]


@functools.cache
def appended_parts(head_exists: bool, after: str) -> str:
    """``advanced AS (...), appended AS (...)``: the head's compare-and-set and the entry's insert, as
    parts of a data-modifying WITH, run after its part ``after`` (a name; its one row is the change
    the entry records: no row, nothing appended). The caller selects ``(SELECT id FROM appended)``:
    the entry's key, NULL when the head had moved."""
    head = rows.table(AuditHead)
    if head_exists:
        advanced = (
            f'UPDATE {head} SET "last_sequence" = %s, "last_hash" = %s WHERE "subject_type" = %s '  # nosec B608  # identifiers from model metadata, values are parameters
            f'AND "subject_id" = %s AND "last_sequence" = %s AND "last_hash" = %s '
            f"AND EXISTS (SELECT 1 FROM {after}) RETURNING 1"
        )
    else:
        advanced = (
            f'INSERT INTO {head} ("last_sequence", "last_hash", "subject_type", "subject_id") '  # nosec B608  # identifiers from model metadata, values are parameters
            f"SELECT %s::bigint, %s::varchar, %s::varchar, %s::uuid FROM {after} "
            f'ON CONFLICT ("subject_type", "subject_id") DO NOTHING RETURNING 1'
        )
    fields = _entry_fields()
    quote = connection.ops.quote_name
    columns = ", ".join(quote(field.column) for field in fields)
    # typed: an untyped parameter in a select list would be taken for text
    values = ", ".join(f"%s::{field.db_type(connection)}" for field in fields)
    return (
        f"advanced AS ({advanced}), "  # nosec B608  # identifiers from model metadata, values are parameters
        f"appended AS (INSERT INTO {rows.table(AuditEntry)} ({columns}) SELECT {values} FROM advanced "
        f"RETURNING {quote(AuditEntry._meta.pk.column)})"
    )


def appended_params(seen: SeenHead, entry: AuditEntry) -> list[Any]:
    """The parameters of ``appended_parts(seen.exists, ...)`` for ``entry`` (``AuditDraft.after`` the
    seen head), in the order of the parts."""
    moved = [entry.sequence, entry.entry_hash, entry.subject_type, entry.subject_id]
    if seen.exists:
        moved += [seen.last_sequence, seen.last_hash]
    return [*moved, *rows.insert_values(entry, _entry_fields())]


def mark_appended(entry: AuditEntry, entry_id: int) -> AuditEntry:
    """The entry as its insert left it (its key read back)."""
    entry.pk = entry_id
    entry._state.adding, entry._state.db = False, connection.alias
    return entry


def entry_on(seen: SeenHead | None, draft: AuditDraft) -> AuditEntry | None:
    """The entry that follows the seen head (None: no head was read, nothing to try)."""
    if seen is None or not rows.on_postgresql():
        return None
    return draft.after(seen.last_sequence, seen.last_hash)


__all__ = [
    "SEEN_HEAD_WIDTH",
    "SeenHead",
    "appended_parts",
    "appended_params",
    "entry_on",
    "mark_appended",
    "seen_head_from",
    "seen_head_join",
]
