"""Model instances from hand-written SQL, for the few reads every request of the approval cycle makes.

Building and compiling a queryset costs more Python than the query it sends (issue 11: about 40 % of a
web worker's time went to the ORM). The hottest reads are written as SQL once and their rows turned
into model instances here, exactly as the ORM would: every concrete field in order, each field's own
database converters applied (JSON text decoded), the instance marked as loaded from the database.

    SQL = f"SELECT {select_list(Conversation, 'c')} FROM {table(Conversation)} c WHERE c.id = %s"
    conversation = instance(Conversation, row)          # row: the values in select_list's order
    width(Conversation)                                 # how many of a row's values it takes

PostgreSQL only: callers keep the ORM path for the SQLite fallback.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from django.db import connection
from django.db.models import Model

M = TypeVar("M", bound=Model)

Converter = Callable[[Any, Any, Any], Any]


def on_postgresql() -> bool:
    return connection.vendor == "postgresql"


def table(model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


@functools.cache
def _fields(model: type[Model], without: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(field for field in model._meta.concrete_fields if field.name not in without)


def select_list(model: type[Model], alias: str, without: tuple[str, ...] = ()) -> str:
    """Every concrete column of ``model`` but ``without`` (field names, left deferred), in field order,
    qualified by ``alias``."""
    return ", ".join(f"{alias}.{connection.ops.quote_name(field.column)}" for field in _fields(model, without))


def width(model: type[Model], without: tuple[str, ...] = ()) -> int:
    return len(_fields(model, without))


@functools.cache
def _loading(model: type[Model], without: tuple[str, ...]) -> tuple[list[str], list[tuple[int, tuple[Converter, ...]]]]:
    fields = _fields(model, without)
    names = [field.attname for field in fields]
    converters = [(i, tuple(field.get_db_converters(connection))) for i, field in enumerate(fields)]
    return names, [(i, found) for i, found in converters if found]


def instance(model: type[M], values: Sequence[Any], without: tuple[str, ...] = ()) -> M:
    """The instance the ORM would build from ``values`` (one per selected field, in field order)."""
    names, converters = _loading(model, without)
    row = list(values)
    for i, found in converters:
        for convert in found:
            row[i] = convert(row[i], None, connection)
    return model.from_db(connection.alias, names, row)


def instances(model: type[M], rows: Sequence[Sequence[Any]], without: tuple[str, ...] = ()) -> list[M]:
    return [instance(model, row, without) for row in rows]


def split(row: Sequence[Any], *widths: int) -> list[Sequence[Any]]:
    """``row`` cut into consecutive pieces of the given widths (a join's models, side by side)."""
    pieces, at = [], 0
    for count in widths:
        pieces.append(row[at:at + count])
        at += count
    return pieces


def nothing_in(values: Sequence[Any]) -> bool:
    """A LEFT JOIN that matched no row: every value of its piece is NULL."""
    return all(value is None for value in values)


def fetch_one(sql: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


def fetch_all(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()
