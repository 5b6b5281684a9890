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
        ('approvals', '0016_credential_change_notices'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "approvals_notice_pause_id_a3ceadb1"',
                    reverse_sql='CREATE INDEX IF NOT EXISTS "approvals_notice_pause_id_a3ceadb1" ON "approvals_notice" ("pause_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "approvals_pauseroute_pause_id_1e212360"',
                    reverse_sql='CREATE INDEX IF NOT EXISTS "approvals_pauseroute_pause_id_1e212360" ON "approvals_pauseroute" ("pause_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "approvals_vote_pause_id_edd06d0b"',
                    reverse_sql='CREATE INDEX IF NOT EXISTS "approvals_vote_pause_id_edd06d0b" ON "approvals_vote" ("pause_id")',
                ),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name='notice',
                    name='pause',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='notices', to='approvals.pause'),
                ),
                migrations.AlterField(
                    model_name='pauseroute',
                    name='pause',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='routes', to='approvals.pause'),
                ),
                migrations.AlterField(
                    model_name='vote',
                    name='pause',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='votes', to='approvals.pause'),
                ),
            ],
        ),
    ]
