from django.apps import AppConfig
from django.db.models.signals import post_migrate


class JobsConfig(AppConfig):
    name = "apps.jobs"
    label = "jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        post_migrate.connect(_ensure_job_count_triggers, sender=self)


def _ensure_job_count_triggers(using, **kwargs):
    from .jobcount import ensure_triggers

    ensure_triggers(using)
