"""The table of the request throttles' shared counts (common/throttles.py): the default
``HITL_THROTTLE_CACHE_URL`` is ``dbcache://hitl_throttle_cache``, so a fresh ``migrate`` has it. Built as
``manage.py createcachetable`` builds it, under a fixed name whatever CACHES says at migration time."""

from django.core.management.commands.createcachetable import Command as CreateCacheTable
from django.db import migrations

TABLE = "hitl_throttle_cache"


def create_table(apps, schema_editor):
    command = CreateCacheTable()
    command.verbosity = 0
    command.create_table(schema_editor.connection.alias, TABLE, dry_run=False)


def drop_table(apps, schema_editor):
    schema_editor.execute(f"DROP TABLE IF EXISTS {schema_editor.quote_name(TABLE)}")


class Migration(migrations.Migration):

    dependencies = [
        ("approvals", "0011_decided_history"),
    ]

    operations = [
        migrations.RunPython(create_table, drop_table),
    ]
