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
        ('approval_requests', '0002_list_indexes'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "approval_requests_approvalrequest_account_id_14e5017b"',
                    reverse_sql='CREATE INDEX IF NOT EXISTS "approval_requests_approvalrequest_account_id_14e5017b" ON "approval_requests_approvalrequest" ("account_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "approval_requests_approvalrequest_on_behalf_of_id_3fefdfcb"',
                    reverse_sql='CREATE INDEX IF NOT EXISTS "approval_requests_approvalrequest_on_behalf_of_id_3fefdfcb" ON "approval_requests_approvalrequest" ("on_behalf_of_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "approval_requests_webhookdelivery_approval_request_id_9b74aa26"',
                    reverse_sql='CREATE INDEX IF NOT EXISTS "approval_requests_webhookdelivery_approval_request_id_9b74aa26" ON "approval_requests_webhookdelivery" ("approval_request_id")',
                ),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name='approvalrequest',
                    name='account',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL),
                ),
                migrations.AlterField(
                    model_name='approvalrequest',
                    name='on_behalf_of',
                    field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
                ),
                migrations.AlterField(
                    model_name='webhookdelivery',
                    name='approval_request',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='approval_requests.approvalrequest'),
                ),
            ],
        ),
    ]
