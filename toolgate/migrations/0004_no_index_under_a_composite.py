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
        ('toolgate', '0003_journal_steps'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "toolgate_pendingtoolcall_batch_id_d82c5857"',
                    reverse_sql='CREATE INDEX IF NOT EXISTS "toolgate_pendingtoolcall_batch_id_d82c5857" ON "toolgate_pendingtoolcall" ("batch_id")',
                ),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name='pendingtoolcall',
                    name='batch',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='calls', to='toolgate.pendingtoolbatch'),
                ),
            ],
        ),
    ]
