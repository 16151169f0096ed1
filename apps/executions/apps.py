from django.apps import AppConfig


class ExecutionsConfig(AppConfig):
    name = "apps.executions"
    label = "executions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from apps.projects.hooks import on_delete_jobs

        from .purging import delete_jobs

        on_delete_jobs(delete_jobs)  # a job's history goes after it, in batches
