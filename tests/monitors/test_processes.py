"""Two real scheduler processes (manage.py run_scheduler) watching the same monitors: each
goes up -> late -> down once, with one failure notification; then a burst of concurrent
success pings brings it back up once, with one recovery notification."""

import threading
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from apps.monitors.models import Monitor, Ping
from apps.monitors.services import create_monitor
from apps.notifications.models import Channel, Notification
from apps.observability.models import Heartbeat
from tests.support.processes import start_scheduler, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

MONITORS = 30
BURST = 12  # concurrent pings (a multiple of 3: each monitor's three recovery pings race)


def ping_all(monitors, suffix="", threads_per_monitor=1):
    """GET every monitor's ping URL from parallel threads (each with its own connection)."""
    answers = []

    def ping(monitor):
        try:
            response = Client().get(f"/ping/{monitor.ping_id}{suffix}")
            answers.append(response.status_code if response.status_code == 200 else response.content)
        except Exception as exc:  # noqa: BLE001 - shown by the assertion below
            answers.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=ping, args=(m,)) for m in monitors for _ in range(threads_per_monitor)]
    for first in range(0, len(threads), BURST):  # a few connections at a time: PostgreSQL is shared
        for thread in threads[first:first + BURST]:
            thread.start()
        for thread in threads[first:first + BURST]:
            thread.join()
    assert answers == [200] * len(threads)


def events_by_monitor(event):
    return Counter(Notification.objects.filter(event=event).values_list("data__monitor__id", flat=True))


def test_two_schedulers_decide_down_once_and_a_ping_burst_recovers_once(tmp_path, tenant):
    Channel.objects.create(organization=tenant.organization, project=tenant.project, kind="email", name="ops",
                           config={"to": ["ops@example.com"]})
    plan = tenant.organization.plan
    plan.max_monitors = plan.monitor_pings_per_minute = 10_000
    plan.save()
    monitors = [create_monitor(project=tenant.project, name=f"m{n}", schedule_type="interval", interval_seconds=2,
                               grace_seconds=2) for n in range(MONITORS)]
    schedulers = [start_scheduler(tmp_path, f"s{n}") for n in range(2)]
    try:
        pids = {process.popen.pid for process in schedulers}
        wait_for(lambda: pids <= set(Heartbeat.objects.filter(kind="scheduler").values_list("pid", flat=True)),
                 timeout=120, message="both schedulers ticking")
        pinged_at = timezone.now()
        ping_all(monitors)  # up: expected in 2 s, down 2 s after that
        wait_for(lambda: Monitor.objects.filter(state="late").exists(), timeout=30, interval=0.05,
                 message="a monitor late")
        wait_for(lambda: Monitor.objects.filter(state="down").count() == MONITORS, timeout=30,
                 message="every monitor down")
        time.sleep(1.5)  # both schedulers tick again: nothing more to decide
        down = list(Monitor.objects.all())
        assert all(m.state_changed_at >= pinged_at + timedelta(seconds=4) for m in down)
        assert events_by_monitor("failure") == {str(m.id): 1 for m in monitors}
    finally:
        codes = [process.stop() for process in schedulers]
    assert codes == [0, 0], [process.output()[-2000:] for process in schedulers]

    ping_all(monitors, threads_per_monitor=3)  # three concurrent success pings each
    assert set(Monitor.objects.values_list("state", flat=True)) == {"up"}
    assert events_by_monitor("recovery") == {str(m.id): 1 for m in monitors}
    assert Ping.objects.count() == MONITORS * 4
