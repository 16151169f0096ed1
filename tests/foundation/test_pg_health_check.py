"""apps/sql/backend: the per-request health check of a reused connection asks the socket,
not the server (no SELECT 1), and still finds a connection the server has closed."""

import time

import psycopg
import pytest
from django.db import connections

from apps.sql.backend.base import DatabaseWrapper
from tests.support.processes import test_database_url as database_url

pytestmark = pytest.mark.django_db


@pytest.fixture
def wrapper():
    own = connections.create_connection("default")  # a connection of its own, outside the test's transaction
    own.ensure_connection()
    yield own
    own.close()


def _last_statement(pid):
    with psycopg.connect(database_url(), autocommit=True) as admin:
        return admin.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()[0]


def test_the_server_mode_engine_is_this_backend(wrapper):
    assert isinstance(wrapper, DatabaseWrapper)
    assert wrapper.health_check_enabled


def test_a_healthy_connection_is_usable_without_a_round_trip(wrapper):
    with wrapper.cursor() as cursor:
        cursor.execute("SELECT 42 AS marker")
    pid = wrapper.connection.info.backend_pid
    assert wrapper.is_usable()
    assert _last_statement(pid) == "SELECT 42 AS marker"  # the check sent nothing


def test_a_connection_the_server_ended_is_not_usable_and_is_replaced(wrapper):
    pid = wrapper.connection.info.backend_pid
    with psycopg.connect(database_url(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
    deadline = time.monotonic() + 5
    while wrapper.is_usable() and time.monotonic() < deadline:
        time.sleep(0.01)  # the server's FATAL message and EOF arrive asynchronously
    assert not wrapper.is_usable()
    wrapper.close_if_unusable_or_obsolete()  # what Django does at a request's start and end
    with wrapper.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] != pid


def test_a_closed_connection_is_not_usable(wrapper):
    wrapper.connection.close()
    assert not wrapper.is_usable()
