"""Timeouts everywhere: every PostgreSQL connection and every Redis client gives up on a
peer that does not answer, instead of hanging the process (docs/configuration.md,
"Timeouts"). The peer here is a port that accepts and never answers."""

import time

import psycopg
import pytest
import redis
from django.conf import settings
from django.core.cache import caches
from django.db import connection

from tests.support.blackhole import Blackhole

pytestmark = pytest.mark.django_db


@pytest.fixture
def blackhole():
    hole = Blackhole()
    yield hole
    hole.close()


def test_the_database_session_ends_idle_transactions_and_keeps_alive():
    with connection.cursor() as cursor:
        cursor.execute("SHOW idle_in_transaction_session_timeout")
        assert cursor.fetchone()[0] == "1min"
    options = settings.DATABASES["default"]["OPTIONS"]
    assert options["connect_timeout"] == 5 and options["keepalives"] == 1
    assert options["tcp_user_timeout"] == 30_000


def test_connecting_to_a_database_that_never_answers_fails_within_the_connect_timeout(blackhole):
    options = {k: v for k, v in settings.DATABASES["default"]["OPTIONS"].items()
               if k in ("keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count")}
    started = time.monotonic()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(host="127.0.0.1", port=blackhole.port, user="postgres", dbname="x", connect_timeout=2,
                        **options)
    assert time.monotonic() - started < 30  # bounded (libpq may try twice: with and without SSL)


def redis_clients():
    from apps.eventstream import relay
    from apps.executions.scheduling.broker_queues import broker_client
    from apps.executions.shared_redis import redis_client
    from apps.jobs.scripts import _redis

    return {
        "limits and cancel flags": redis_client(),
        "event stream": relay._redis(),
        "sandbox report": _redis(settings.REDIS_URL),
        "broker queue depths": broker_client(settings.CELERY_BROKER_URL),
        "api cache": caches["api"]._cache.get_client(write=True),
        "web cache": caches["web"]._cache.get_client(write=True),
    }


def test_every_redis_client_has_timeouts_and_health_checks():
    for name, client in redis_clients().items():
        kwargs = client.connection_pool.connection_kwargs
        assert kwargs.get("socket_timeout") and kwargs.get("socket_connect_timeout"), name
        assert kwargs.get("health_check_interval") == settings.REDIS_HEALTH_CHECK_INTERVAL, name


def test_the_broker_transport_has_the_redis_timeouts():
    from config.celery import app

    options = app.conf.broker_transport_options
    for key in ("socket_timeout", "socket_connect_timeout", "health_check_interval"):
        assert options[key] == settings.REDIS_CLIENT_OPTIONS[key], key


def test_a_redis_client_with_these_options_gives_up_on_a_redis_that_never_answers(blackhole):
    """Within a few socket timeouts (redis-py 8's default retries made it 111 s at 0.5 s)."""
    client = redis.Redis(host="127.0.0.1", port=blackhole.port,
                         **{**settings.REDIS_CLIENT_OPTIONS, "socket_timeout": 0.5})
    started = time.monotonic()
    with pytest.raises(redis.TimeoutError):
        client.ping()
    assert time.monotonic() - started < 30  # a bound, not a goal: it hung for minutes before
