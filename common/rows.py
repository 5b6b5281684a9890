"""Hand-written SQL for the statements every request of the approval cycle makes (decision record 0006).

Building and compiling a queryset costs more Python than the query it sends (profiled: about 40 % of a
web worker's time went to the ORM). The hottest reads are written as SQL once and their rows turned
into model instances here, exactly as the ORM would: every concrete field in order, each field's own
database converters applied (JSON text decoded), the instance marked as loaded from the database.

    SQL = f"SELECT {select_list(Conversation, 'c')} FROM {table(Conversation)} c WHERE c.id = %s"
    conversation = instance(Conversation, row)          # row: the values in select_list's order
    width(Conversation)                                 # how many of a row's values it takes

The writes (``insert``, ``update``, ``delete``) build their statement once per model and shape, and
prepare each value as the ORM does. Column lists come from ``_meta``; filter keys come from code, never
from a request.

Reads are PostgreSQL only: their callers keep the ORM path for the SQLite fallback (``on_postgresql``).
The writes fall back to the ORM themselves.
"""

from __future__ import annotations

import datetime
import functools
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connection, connections, models
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper
from django.db.models import Model
from django.db.models.base import ModelState
from django.db.models.fields.related_descriptors import ForeignKeyDeferredAttribute
from django.db.models.query_utils import DeferredAttribute
from django.db.models.signals import post_init, pre_init
from psycopg.types.json import Jsonb

from common import json_columns

M = TypeVar("M", bound=Model)

Converter = Callable[[Any, Any, Any], Any]


def current() -> Any:
    """This thread's connection itself: ``django.db.connection`` is a proxy that looks it up again on
    every attribute, and preparing a row's values reads it many times."""
    return connections[DEFAULT_DB_ALIAS]


KEPT_CURSOR = "_rows_kept_cursor"


def kept_cursor() -> CursorWrapper:
    """A cursor on this thread's connection for the hand-written statements, kept for as long as that
    connection: not closed by its callers (no ``with``), each of which reads its rows at once.

    A new psycopg cursor looks up its loaders and dumpers afresh, which costs about a third of the CPU
    of a small statement (measured ~30 of ~110 µs): a request of the approval cycle makes several.
    Everything else ``connection.cursor()`` does is kept: the health check and the connection made on
    first use, the thread check, the database errors turned into Django's, the execute wrappers, and a
    debug cursor while queries are logged (a new wrapper when that changes). psycopg's pool hands its
    connections out in turn, so a request seldom gets the one its thread had last: the psycopg cursor is
    kept on the psycopg connection itself, and whichever thread holds that connection uses it.
    """
    db = current()
    db.close_if_health_check_failed()
    db.ensure_connection()
    db.validate_thread_sharing()
    kept = db.__dict__.get(KEPT_CURSOR)
    if (
        kept is None
        or kept.cursor.connection is not db.connection
        or kept.cursor.closed
        or isinstance(kept, CursorDebugWrapper) is not db.queries_logged
    ):
        raw = getattr(db.connection, KEPT_CURSOR, None)  # psycopg's: made on this connection before
        if raw is None or raw.closed:
            with db.wrap_database_errors:
                raw = db.create_cursor()
            raw.__class__ = _keeping_its_adapters(type(raw))
            setattr(db.connection, KEPT_CURSOR, raw)
        kept = db._prepare_cursor(raw)
        db.__dict__[KEPT_CURSOR] = kept
    return kept


@functools.cache
def _keeping_its_adapters(cursor_class: type) -> type:
    """``cursor_class`` (Django's psycopg cursor), keeping the dumpers and loaders it has looked up from
    one statement to the next.

    psycopg keeps a cursor's Transformer (the dumper of each Python type and the loader of each column
    type it has met, each looked up and made on first use) only while the same query object runs again;
    for any other query it makes a new one and looks them all up afresh. The hand-written statements
    alternate, so every one of them paid that: about 0.7 M of a cycle's 17.5 M instructions through the
    REST views. What a Transformer caches depends on the connection's adapters, never on the query: a
    dumper is looked up by its value's type (and by the value, where that picks the dumper: an integer's
    size, a list's items) and a loader by its column's type, on every statement alike. So this cursor
    takes every query for the one before (``_last_query``), and psycopg keeps its Transformer.
    ``tests/test_hand_written_sql.py`` checks that it is kept, and that values of changing types
    alternate between statements as a new cursor reads them.
    """

    class KeepingItsAdapters(cursor_class):  # type: ignore[valid-type,misc]  # a class known at run time
        def _start_query(self, query: Any = None) -> Any:
            if getattr(self, "_tx", None) is not None:  # none before the first statement
                self._last_query = query
            return super()._start_query(query)

    KeepingItsAdapters.__name__ = KeepingItsAdapters.__qualname__ = (
        f"KeepingItsAdapters{cursor_class.__name__}"
    )
    return KeepingItsAdapters


