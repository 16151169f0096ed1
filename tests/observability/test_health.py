"""/healthz and /readyz: ready only with the database and broker reachable and every
migration applied; each failure named; the processes' heartbeats shown."""

import json
import subprocess
import sys
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.observability import health
from apps.observability.heartbeats import Beat
from apps.observability.models import Heartbeat
from tests.support.broker import AMQP_URL
from tests.support.processes import ROOT, process_env

pytestmark = pytest.mark.django_db

CLOSED_PORT = 1  # nothing listens there: connections are refused at once


def test_healthz_answers(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.fixture(autouse=True)
def _details_shown(metrics_open):
    """The test client (127.0.0.1) is an address /metrics admits: /readyz shows it its details."""


def test_readyz_is_ok_with_database_broker_and_migrations(client):
    response = client.get("/readyz")
    assert response.status_code == 200, response.content
    assert response.json()["checks"] == {"database": "ok", "broker": "ok", "migrations": "ok"}


def test_readyz_fails_when_the_broker_is_down(client, settings):
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{CLOSED_PORT}/0"
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["broker"].startswith("ConnectionError")
    assert body["checks"]["database"] == "ok"


def test_readyz_checks_a_rabbitmq_broker(client, settings):
    settings.CELERY_BROKER_URL = AMQP_URL
    response = client.get("/readyz")
    assert response.status_code == 200, response.content
    assert response.json()["checks"]["broker"] == "ok"


def test_readyz_fails_when_the_rabbitmq_broker_is_down(client, settings):
    settings.CELERY_BROKER_URL = f"amqp://guest:guest@127.0.0.1:{CLOSED_PORT}//"
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["broker"].startswith("ConnectionRefusedError")


def test_readyz_fails_when_the_embedded_broker_folder_is_missing(client, settings, tmp_path):
    settings.CELERY_BROKER_URL = "filesystem://"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"data_folder_in": str(tmp_path / "gone"),
                                                "data_folder_out": str(tmp_path / "gone")}
    response = client.get("/readyz")
    assert response.status_code == 503
    assert "missing" in response.json()["checks"]["broker"]


def test_readyz_fails_with_migrations_not_applied(client, monkeypatch):
    monkeypatch.setitem(health._migrations_applied, "ok", False)
    monkeypatch.setattr(health, "migration_files", lambda: {("observability", "0001_initial"),
                                                            ("observability", "9999_not_applied")})
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["migrations"] == (
        "RuntimeError: 1 migrations not applied, e.g. observability.9999_not_applied")


def test_every_migration_file_is_known():
    files = health.migration_files()
    assert ("observability", "0001_initial") in files
    assert ("auth", "0001_initial") in files
    assert not [name for name in files if name[1] == "__init__"]


def test_readyz_fails_when_the_database_is_down():
    """A separate Django process whose DATABASE_URL points at a closed port."""
    script = (
        "import django, json; django.setup();"
        "from django.test import Client;"
        "r = Client().get('/readyz');"
        "print(json.dumps({'status': r.status_code, 'body': r.json()}))"
    )
    env = process_env(DJANGO_SETTINGS_MODULE="config.settings", ALLOWED_HOSTS="testserver", LOG_LEVEL="CRITICAL",
                      METRICS_ALLOWED_IPS="127.0.0.1/32")
    env["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:{CLOSED_PORT}/cronsvc_nowhere"
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["status"] == 503
    checks = answer["body"]["checks"]
    assert checks["database"].startswith("OperationalError")
    assert checks["broker"] == "ok"
    assert checks["migrations"] == "not checked: database unreachable"


def test_readyz_shows_heartbeats_alive_and_silent(client, settings):
    settings.HEARTBEAT_INTERVAL = 5
    Beat("scheduler").beat(force=True)
    Heartbeat.objects.create(key="worker:gone:1", kind="worker", name="free@gone", hostname="gone", pid=1,
                             started_at=timezone.now() - timedelta(hours=1),
                             last_seen=timezone.now() - timedelta(minutes=5), detail={"queues": ["runs.free"]})
    body = client.get("/readyz").json()
    (scheduler,) = body["processes"]["schedulers"]
    assert scheduler["alive"] is True
    (worker,) = body["processes"]["workers"]
    assert worker == {**worker, "name": "free@gone", "alive": False, "queues": ["runs.free"]}
    assert worker["age_seconds"] >= 300


def test_a_heartbeat_is_written_at_most_once_per_interval(settings):
    settings.HEARTBEAT_INTERVAL = 60
    beat = Beat("scheduler")
    assert beat.beat() is True
    first = Heartbeat.objects.get(key=beat.key).last_seen
    assert beat.beat() is False
    assert Heartbeat.objects.get(key=beat.key).last_seen == first
    beat.stop()
    assert not Heartbeat.objects.filter(key=beat.key).exists()
