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
        ('slack_surface', '0002_group_integrations'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "slack_surface_slacknotice_discussion_id_66022a6a"',
                    reverse_sql='CREATE INDEX IF NOT EXISTS "slack_surface_slacknotice_discussion_id_66022a6a" ON "slack_surface_slacknotice" ("discussion_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "slack_surface_slackthread_integration_id_4ceef420"',
                    reverse_sql='CREATE INDEX IF NOT EXISTS "slack_surface_slackthread_integration_id_4ceef420" ON "slack_surface_slackthread" ("integration_id")',
                ),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name='slacknotice',
                    name='discussion',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='notices', to='slack_surface.slackdiscussion'),
                ),
                migrations.AlterField(
                    model_name='slackthread',
                    name='integration',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='threads', to='slack_surface.slackintegration'),
                ),
            ],
        ),
    ]
