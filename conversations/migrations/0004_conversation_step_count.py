from django.db import migrations, models

# Live steps are the indexes 0..n-1 of a conversation (undone ones follow), so the count is the
# newest live index + 1.
BACKFILL = """
UPDATE conversations_conversation SET step_count = COALESCE((
    SELECT MAX(step."index") + 1 FROM conversations_conversationstep step
    WHERE step.conversation_id = conversations_conversation.id AND NOT step.undone), 0)
"""


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0003_cancel_requested'),
    ]

    operations = [
        migrations.AddField(
            model_name='conversation',
            name='step_count',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunSQL(BACKFILL, reverse_sql=migrations.RunSQL.noop),
    ]
