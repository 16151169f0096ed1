import os
from urllib.parse import urlsplit

import psycopg
import pytest
import redis
from django.conf import settings

from tests.support.broker import Broker


@pytest.fixture
def broker():
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    yield Broker(client)
    client.close()


REDIS_INDEX = 8  # the deploy tests' own Redis database: their workers consume the real plan queues
# Every test that takes fresh_database must carry this mark (the fixture refuses one that
# does not): it empties REDIS_INDEX and the deploy tests start workers on the real plan
# queues there, so two at once on two xdist workers would take (or wipe) each other's
# messages. loadgroup runs a group's tests on one worker, one after another.
SHARED_REDIS_GROUP = pytest.mark.xdist_group("deploy-redis")


@pytest.fixture
def fresh_database(request):
    """An empty PostgreSQL database and an emptied Redis database, as a new install has:
    {"DATABASE_URL": ..., "REDIS_URL": ...}. Dropped afterwards."""
    group = request.node.get_closest_marker("xdist_group")
    if group is None or group.args != SHARED_REDIS_GROUP.mark.args:
        pytest.fail(f"{request.node.nodeid} takes fresh_database: mark it with SHARED_REDIS_GROUP "
                    "(tests/operations/conftest.py), or it may run beside another test on the same Redis database")
    server = urlsplit(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/cronsvc"))
    user, host, port = server.username or "postgres", server.hostname, server.port or 5432
    admin = f"postgresql://{user}@{host}:{port}/postgres"
    name = f"cronsvc_fresh_{os.getpid()}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    redis_url = f"redis://{host}:6379/{REDIS_INDEX}"
    redis.Redis.from_url(redis_url).flushdb()
    yield {"DATABASE_URL": f"postgres://{user}@{host}:{port}/{name}", "REDIS_URL": redis_url}
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
