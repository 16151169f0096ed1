"""Heartbeat monitors in the embedded mode (`make run`: SQLite, no Redis): pings through the
ping URL and the fast lane, usage stored, and the scheduler's late/down decision, in a
process of its own on a fresh SQLite database."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import io, json
from datetime import timedelta
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from apps.executions.models import UsageMonth
from apps.monitors import clock, usage
from apps.monitors.fastlane import PingFastLane
from apps.monitors.models import Monitor, Ping
from apps.monitors.services import create_monitor
from apps.notifications.models import Channel, Notification
from apps.projects.provisioning import provision_tenant

call_command("migrate", verbosity=0)
tenant = provision_tenant(org_name="Embedded", email="embedded@example.com", plan_code="free")
Channel.objects.create(organization=tenant.organization, project=tenant.project, kind="email", name="ops",
                       config={"to": ["ops@example.com"]})
monitor = create_monitor(project=tenant.project, name="backup", schedule_type="interval", interval_seconds=60,
                         grace_seconds=60)
client = Client(SERVER_NAME="127.0.0.1")
out = {"first": client.get(f"/ping/{monitor.ping_id}").status_code}
out["start"] = client.get(f"/ping/{monitor.ping_id}/start", {"rid": "r1"}).status_code
lane = PingFastLane(lambda environ, start_response: [])
environ = {"REQUEST_METHOD": "POST", "PATH_INFO": f"/ping/{monitor.ping_id}/0", "QUERY_STRING": "rid=r1",
           "wsgi.input": io.BytesIO(b"done"), "CONTENT_LENGTH": "4", "wsgi.url_scheme": "http",
           "REMOTE_ADDR": "127.0.0.1", "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "80"}
statuses = []
out["lane"] = b"".join(lane(environ, lambda status, headers: statuses.append(status))).decode(), statuses
monitor.refresh_from_db()
end = Ping.objects.filter(monitor=monitor, kind="success", rid="r1").get()
out["state"], out["body"], out["timed"] = monitor.state, end.body, end.duration_ms is not None
usage.flush()
out["usage"] = UsageMonth.objects.get(organization=tenant.organization).pings
out["checks"] = [clock.check_monitors(monitor.next_expected_at), clock.check_monitors(monitor.deadline_at),
                 clock.check_monitors(monitor.deadline_at + timedelta(minutes=5))]
out["down"] = Monitor.objects.get(pk=monitor.pk).state
out["notified"] = list(Notification.objects.values_list("event", flat=True))
print("RESULT " + json.dumps(out))
"""


@pytest.mark.slow
def test_monitors_work_on_the_embedded_database(tmp_path):
    env = {key: value for key, value in os.environ.items() if key not in ("SECRET_KEY", "DATABASE_URL", "REDIS_URL")}
    env.update(DJANGO_SETTINGS_MODULE="config.settings", VAR_DIR=str(tmp_path))
    result = subprocess.run([sys.executable, "-c", "import django; django.setup()\n" + SCRIPT], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("RESULT "))
    assert json.loads(line[len("RESULT "):]) == {
        "first": 200, "start": 200, "lane": ["OK", ["200 OK"]], "state": "up", "body": "done", "timed": True,
        "usage": 3, "checks": [[1, 0], [0, 1], [0, 0]], "down": "down", "notified": ["failure"]}
