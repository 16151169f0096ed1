import pytest

from apps.executions.outbound import redis_client
from cronsvc.delivery.breaker import host_key
from tests.support.target import start_target


@pytest.fixture
def target():
    server = start_target()
    redis_client().delete("cronsvc:cb:" + host_key(server.base_url))
    yield server
    server.close()


@pytest.fixture
def allow_loopback(settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
