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
        # Usage is metered by an outcome hook: inside the recording transaction, and a bug in
        # it is logged and counted instead of stopping the recording. The last one: its upsert
        # locks each organization's counters, which every worker's recording shares, so they
        # are held only until the commit (bench/README.md, "Usage counters, metered last").
        on_outcomes(meter_outcomes, last=True)
