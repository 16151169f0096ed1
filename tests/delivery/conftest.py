import pytest

from apps.executions.outbound import redis_client
from cronsvc.delivery.breaker import host_key
from tests.support.target import start_target


@pytest.fixture
def target():
    server = start_target()
    # A port can come back in a later run: start with a closed circuit for it.
    redis_client().delete("cronsvc:cb:" + host_key(server.base_url))
    yield server
    server.close()


@pytest.fixture
def allow_loopback(settings):
    """The guard refuses loopback by default; the tests' endpoints live there."""
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
