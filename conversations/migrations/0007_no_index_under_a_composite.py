"""Two foreign keys lose the index Django gave each of them: a composite index already leads with the
column (conversation_owner: owner, created_at; step_index_unique: conversation, index), so every lookup by
the column and every check of the constraint can use that one. Each write of a conversation or of a step
then inserts one index entry fewer.

Only the indexes are dropped; the constraints stay as they are (altering the fields in the database would
drop and re-add each foreign key, which checks every row again under a lock).
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0006_managed_conversations"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "conversations_conversation_owner_id_67c5670c"',
                    reverse_sql='CREATE INDEX IF NOT EXISTS "conversations_conversation_owner_id_67c5670c" '
                    'ON "conversations_conversation" ("owner_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "conversations_conversationstep_conversation_id_7b57784d"',
                    reverse_sql='CREATE INDEX IF NOT EXISTS "conversations_conversationstep_conversation_id_7b57784d" '
                    'ON "conversations_conversationstep" ("conversation_id")',
                ),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="conversation",
                    name="owner",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="conversationstep",
                    name="conversation",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="steps",
                        to="conversations.conversation",
                    ),
                ),
            ],
        ),
    ]
