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
        # The admin index links to the operators' dashboard.
        admin.site.index_template = "observability/admin_index.html"
