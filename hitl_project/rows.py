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


def table(model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


@functools.cache
def _columns(model: type[Model]) -> tuple[str, ...]:
    return tuple(connection.ops.quote_name(field.column) for field in model._meta.concrete_fields)


def select_list(model: type[Model], alias: str) -> str:
    """Every concrete column of ``model``, in field order, qualified by ``alias``."""
    return ", ".join(f"{alias}.{column}" for column in _columns(model))


def width(model: type[Model]) -> int:
    return len(_columns(model))


@functools.cache
def _loading(model: type[Model]) -> tuple[list[str], list[tuple[int, tuple[Converter, ...]]]]:
    fields = model._meta.concrete_fields
    names = [field.attname for field in fields]
    converters = [(i, tuple(field.get_db_converters(connection))) for i, field in enumerate(fields)]
    return names, [(i, found) for i, found in converters if found]


def instance(model: type[M], values: Sequence[Any]) -> M:
    """The instance the ORM would build from ``values`` (one per concrete field, in field order)."""
    names, converters = _loading(model)
    row = list(values)
    for i, found in converters:
        for convert in found:
            row[i] = convert(row[i], None, connection)
    return model.from_db(connection.alias, names, row)
