"""Behind PgBouncer in transaction pooling mode (docs/operations.md, "Behind PgBouncer"):
DATABASE_TRANSACTION_POOLING turns off every session feature, and the failures it prevents
are real ones, shown here through a real PgBouncer (tests/support/pgbouncer.py) whose one
server connection every client shares. The scheduler's and the workers' end-to-end tests
run through it too (tests/scheduler/test_processes.py, tests/delivery/test_worker_process.py,
tests/eventstream/test_processes.py: ``live_database`` "pgbouncer")."""

import json
import os
import subprocess
import sys
import threading

import psycopg
import pytest
import redis
import requests
from django.db import connections

from tests.support.pgbouncer import running_pgbouncer
from tests.support.processes import ROOT, free_port, process_env, start_procfile_process, wait_for

pytestmark = pytest.mark.django_db

PROBE = """
import json, django
django.setup()
from django.conf import settings
from django.db import connection
connection.ensure_connection()
default = settings.DATABASES["default"]
print(json.dumps({
    "startup_options": "options" in default["OPTIONS"],
    "server_side_cursors": not default.get("DISABLE_SERVER_SIDE_CURSORS", False),
    "prepared_statements": settings.DATABASE_PREPARED_STATEMENTS,
    "prepare_threshold": connection.connection.prepare_threshold,
}))
"""


def _probe(**env):
    """What a process started with ``env`` would do with its database sessions."""
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=process_env(**env), capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


def test_the_setting_turns_off_every_session_feature():
    pooled = _probe(DATABASE_TRANSACTION_POOLING="true")
    assert pooled == {"startup_options": False, "server_side_cursors": False, "prepared_statements": False,
                      "prepare_threshold": None}
    direct = _probe(DATABASE_TRANSACTION_POOLING="false")
    assert direct == {"startup_options": True, "server_side_cursors": True, "prepared_statements": True,
                      "prepare_threshold": sys.maxsize}


@pytest.fixture
def pgbouncer():
    """One server connection shared by every client: what a client leaves on a session,
    the next one meets."""
    with running_pgbouncer(pool_size=1) as bouncer:
        yield bouncer


@pytest.fixture
def through(pgbouncer):
    """Django connections to the test database through PgBouncer, each a client of its own."""
    made = []

    def connect(startup_options=False):
        wrapper = connections.create_connection("default")
        options = dict(wrapper.settings_dict["OPTIONS"])
        if not startup_options:
            options.pop("options", None)
        wrapper.settings_dict = {**wrapper.settings_dict, "HOST": "127.0.0.1", "PORT": pgbouncer.port,
                                 "OPTIONS": options}
        made.append(wrapper)
        return wrapper

    yield connect
    for wrapper in made:
        wrapper.close()


def _prepared_statements(wrapper):
    with wrapper.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements")
        return cursor.fetchone()[0]


def _hot_path_statement(wrapper):
    with wrapper.prepared_cursor() as cursor:  # as apps.sql.rows runs the API's hot paths
        cursor.execute("SELECT %s::int + 1", [41])
        return cursor.fetchone()[0]


def test_without_the_setting_two_clients_prepare_the_same_statement_name(through, settings):
    settings.DATABASE_PREPARED_STATEMENTS = True
    first, second = through(), through()
    assert _hot_path_statement(first) == 42
    with pytest.raises(Exception, match='prepared statement "_pg3_0" already exists'):
        _hot_path_statement(second)


def test_without_the_setting_pgbouncer_refuses_the_startup_options(through):
    with pytest.raises(Exception, match="unsupported startup parameter: options"):
        through(startup_options=True).ensure_connection()


def test_with_the_setting_clients_share_a_session_and_leave_nothing_on_it(through, settings):
    settings.DATABASE_PREPARED_STATEMENTS = False  # as DATABASE_TRANSACTION_POOLING=true makes it
    clients = [through() for _ in range(3)]
    for _ in range(3):
        assert [_hot_path_statement(client) for client in clients] == [42] * 3
    assert _prepared_statements(clients[0]) == 0


