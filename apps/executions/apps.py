from django.apps import AppConfig


class ExecutionsConfig(AppConfig):
    name = "apps.executions"
    label = "executions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from apps.projects.hooks import on_delete_jobs

        from .hooks import on_outcomes
        from .purging import delete_jobs
        from .usage.metering import meter_outcomes

        on_delete_jobs(delete_jobs)  # a job's history goes after it, in batches
        # Usage is metered as the first outcome hook: inside the recording transaction, and
        # a bug in it is logged and counted instead of stopping the recording.
        on_outcomes(meter_outcomes)
