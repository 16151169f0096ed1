"""Monitor state changes in the event stream (apps.monitors.changes writes them)."""

import pytest

from apps.eventstream import relay
from apps.monitors import clock, pings
from apps.monitors.services import create_monitor, pause_monitor
from tests.conftest import utc

pytestmark = pytest.mark.django_db


def ping_at(monitor, kind, now):
    return pings.record(pings.find(monitor.ping_id), pings.PingInput(kind=kind), now)


def test_every_monitor_state_change_is_published_in_order(streams, tenant):
    monitor = create_monitor(project=tenant.project, name="backup", schedule_type="interval", interval_seconds=3600,
                             grace_seconds=600)
    ping_at(monitor, "success", utc(2026, 12, 3, 10, 0))  # new -> up
    ping_at(monitor, "success", utc(2026, 12, 3, 10, 30))  # up -> up: no change, no event
    clock.check_monitors(utc(2026, 12, 3, 11, 30, 1))  # up -> late
    clock.check_monitors(utc(2026, 12, 3, 11, 40, 1))  # late -> down
    ping_at(monitor, "success", utc(2026, 12, 3, 11, 45))  # down -> up
    pause_monitor(monitor, now=utc(2026, 12, 3, 12, 0))  # up -> paused
    assert relay.relay_round() == 5
    events = [e for _, e in streams.read_group(streams.of(tenant.organization.id))]
    assert [(e["type"], e["previous"]) for e in events] == [
        ("monitor.up", "new"), ("monitor.late", "up"), ("monitor.down", "late"), ("monitor.up", "down"),
        ("monitor.paused", "up"),
    ]
    assert {(e["monitor"], e["organization"], e["project"]) for e in events} == {
        (str(monitor.id), str(tenant.organization.id), str(tenant.project.id))}
    assert events[2]["occurred_at"] == "2026-12-03T11:40:01.000000Z" and events[2]["detail"]
