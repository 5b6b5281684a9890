from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("toolgate", "0002_secret_store"),
    ]

    operations = [
        migrations.AddField(
            model_name="journalentry",
            name="step_kind",
            field=models.CharField(
                choices=[("TOOL_CALL", "Tool Call"), ("HTTP_CALL", "Http Call")], default="TOOL_CALL", max_length=16
            ),
        ),
        migrations.AddField(
            model_name="journalentry",
            name="method",
            field=models.CharField(blank=True, default="", max_length=16),
        ),
        migrations.AddField(
            model_name="journalentry",
            name="path",
            field=models.CharField(blank=True, default="", max_length=500),
        ),
    ]
