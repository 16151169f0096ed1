"""Every labelled series whose label values are known exists at 0 from start-up (a
dashboard shows 0, not "No data"), and the metrics read at scrape time: monitors by state,
pings by kind, the event stream's outbox backlog."""

import uuid

import pytest
from django.utils import timezone

from apps.eventstream.models import OutboxEntry
from apps.executions import hooks
from apps.monitors import pings
from apps.monitors.models import Monitor, Ping
from apps.monitors.services import create_monitor
from apps.observability import metrics

from .scrape import fresh_process_metrics, samples_of, scrape, value

pytestmark = pytest.mark.django_db

def test_a_fresh_process_shows_every_known_series_at_zero():
    samples = samples_of(fresh_process_metrics())
    expected = [("cronsvc_sweeper_republishes_total", {"reason": "lost"}),
                ("cronsvc_sweeper_republishes_total", {"reason": "lease_expired"}),
                ("cronsvc_executions_total", {"status": "succeeded", "error_kind": ""}),
                ("cronsvc_executions_total", {"status": "dead", "error_kind": ""}),
                ("cronsvc_executions_total", {"status": "queued", "error_kind": ""}),
                ("cronsvc_worker_broker_errors_total", {"kind": "oom"}),
                ("cronsvc_worker_broker_errors_total", {"kind": "connection"}),
                ("cronsvc_dead_letters_total", {"reason": "not JSON"}),
                ("cronsvc_loop_errors_total", {"part": "sweep"}),
                ("cronsvc_loop_errors_total", {"part": "hook:apps.monitors.clock"}),
                ("cronsvc_outcome_hook_errors_total", {"hook": "apps.observability.outcomes.on_outcomes"}),
                *[("cronsvc_pings_total", {"kind": kind}) for kind in Ping.Kind.values],
                *[("cronsvc_monitors", {"state": state}) for state in Monitor.State.values],
                ("cronsvc_event_outbox_backlog", {})]
    for name, labels in expected:
        key = (name, tuple(sorted(labels.items())))
        assert samples.get(key) == 0, (key, samples.get(key))


def test_hooks_registered_after_observability_are_declared_by_the_scrape(client, metrics_open):
    names = hooks.outcome_hook_names()
    parts = hooks.tick_hook_parts()
    assert "apps.observability.outcomes.on_outcomes" in names and "hook:apps.monitors.clock" in parts
    samples = scrape(client)
    for name in names:
        assert ("cronsvc_outcome_hook_errors_total", (("hook", name),)) in samples
    for part in (*parts, *metrics.LOOP_PARTS):
        assert ("cronsvc_loop_errors_total", (("part", part),)) in samples


def test_the_declared_ping_kinds_are_the_models():
    assert set(metrics.PING_KINDS) == set(Ping.Kind.values)


def test_stored_pings_count_by_kind_and_monitors_by_state(client, metrics_open, tenant):
    monitor = create_monitor(project=tenant.project, name="backup", schedule_type="interval",
                             interval_seconds=3600, grace_seconds=600)
    before = scrape(client)
    assert value(before, "cronsvc_monitors", state="new") >= 1
    target = pings.find(monitor.ping_id)
    pings.record(target, pings.PingInput(kind="start"), timezone.now())
    target = pings.find(monitor.ping_id)
    pings.record(target, pings.PingInput(kind="success"), timezone.now())
    after = scrape(client)
    for kind, moved in (("start", 1), ("success", 1), ("fail", 0)):
        assert value(after, "cronsvc_pings_total", kind=kind) == value(before, "cronsvc_pings_total", kind=kind) + moved
    assert value(after, "cronsvc_monitors", state="up") == value(before, "cronsvc_monitors", state="up") + 1
    assert value(after, "cronsvc_monitors", state="new") == value(before, "cronsvc_monitors", state="new") - 1


def test_outbox_backlog_counts_the_rows_not_yet_published(client, metrics_open):
    before = value(scrape(client), "cronsvc_event_outbox_backlog")
    OutboxEntry.objects.bulk_create([
        OutboxEntry(kind="monitor", status="down", organization_id=uuid.uuid4(), subject_id=uuid.uuid4(),
                    occurred_at=timezone.now()) for _ in range(3)])
    assert value(scrape(client), "cronsvc_event_outbox_backlog") == before + 3