def test_the_time_zone_django_sets_follows_its_client_to_any_session(through, pgbouncer):
    """Django's connections SET TIME ZONE 'UTC' when the server's differs (Debian's: Etc/UTC);
    PgBouncer tracks TimeZone per client and sets it again on the session it lends."""
    django_client = through()
    django_client.ensure_connection()
    with psycopg.connect(pgbouncer.url(), autocommit=True) as other:
        other.execute("SET TIME ZONE 'Asia/Tokyo'")  # on the one shared session
        with django_client.cursor() as cursor:
            cursor.execute("SELECT current_setting('TimeZone')")
            assert cursor.fetchone()[0] == "UTC"
        assert other.execute("SELECT current_setting('TimeZone')").fetchone()[0] == "Asia/Tokyo"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_web_process_answers_the_api_and_pings_through_pgbouncer(tmp_path, pgbouncer, make_tenant):
    """The API's hot paths (key authentication, job create and read: prepared statements
    without the setting) and monitor pings, from parallel requests on two web threads that
    share PgBouncer's one server session."""
    from apps.monitors.models import Ping
    from apps.monitors.services import create_monitor

    tenant = make_tenant(plan="enterprise")
    monitor = create_monitor(project=tenant.project, name="m", schedule_type="interval", interval_seconds=60,
                             grace_seconds=60)
    port = free_port()
    web = start_procfile_process(tmp_path, "web", PORT=port, WEB_CONCURRENCY=1, WEB_THREADS=2,
                                 DATABASE_URL=pgbouncer.url(), DATABASE_TRANSACTION_POOLING="true")
    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {tenant.full_api_key}"}
    try:
        wait_for(lambda: _answers(f"{base}/healthz"), timeout=120, message="the web process to answer")
        statuses = []

        def client(n):
            for i in range(5):
                body = {"project": str(tenant.project.pk), "name": f"t{n}-{i}",
                        "request": {"url": "https://example.com/"},
                        "schedule": {"type": "cron", "expression": "0 * * * *"}}
                created = requests.post(f"{base}/api/v1/jobs/", json=body, headers=headers, timeout=30)
                statuses.append(created.status_code)
                if created.status_code == 201:
                    job = requests.get(f"{base}/api/v1/jobs/{created.json()['id']}/", headers=headers, timeout=30)
                    statuses.append(job.status_code)
                statuses.append(requests.get(f"{base}/ping/{monitor.ping_id}", timeout=30).status_code)

        threads = [threading.Thread(target=client, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        code = web.stop()
    assert statuses and set(statuses) == {200, 201}, (statuses, web.output()[-3000:])
    assert statuses.count(201) == 20
    assert Ping.objects.filter(monitor=monitor).count() == 20
    assert code == 0, web.output()[-3000:]


def _answers(url):
    try:
        return requests.get(url, timeout=2).status_code == 200
    except requests.RequestException:
        return False


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_housekeeping_beat_runs_through_pgbouncer(tmp_path, pgbouncer, settings):
    """celery beat's DatabaseScheduler reads its schedule (django_celery_beat's tables)
    through PgBouncer, sends a task made due, and stops cleanly."""
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    every_second, _ = IntervalSchedule.objects.get_or_create(every=1, period=IntervalSchedule.SECONDS)
    queue = f"test.pgbouncer.{os.getpid()}"
    PeriodicTask.objects.create(name="pgbouncer probe", task="cronsvc.pgbouncer_probe", interval=every_second,
                                queue=queue)
    beat = start_procfile_process(tmp_path, "housekeeping", DATABASE_URL=pgbouncer.url(),
                                  DATABASE_TRANSACTION_POOLING="true")
    try:
        wait_for(lambda: "Sending due task pgbouncer probe" in beat.output(), timeout=120,
                 message="beat to send the due task")
    finally:
        code = beat.stop(timeout=60)
        redis.Redis.from_url(settings.CELERY_BROKER_URL).delete(queue)
    assert code == 0, beat.output()[-3000:]
    assert "Traceback" not in beat.output(), beat.output()[-3000:]


@pytest.fixture
def new_database():
    """An empty database of its own (dropped afterwards), as a new install has."""
    s = connections["default"].settings_dict
    admin = f"postgresql://{s['USER'] or 'postgres'}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/postgres"
    name = f"cronsvc_pgbouncer_release_{os.getpid()}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    yield name
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.slow
def test_the_release_step_migrates_a_new_database_through_pgbouncer(tmp_path, pgbouncer, new_database):
    env = process_env(DATABASE_URL=pgbouncer.url(new_database), DATABASE_TRANSACTION_POOLING="true",
                      STATIC_ROOT=str(tmp_path / "static"))
    result = subprocess.run([sys.executable, "manage.py", "release"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    check = subprocess.run([sys.executable, "manage.py", "migrate", "--check"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout[-3000:]
    assert (tmp_path / "static").is_dir()
