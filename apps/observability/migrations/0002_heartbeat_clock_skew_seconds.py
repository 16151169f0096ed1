from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("observability", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="heartbeat",
            name="clock_skew_seconds",
            field=models.FloatField(blank=True, null=True),
        ),
    ]
