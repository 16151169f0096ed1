"""The release step (the Procfile's `release` line) on a new install: a missing database the
role may create is created and migrated; one it cannot reach or create stops the release
with one line saying what to do, a non-zero exit and no traceback."""

import os
import subprocess
import sys
from urllib.parse import urlsplit

import psycopg
import pytest

from tests.support.deploy import ROOT
from tests.support.processes import free_port

pytestmark = pytest.mark.slow

SERVER = urlsplit(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/cronsvc"))
HOST, PORT = SERVER.hostname, SERVER.port or 5432
ADMIN = f"postgresql://{SERVER.username or 'postgres'}@{HOST}:{PORT}/postgres"


def _release(database_url, tmp_path):
    """`python manage.py release` as the Procfile runs it (its settings quiet: SITE_URL and
    EMAIL_URL set, so stderr holds only what the release says)."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "DATABASE_URL": database_url,
           "REDIS_URL": "redis://127.0.0.1:6379/15", "SECRET_KEY": "test-only-not-secret",
           "SITE_URL": "http://127.0.0.1:8000", "EMAIL_URL": "smtp://mail.example.com:587", "STATIC_ROOT": str(tmp_path / "static"),
           "LOG_FORMAT": "console"}
    return subprocess.run([sys.executable, "manage.py", "release"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture
def database_name():
    name = f"cronsvc_release_{os.getpid()}"
    _drop(name)
    yield name
    _drop(name)


def _drop(name, role=None):
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if role:
            conn.execute(f'DROP ROLE IF EXISTS "{role}"')


def _one_clear_line(result):
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith("CommandError: release: "), lines
    return lines[0]


def test_a_missing_database_the_role_may_create_is_created_and_migrated(database_name, tmp_path):
    result = _release(f"postgres://{SERVER.username or 'postgres'}@{HOST}:{PORT}/{database_name}", tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert f"release: database '{database_name}' created" in result.stdout
    with psycopg.connect(f"postgresql://{SERVER.username or 'postgres'}@{HOST}:{PORT}/{database_name}") as conn:
        applied = conn.execute("SELECT count(*) FROM django_migrations WHERE app = 'jobs'").fetchone()[0]
    assert applied > 0

    again = _release(f"postgres://{SERVER.username or 'postgres'}@{HOST}:{PORT}/{database_name}", tmp_path)
    assert again.returncode == 0 and "created" not in again.stdout, again.stderr[-2000:]


def test_a_role_without_createdb_gets_one_line_naming_the_fix(database_name, tmp_path):
    role = f"cronsvc_nocreatedb_{os.getpid()}"
    _drop(database_name, role)
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN NOCREATEDB')
    try:
        line = _one_clear_line(_release(f"postgres://{role}@{HOST}:{PORT}/{database_name}", tmp_path))
    finally:
        _drop(database_name, role)
    assert f"database '{database_name}' does not exist" in line
    assert f"createdb -O {role} {database_name}" in line


def test_an_unreachable_server_gets_one_line(tmp_path):
    port = free_port()
    line = _one_clear_line(_release(f"postgres://postgres@127.0.0.1:{port}/cronsvc", tmp_path))
    assert f"cannot reach PostgreSQL at postgres@127.0.0.1:{port}" in line and "refused" in line.lower()
