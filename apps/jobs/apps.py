from django.apps import AppConfig
from django.db.models.signals import post_migrate


class JobsConfig(AppConfig):
    name = "apps.jobs"
    label = "jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        post_migrate.connect(_ensure_job_count_triggers, sender=self)

        from apps.accounts.hooks import on_deletion_cancelled

        from .services import resume_paused_with

        on_deletion_cancelled(resume_paused_with)  # the jobs an organization's deletion paused


def _ensure_job_count_triggers(using, **kwargs):
    from .jobcount import ensure_triggers

    ensure_triggers(using)
