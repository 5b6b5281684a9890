"""Announce every change to what a token authenticates: a statement-level trigger on the token, user,
user-group and group tables sends ``NOTIFY hitl_credentials`` (payload: the table) when it commits.

Each web process keeps the credentials it verified until such a notice arrives
(approvals.credential_cache); it checks at start-up that these four triggers exist and are enabled,
and keeps nothing without them.
"""

from django.conf import settings
from django.db import migrations

FUNCTION = "hitl_credentials_changed"
TRIGGER = "hitl_credentials_changed"


def _tables(apps):
    user = apps.get_model(settings.AUTH_USER_MODEL)
    groups = user._meta.get_field("groups")
    return [
        apps.get_model("authtoken", "Token")._meta.db_table,
        user._meta.db_table,
        groups.remote_field.through._meta.db_table,
        groups.related_model._meta.db_table,
    ]


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    quote = schema_editor.quote_name
    schema_editor.execute(
        f"""
        CREATE OR REPLACE FUNCTION {FUNCTION}() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('hitl_credentials', TG_TABLE_NAME);
            RETURN NULL;
        END
        $$
        """,
        params=None,
    )
    for table in _tables(apps):
        schema_editor.execute(
            f"CREATE TRIGGER {TRIGGER} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {quote(table)} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {FUNCTION}()",
            params=None,
        )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in _tables(apps):
        schema_editor.execute(
            f"DROP TRIGGER IF EXISTS {TRIGGER} ON {schema_editor.quote_name(table)}", params=None
        )
    schema_editor.execute(f"DROP FUNCTION IF EXISTS {FUNCTION}()", params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0015_pause_routing"),
        ("authtoken", "0004_alter_tokenproxy_options"),
        ("auth", "0012_alter_user_first_name_max_length"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [migrations.RunPython(create, drop, elidable=False)]
