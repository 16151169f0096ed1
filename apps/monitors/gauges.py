"""Monitors by state, counted when /metrics is scraped (apps.observability.collectors)."""

import logging

from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily

from .models import Monitor

log = logging.getLogger("cronsvc.metrics")


class MonitorStateCollector:
    def collect(self):
        family = GaugeMetricFamily("cronsvc_monitors", "Heartbeat monitors by state (all organizations).",
                                   labels=["state"])
        try:
            counts = dict.fromkeys(Monitor.State.values, 0)
            rows = Monitor.objects.order_by().values_list("state").annotate(count=Count("pk"))
            counts.update(dict(rows))
        except Exception:  # noqa: BLE001 - a scrape must not fail because the database is down
            log.warning("monitor states unavailable", exc_info=True)
        else:
            for state, count in counts.items():
                family.add_metric([state], count)
        yield family
