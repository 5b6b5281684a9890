"""Foreign keys lose the index Django gave each of them where a unique constraint or a composite index
already leads with the column: every lookup by the column and every check of the constraint can use that
one, and each write of a row inserts one index entry fewer.

Only the indexes are dropped; the constraints stay as they are (altering the fields in the database would
drop and re-add each foreign key, which checks every row again under a lock).
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0007_no_index_under_a_composite'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "conversations_agentversion_agent_id_80a0449f"',
                    reverse_sql='CREATE INDEX IF NOT EXISTS "conversations_agentversion_agent_id_80a0449f" ON "conversations_agentversion" ("agent_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "conversations_deployment_agent_id_2d039671"',
                    reverse_sql='CREATE INDEX IF NOT EXISTS "conversations_deployment_agent_id_2d039671" ON "conversations_deployment" ("agent_id")',
                ),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name='agentversion',
                    name='agent',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='versions', to='conversations.agent'),
                ),
                migrations.AlterField(
                    model_name='deployment',
                    name='agent',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='deployments', to='conversations.agent'),
                ),
            ],
        ),
    ]
