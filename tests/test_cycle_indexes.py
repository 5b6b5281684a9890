"""The tables every approval cycle writes carry no index another one makes redundant.

Each write of a row inserts an entry into every index of its table (an update too, whenever it changes an
indexed column, as a turn's or a decision's does), so an index whose columns lead another index of the
same table costs every cycle a write and serves no lookup the other cannot. A foreign key keeps an index
that leads with its column, so checking the constraint never scans the table.
"""

from __future__ import annotations

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db

CYCLE_TABLES = (
    "conversations_conversation",
    "conversations_conversationstep",
    "approvals_pause",
    "approvals_auditentry",
    "approvals_audithead",
)


def full_indexes(table: str) -> dict[str, tuple[list[str], bool]]:
    """The table's indexes over plain columns and every row (no expression, no condition): their
    columns (with each column's operator class) and whether they are unique."""
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


@pytest.mark.parametrize("table", CYCLE_TABLES)
def test_no_index_of_a_cycle_table_leads_another(table):
    indexes = full_indexes(table)
    redundant = [
        (name, other)
        for name, (columns, unique) in indexes.items()
        for other, (other_columns, _) in indexes.items()
        if other != name and not unique and other_columns[: len(columns)] == columns
    ]
    assert redundant == []


@pytest.mark.parametrize("table", CYCLE_TABLES[:3])  # the ledger's tables refer to nothing
def test_each_foreign_key_of_a_cycle_table_leads_an_index(table):
    leading = {columns[0][0] for columns, _ in full_indexes(table).values()}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT conname, conkey[1]::text FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'f'",
            [table],
        )
        foreign_keys = cursor.fetchall()
    assert foreign_keys
    assert [name for name, column in foreign_keys if column not in leading] == []
