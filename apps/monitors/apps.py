from django.apps import AppConfig


class MonitorsConfig(AppConfig):
    name = "apps.monitors"
    label = "monitors"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Every scheduler tick decides which heartbeat monitors went late or down.
        from apps.executions.hooks import on_tick

        from .clock import check_monitors

        on_tick(check_monitors)

        # Billing's hourly retention purge deletes the pings past their plan's retention.
        from apps.billing.hooks import on_retention_purge

        from .retention import purge_pings

        on_retention_purge("monitor pings", purge_pings)

        # /metrics shows monitors by state, read at each scrape.
        from apps.observability.collectors import on_scrape

        from .gauges import MonitorStateCollector

        on_scrape(MonitorStateCollector())
