"""Make the audit ledger append-only in PostgreSQL: triggers refuse UPDATE, DELETE and TRUNCATE.

AuditHead stays updatable (every append moves it). A superuser can still bypass triggers
(``session_replication_role = replica``) or drop them; the HMAC chain (approvals.audit) detects that.

TRUNCATE is allowed only in a session that sets ``hitl.audit_truncate = 'allow'`` on purpose. Django
flushes tables with TRUNCATE after every transactional test, so the test settings open their connections
with it: ``DATABASES["default"]["OPTIONS"]["options"] = "-c hitl.audit_truncate=allow"``.
"""

from django.db import migrations

CREATE_SQL = [
    """
    CREATE OR REPLACE FUNCTION approvals_audit_append_only() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'TRUNCATE' AND current_setting('hitl.audit_truncate', true) = 'allow' THEN
            RETURN NULL;
        END IF;
        RAISE EXCEPTION 'audit entries are append-only (% on % refused)', TG_OP, TG_TABLE_NAME
            USING HINT = 'The audit ledger is append-only; record a correction as a new entry.';
    END
    $$
    """,
    """
    CREATE TRIGGER approvals_auditentry_append_only
    BEFORE UPDATE OR DELETE ON approvals_auditentry
    FOR EACH ROW EXECUTE FUNCTION approvals_audit_append_only()
    """,
    """
    CREATE TRIGGER approvals_auditentry_no_truncate
    BEFORE TRUNCATE ON approvals_auditentry
    FOR EACH STATEMENT EXECUTE FUNCTION approvals_audit_append_only()
    """,
]

DROP_SQL = [
    "DROP TRIGGER IF EXISTS approvals_auditentry_no_truncate ON approvals_auditentry",
    "DROP TRIGGER IF EXISTS approvals_auditentry_append_only ON approvals_auditentry",
    "DROP FUNCTION IF EXISTS approvals_audit_append_only()",
]


def _run_on_postgresql(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        for statement in statements:
            schema_editor.execute(statement, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(_run_on_postgresql(CREATE_SQL), _run_on_postgresql(DROP_SQL), elidable=False),
    ]
