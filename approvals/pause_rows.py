"""A new pause's writes in one statement: its timer's schedule, the pause, and the lock on its subject's
audit head, which the ``hitl.pause`` entry appended next needs (decision record 0006).

The pause takes its schedule's key inside the statement, so it is written once with it; the head is
created if missing and locked until the transaction ends, as ``approvals.audit`` locks it itself. The
three are data-modifying parts of one statement: they land together or the statement fails whole.
"""

from __future__ import annotations

import functools

from django.db import connection
from django_q.models import Schedule

from approvals.audit import lock_head_sql, locked_head_from
from approvals.models import AuditHead, Pause
from common import rows


def _schedule_fields() -> list:
    meta = Schedule._meta
    return [field for field in meta.concrete_fields if field is not meta.pk]


def _pause_fields() -> list:
    return [field for field in Pause._meta.concrete_fields if field.attname != "schedule_id"]


@functools.cache
def _insert_sql(with_schedule: bool) -> str:
    """``WITH timer AS (INSERT schedule), pause AS (INSERT pause), head AS (lock the pause's subject's head)``,
    answering the schedule's key (NULL without one) and the head's id, last sequence and last hash. The
    head takes its subject from the inserted pause: it is locked after the pause is written, and the
    statement keeps few enough parameters for psycopg to cache its parsing."""
    quote = connection.ops.quote_name
    parts = [f"timer AS ({rows.insert_sql(Schedule, True)})"] if with_schedule else []
    fields = _pause_fields()
    columns = ", ".join(quote(field.column) for field in fields)
    timer = "(SELECT id FROM timer)" if with_schedule else "NULL"
    values = ", ".join(["%s"] * len(fields))
    parts.append(
        f"pause AS (INSERT INTO {rows.table(Pause)} ({columns}, {quote('schedule_id')}) "  # nosec B608  # identifiers from model metadata, values are parameters
        f"VALUES ({values}, {timer}) RETURNING subject_type, subject_id, schedule_id)"
    )
    parts.append(f"head AS ({lock_head_sql('pause')})")
    return (
        f"WITH {', '.join(parts)} "  # nosec B608  # identifiers from model metadata, values are parameters
        "SELECT pause.schedule_id, head.id, head.last_sequence, head.last_hash FROM pause, head"
    )


def insert_pause(pause: Pause, schedule: Schedule | None) -> AuditHead | None:
    """Insert ``schedule`` (when the pause has a timer) and ``pause`` with its key, and lock the audit head
    of the pause's subject, in the caller's transaction: the head, for
    ``append_audit_entry(head=...)``. Off PostgreSQL the ORM's inserts, and None (the append locks it)."""
    if not rows.on_postgresql():
        if schedule is not None:
            rows.insert(schedule)
            pause.schedule_id = schedule.pk
        rows.insert(pause)
        return None
    params = rows.insert_values(schedule, _schedule_fields()) if schedule is not None else []
    params += rows.insert_values(pause, _pause_fields())
    found = rows.fetch_one(_insert_sql(schedule is not None), params)
    if found is None:  # the INSERT ... VALUES and the upsert each answer their one row, or raise
        raise RuntimeError(f"pause {pause.pk} was not inserted")
    if schedule is not None:
        schedule.pk, schedule._state.adding, schedule._state.db = found[0], False, connection.alias
    pause.schedule_id = found[0]
    pause._state.adding, pause._state.db = False, connection.alias
    return locked_head_from(pause.subject_type, pause.subject_id, found[1:])
