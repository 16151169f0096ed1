"""Plan limits for heartbeat monitors (apps.monitors) and the monthly ping counter."""

from django.db import migrations, models

# Frozen here as they were at this migration; operators edit plans in the admin afterwards.
MONITOR_LIMITS = {
    "free": {"max_monitors": 5, "monitor_pings_per_minute": 60, "monitor_pings_per_month": 50_000},
    "pro": {"max_monitors": 100, "monitor_pings_per_minute": 600, "monitor_pings_per_month": 2_000_000},
    "business": {"max_monitors": 1_000, "monitor_pings_per_minute": 3_000, "monitor_pings_per_month": 20_000_000},
    "enterprise": {"max_monitors": 100_000, "monitor_pings_per_minute": 60_000,
                   "monitor_pings_per_month": 1_000_000_000},
}


def seed_limits(apps, schema_editor):
    Plan = apps.get_model("billing", "Plan")
    for code, values in MONITOR_LIMITS.items():
        Plan.objects.filter(code=code).update(**values)


class Migration(migrations.Migration):

    dependencies = [
        ('billing', '0004_housekeeping_schedules'),
    ]

    operations = [
        migrations.AddField(
            model_name='plan',
            name='max_monitors',
            field=models.PositiveIntegerField(default=5, db_default=5),
        ),
        migrations.AddField(
            model_name='plan',
            name='monitor_pings_per_minute',
            field=models.PositiveIntegerField(default=60, db_default=60),
        ),
        migrations.AddField(
            model_name='plan',
            name='monitor_pings_per_month',
            field=models.PositiveBigIntegerField(default=50000, db_default=50000),
        ),
        migrations.AddField(
            model_name='usagemonth',
            name='pings',
            field=models.PositiveBigIntegerField(default=0, db_default=0),
        ),
        migrations.RunPython(seed_limits, migrations.RunPython.noop),
    ]
