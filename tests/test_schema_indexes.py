"""No table of ours carries an index that another index of the same table makes redundant.

Each write of a row inserts an entry into every index of its table (an update too, whenever it changes an
indexed column, as a turn's or a decision's does), so an index whose columns lead another index of the
same table costs every write and serves no lookup the other cannot. Django gives every foreign key an
index of its own; where a unique constraint or a composite index already leads with the column, the
field says ``db_index=False``. A foreign key still keeps an index that leads with its column, so checking
the constraint (a row of the other table deleted) never scans the table.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.apps import apps
from django.conf import settings
from django.db import connection

pytestmark = pytest.mark.django_db

# the tables every approval cycle writes: if the scan below missed them, it would prove nothing
CYCLE_TABLES = {
    "conversations_conversation",
    "conversations_conversationstep",
    "approvals_pause",
    "approvals_auditentry",
    "approvals_audithead",
}


def our_tables() -> list[str]:
    root = Path(settings.BASE_DIR).resolve()
    return sorted(
        model._meta.db_table
        for config in apps.get_app_configs()
        if Path(config.path).resolve().is_relative_to(root) and ".venv" not in Path(config.path).parts
        for model in config.get_models()
        if model._meta.managed
    )


def full_indexes(table: str) -> dict[str, tuple[list[tuple[str, str]], bool]]:
    """The table's indexes over plain columns and every row (no expression, no condition): their columns
    (each with its operator class) and whether they are unique."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.indexrelid::regclass::text, i.indkey::text, i.indclass::text, i.indisunique "
            "FROM pg_index i WHERE i.indrelid = %s::regclass AND i.indpred IS NULL AND i.indexprs IS NULL",
            [table],
        )
        return {
            name: (list(zip(keys.split(), classes.split(), strict=True)), unique)
            for name, keys, classes, unique in cursor.fetchall()
        }


def test_no_index_of_ours_leads_another_of_its_table():
    tables = our_tables()
    assert CYCLE_TABLES <= set(tables)
    redundant = []
    for table in tables:
        indexes = full_indexes(table)
        redundant.extend(
            (table, name, other)
            for name, (columns, unique) in indexes.items()
            for other, (other_columns, _) in indexes.items()
            if other != name and not unique and other_columns[: len(columns)] == columns
        )
    assert redundant == []


def test_each_foreign_key_of_ours_leads_an_index():
    unindexed = []
    checked = 0
    for table in our_tables():
        leading = {columns[0][0] for columns, _ in full_indexes(table).values()}
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT conname, conkey[1]::text FROM pg_constraint "
                "WHERE conrelid = %s::regclass AND contype = 'f'",
                [table],
            )
            foreign_keys = cursor.fetchall()
        checked += len(foreign_keys)
        unindexed.extend((table, name) for name, column in foreign_keys if column not in leading)
    assert checked > 20  # the scan saw the foreign keys
    assert unindexed == []
