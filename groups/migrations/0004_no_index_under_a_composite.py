"""Foreign keys lose the index Django gave each of them where a unique constraint or a composite index
already leads with the column: every lookup by the column and every check of the constraint can use that
one, and each write of a row inserts one index entry fewer.

Only the indexes are dropped; the constraints stay as they are (altering the fields in the database would
drop and re-add each foreign key, which checks every row again under a lock).
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('groups', '0003_discussion_gates'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "groups_groupconversation_owner_id_ea71e873"',
                    reverse_sql='CREATE INDEX IF NOT EXISTS "groups_groupconversation_owner_id_ea71e873" ON "groups_groupconversation" ("owner_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "groups_groupversion_group_id_6f2ec476"',
                    reverse_sql='CREATE INDEX IF NOT EXISTS "groups_groupversion_group_id_6f2ec476" ON "groups_groupversion" ("group_id")',
                ),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name='groupconversation',
                    name='owner',
                    field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
                ),
                migrations.AlterField(
                    model_name='groupversion',
                    name='group',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='versions', to='groups.group'),
                ),
            ],
        ),
    ]
