from django.apps import AppConfig


class ObservabilityConfig(AppConfig):
    """Operators' view of the platform: metrics, health, heartbeats, logs, Sentry."""

    name = "apps.observability"
    label = "observability"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from django.contrib import admin

        from apps.executions.hooks import on_outcomes

        from .outcomes import on_outcomes as count_outcomes

        on_outcomes(count_outcomes)

        # Dead letters by reason and outcome hooks' exceptions by hook (a worker goes on).
        from apps.executions.worker.deadletters import on_dead_letter

        from . import metrics

        on_dead_letter(lambda reason: metrics.DEAD_LETTERS.labels(reason).inc())
        from apps.executions.hooks import on_hook_failure

        on_hook_failure(lambda hook: metrics.HOOK_ERRORS.labels(hook).inc())

        # The scheduler's metrics and heartbeat (taken once when its loop starts).
        from apps.executions.hooks import SchedulerReport, on_scheduler_report

        from .clock import scheduler_skew
        from .heartbeats import Beat

        on_scheduler_report(SchedulerReport(
            dispatched=metrics.record_dispatch, retries_published=metrics.RETRIES_PUBLISHED.inc,
            swept=metrics.record_sweep, backlog=metrics.BACKLOG.set, exited=metrics.process_exited,
            heartbeat=Beat, clock_skew=scheduler_skew, loop_error=metrics.record_loop_error,
        ))
        # Every labelled series whose label values are known starts at 0.
        metrics.declare_known_series()
        # Server-mode settings that make links or mail fail silently, said once by every process.
        from .health import log_configuration_warnings

        log_configuration_warnings()
        # The admin index links to the operators' dashboard.
        admin.site.index_template = "observability/admin_index.html"
