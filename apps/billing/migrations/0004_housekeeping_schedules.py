"""Billing's housekeeping schedules, so they exist on every install (operators may change
their timing in the admin; a later migration will not undo that)."""

from django.db import migrations

ROLL_UPS = "billing: roll up today's and yesterday's runs"
PURGE = "billing: retention purge"
STATEMENTS = "billing: monthly statements"


def create(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    CrontabSchedule = apps.get_model("django_celery_beat", "CrontabSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    every_10_minutes, _ = IntervalSchedule.objects.get_or_create(every=600, period="seconds")
    hourly, _ = CrontabSchedule.objects.get_or_create(minute="17", hour="*", day_of_week="*", day_of_month="*",
                                                      month_of_year="*", timezone="UTC")
    daily, _ = CrontabSchedule.objects.get_or_create(minute="30", hour="0", day_of_week="*", day_of_month="*",
                                                     month_of_year="*", timezone="UTC")
    tasks = [
        (ROLL_UPS, "apps.billing.tasks.roll_up_recent", {"interval": every_10_minutes}),
        # Hourly in small batches rather than one long nightly purge.
        (PURGE, "apps.billing.tasks.purge_expired", {"crontab": hourly}),
        # Daily, so a missed month-end run catches up the next day (statements are idempotent).
        (STATEMENTS, "apps.billing.tasks.make_statements", {"crontab": daily}),
    ]
    for name, task, schedule in tasks:
        PeriodicTask.objects.get_or_create(name=name, defaults={"task": task, "queue": "default", "enabled": True,
                                                                **schedule})


def remove(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name__in=[ROLL_UPS, PURGE, STATEMENTS]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0003_usage_statements_rollups"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create, remove)]
