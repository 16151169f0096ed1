"""The Grafana dashboard in the repo queries metrics that exist, and every metric is shown."""

import json
import re
from pathlib import Path

from prometheus_client import REGISTRY

import apps.observability.metrics  # noqa: F401 - defines the metrics

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "cronsvc.json"
SCRAPE_TIME = {"cronsvc_queue_depth", "cronsvc_circuit_breakers", "cronsvc_event_outbox_backlog", "cronsvc_monitors"}
SUFFIXES = ("_bucket", "_count", "_sum", "_total")


def defined():
    names = set(SCRAPE_TIME)
    for collector in list(REGISTRY._collector_to_names):
        for family in collector.describe() if hasattr(collector, "describe") else []:
            if family.name.startswith("cronsvc_"):
                names.add(family.name)
    return names


def base(name):
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def test_the_dashboard_uses_only_defined_metrics_and_all_of_them():
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    used = {base(name) for expr in exprs for name in re.findall(r"cronsvc_[a-z_]+", expr)}
    known = {base(name) for name in defined()}
    assert used <= known, used - known
    assert known - {"cronsvc_scheduler_ticks"} <= used, known - used