@functools.cache
def _vendor() -> str:
    return current().vendor  # the backend's, the same for every connection of the process


def on_postgresql() -> bool:
    return _vendor() == "postgresql"


def table(model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


@functools.cache
def _fields(model: type[Model], without: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(field for field in model._meta.concrete_fields if field.name not in without)


def _converters(field: Any) -> tuple[Converter, ...]:
    """The field's database converters; a plain JSON field's decoding by ``json_columns`` instead of its
    ``from_db_value`` (the same values)."""
    if json_columns.plain_json_field(field):
        return (json_columns.from_db,)
    return tuple(field.get_db_converters(connection))


def select_list(model: type[Model], alias: str, without: tuple[str, ...] = ()) -> str:
    """Every concrete column of ``model`` but ``without`` (field names, left deferred), in field order,
    qualified by ``alias``."""
    return ", ".join(
        f"{alias}.{connection.ops.quote_name(field.column)}" for field in _fields(model, without)
    )


def width(model: type[Model], without: tuple[str, ...] = ()) -> int:
    return len(_fields(model, without))


@functools.cache
def _loading(
    model: type[Model], without: tuple[str, ...]
) -> tuple[list[str], list[tuple[int, tuple[Converter, ...]]], bool]:
    fields = _fields(model, without)
    names = [field.attname for field in fields]
    converters = [(i, _converters(field)) for i, field in enumerate(fields)]
    return names, [(i, found) for i, found in converters if found], _plain(model)


def _plain(model: type[Model]) -> bool:
    """Whether ``Model.__init__`` would only store each value under its attname: neither ``__init__`` nor
    ``from_db`` overridden, and every concrete field's attribute a plain deferred one (a foreign key's only
    clears a cached related object, which a new instance has none of)."""
    return (
        model.__init__ is Model.__init__
        and model.from_db.__func__ is Model.from_db.__func__
        and all(
            type(getattr(model, field.attname, None)) in (DeferredAttribute, ForeignKeyDeferredAttribute)
            for field in model._meta.concrete_fields
        )
    )


def instance(model: type[M], values: Sequence[Any], without: tuple[str, ...] = ()) -> M:
    """The instance the ORM would build from ``values`` (one per selected field, in field order).

    ``Model.from_db`` does it through ``__init__``, which sends ``pre_init`` and ``post_init`` and sets
    each value through its field's attribute; for a plain model (``_plain``) with no receiver of either
    signal, the instance is built as that leaves it, at a fraction of the cost: the values in its
    ``__dict__`` (a field left out stays deferred, as ``from_db`` leaves it) and its state loaded from
    the default database, whose connection ``current()`` is."""
    names, converters, plain = _loading(model, without)
    row = list(values)
    if converters:  # most models have none on PostgreSQL: the connection is not looked up for them
        db = current()
        for i, found in converters:
            for convert in found:
                row[i] = convert(row[i], None, db)
    if not plain or pre_init.has_listeners(model) or post_init.has_listeners(model):
        return model.from_db(DEFAULT_DB_ALIAS, names, row)
    built = model.__new__(model)
    state = ModelState()
    state.adding, state.db = False, DEFAULT_DB_ALIAS
    built.__dict__["_state"] = state
    built.__dict__.update(zip(names, row, strict=True))
    return built


def column_value(model: type[Model], name: str, value: Any) -> Any:
    """One column's value as ``instance`` would set it on the field ``name`` of ``model``."""
    db = current()
    for convert in _converters(model._meta.get_field(name)):
        value = convert(value, None, db)
    return value


def instances(model: type[M], rows: Sequence[Sequence[Any]], without: tuple[str, ...] = ()) -> list[M]:
    return [instance(model, row, without) for row in rows]


def split(row: Sequence[Any], *widths: int) -> list[Sequence[Any]]:
    """``row`` cut into consecutive pieces of the given widths (a join's models, side by side)."""
    pieces, at = [], 0
    for count in widths:
        pieces.append(row[at : at + count])
        at += count
    return pieces


def nothing_in(values: Sequence[Any]) -> bool:
    """A LEFT JOIN that matched no row: every value of its piece is NULL."""
    return all(value is None for value in values)


def fetch_one(sql: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
    cursor = kept_cursor()
    cursor.execute(sql, params)
    return cursor.fetchone()


def fetch_all(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    cursor = kept_cursor()
    cursor.execute(sql, params)
    return cursor.fetchall()


def insert(obj: Model) -> None:
    """``obj.save(force_insert=True)`` for a new row, with its SQL built once per model: each field's
    ``pre_save`` (``auto_now_add``) and database preparation as the ORM does them, an auto-increment key
    read back with RETURNING. Neither the model's own ``save()`` nor its signals run: only for models
    where they add nothing (ours have no receivers)."""
    if not on_postgresql():
        obj.save(force_insert=True)
        return
    model = type(obj)
    meta = model._meta
    generated = meta.pk if meta.pk.db_returning and getattr(obj, meta.pk.attname) is None else None
    fields = [field for field in meta.concrete_fields if field is not generated]
    values = insert_values(obj, fields)
    db = current()
    cursor = kept_cursor()
    cursor.execute(insert_sql(model, generated is not None), values)
    if generated is not None:
        setattr(obj, generated.attname, cursor.fetchone()[0])
    obj._state.adding = False
    obj._state.db = db.alias


def insert_together(*objs: Model) -> None:
    """``insert`` of each of ``objs`` as one statement (each INSERT a part of a data-modifying WITH): they
    land together or not at all. A foreign key is checked at the statement's end, so a row may refer to
    one inserted with it."""
    if not on_postgresql():
        for obj in objs:
            insert(obj)
        return
    shape, params = [], []
    for obj in objs:
        meta = type(obj)._meta
        generated = meta.pk if meta.pk.db_returning and getattr(obj, meta.pk.attname) is None else None
        params += insert_values(obj, [field for field in meta.concrete_fields if field is not generated])
        shape.append((type(obj), generated is not None))
    db = current()
    cursor = kept_cursor()
    cursor.execute(_insert_together_sql(tuple(shape)), params)
    keys = cursor.fetchone()
    for obj, (model, returns_key), key in zip(objs, shape, keys, strict=True):
        if returns_key:
            setattr(obj, model._meta.pk.attname, key)
        obj._state.adding = False
        obj._state.db = db.alias


@functools.cache
def _insert_together_sql(shape: tuple[tuple[type[Model], bool], ...]) -> str:
    parts = [
        f"i{number} AS ({insert_sql(model, returns_key)})"
        for number, (model, returns_key) in enumerate(shape)
    ]
    keys = [
        f"(SELECT {connection.ops.quote_name(model._meta.pk.column)} FROM i{number})"  # nosec B608  # identifiers from model metadata, values are parameters
        if returns_key
        else "NULL"
        for number, (model, returns_key) in enumerate(shape)
    ]
    return f"WITH {', '.join(parts)} SELECT {', '.join(keys)}"


def insert_values(obj: Model, fields: Sequence[Any]) -> list[Any]:
    """The values an INSERT of ``obj`` stores in ``fields``: each field's ``pre_save`` (``auto_now_add``)
    and database preparation, as the ORM does them."""
    db = current()
    return [prepared(field, field.pre_save(obj, True), db) for field in fields]


# The values each field class hands PostgreSQL unchanged (its exact class: a subclass may prepare its
# values otherwise); a datetime only when aware. Not integers: the backend wraps them in the type of
# their column (psycopg's Int4, Int8), which its server-side binding sends. Checked against Django for
# every field of the models the hand-written statements write (tests/test_hand_written_sql.py).
_UNCHANGED: dict[type[Any], tuple[type[Any], ...]] = {
    **dict.fromkeys((models.CharField, models.TextField), (str,)),
    models.BooleanField: (bool,),
    models.UUIDField: (uuid.UUID,),
    models.DateTimeField: (datetime.datetime,),
}


def prepared(field: Any, value: Any, db: Any) -> Any:
    """``field.get_db_prep_save(value, db)``, without its chain of calls (its conversion, its checks, the
    backend's adaptation: several microseconds a value) for a value it would hand on unchanged: None, or
    a value of exactly the type its field class stores as it is (``_UNCHANGED``; a foreign key's, its
    target field's); and a dict or a list for a plain JSON field, written by ``json_columns`` (the same
    JSON). Any other field or value is prepared by the field, as the ORM does."""
    kind = type(field)
    if kind is models.ForeignKey or kind is models.OneToOneField:
        if value is None or _unchanged(type(field.target_field), value):
            return value
    elif _unchanged(kind, value):
        return value
    elif (type(value) is dict or type(value) is list) and json_columns.plain_json_field(field):
        return Jsonb(value, dumps=json_columns.dumped)
    return field.get_db_prep_save(value, db)


def _unchanged(kind: type[Any], value: Any) -> bool:
    stored_as_is = _UNCHANGED.get(kind)
    return stored_as_is is not None and (
        value is None
        or (
            type(value) in stored_as_is
            and (kind is not models.DateTimeField or value.utcoffset() is not None)
        )
    )


@functools.cache
def insert_sql(model: type[Model], returns_key: bool) -> str:
    """The INSERT of every concrete field of ``model`` (but an auto-increment key, read back with
    RETURNING, when ``returns_key``), built once."""
    meta = model._meta
    fields = [field for field in meta.concrete_fields if not (returns_key and field is meta.pk)]
    columns = ", ".join(connection.ops.quote_name(field.column) for field in fields)
    returning = f" RETURNING {connection.ops.quote_name(meta.pk.column)}" if returns_key else ""
    return f"INSERT INTO {table(model)} ({columns}) VALUES ({', '.join(['%s'] * len(fields))}){returning}"  # nosec B608  # identifiers from model metadata, values are parameters


def update(model: type[Model], *, where: dict[str, Any], values: dict[str, Any]) -> int:
    """``model.objects.filter(**where).update(**values)`` for equality filters (None: IS NULL) and plain
    values, with the SQL built once per shape; how many rows changed."""
    if not on_postgresql():
        return model.objects.filter(**_orm_filter(where)).update(**values)
    sql, params = update_statement(model, where=where, values=values)
    cursor = kept_cursor()
    cursor.execute(sql, params)
    return cursor.rowcount


def update_statement(
    model: type[Model], *, where: dict[str, Any], values: dict[str, Any]
) -> tuple[str, list[Any]]:
    """``update``'s statement and its parameters (PostgreSQL), for a caller that makes it a part of a
    statement of its own (``WITH changed AS (... RETURNING ...)``)."""
    meta, db = model._meta, current()
    params = [prepared(meta.get_field(name), value, db) for name, value in values.items()]
    params += _where_params(model, where)
    return _update_sql(model, tuple(values), _where_shape(where)), params


def delete(model: type[Model], *, where: dict[str, Any]) -> int:
    """``model.objects.filter(**where).delete()`` for equality filters (None: IS NULL) on a model no other
    row references, as one statement built once per shape (no collector); how many rows went."""
    if not on_postgresql():
        return model.objects.filter(**_orm_filter(where)).delete()[0]
    cursor = kept_cursor()
    cursor.execute(
        f"DELETE FROM {table(model)} WHERE {_where_sql(model, _where_shape(where))}",  # nosec B608  # identifiers from model metadata, values are parameters
        _where_params(model, where),
    )
    return cursor.rowcount


def exists(model: type[Model], *, where: dict[str, Any]) -> bool:
    """``model.objects.filter(**where).exists()`` for equality filters (None: IS NULL), with the SQL
    built once per shape."""
    if not on_postgresql():
        return model.objects.filter(**_orm_filter(where)).exists()
    cursor = kept_cursor()
    cursor.execute(
        f"SELECT 1 FROM {table(model)} WHERE {_where_sql(model, _where_shape(where))} LIMIT 1",  # nosec B608  # identifiers from model metadata, values are parameters
        _where_params(model, where),
    )
    return cursor.fetchone() is not None


WhereShape = tuple[tuple[str, str], ...]


def _where_shape(where: dict[str, Any]) -> WhereShape:
    """Each filter's field and comparison: ``index__gte`` compares with >=, a None value is IS NULL."""
    shape = []
    for key, value in where.items():
        name, _, lookup = key.partition("__")
        shape.append((name, "null" if value is None else (lookup or "exact")))
    return tuple(shape)


def _where_params(model: type[Model], where: dict[str, Any]) -> list[Any]:
    meta, db = model._meta, current()
    return [
        meta.get_field(key.partition("__")[0]).get_db_prep_value(value, db)
        for key, value in where.items()
        if value is not None
    ]


def _orm_filter(where: dict[str, Any]) -> dict[str, Any]:
    return {
        (f"{key}__isnull" if value is None else key): (True if value is None else value)
        for key, value in where.items()
    }


_COMPARISONS = {"exact": "= %s", "gte": ">= %s", "lt": "< %s", "null": "IS NULL"}


@functools.cache
def _where_sql(model: type[Model], shape: WhereShape) -> str:
    meta, quote = model._meta, connection.ops.quote_name
    return " AND ".join(f"{quote(meta.get_field(name).column)} {_COMPARISONS[how]}" for name, how in shape)


@functools.cache
def _update_sql(model: type[Model], names: tuple[str, ...], shape: WhereShape) -> str:
    meta, quote = model._meta, connection.ops.quote_name
    assignments = ", ".join(f"{quote(meta.get_field(name).column)} = %s" for name in names)
    return f"UPDATE {table(model)} SET {assignments} WHERE {_where_sql(model, shape)}"  # nosec B608  # identifiers from model metadata, values are parameters
