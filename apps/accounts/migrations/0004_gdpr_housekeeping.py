"""Housekeeping: erase organizations past their deletion grace period (hourly) and purge
audit events past AUDIT_RETENTION_DAYS (daily)."""

from django.db import migrations

TASKS = {
    "accounts: erase deleted organizations": ("apps.accounts.tasks.erase_deleted_organizations", 3600),
    "accounts: purge old audit events": ("apps.accounts.tasks.purge_audit_events", 86400),
}


def create(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    for name, (task, seconds) in TASKS.items():
        every, _ = IntervalSchedule.objects.get_or_create(every=seconds, period="seconds")
        PeriodicTask.objects.update_or_create(name=name, defaults={"task": task, "interval": every,
                                                                   "queue": "default", "enabled": True})


def remove(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name__in=list(TASKS)).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0003_gdpr"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create, remove)]
