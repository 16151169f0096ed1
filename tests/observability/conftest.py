import pytest

from tests.support.target import start_target


@pytest.fixture
def target():
    from apps.executions.outbound import redis_client
    from cronsvc.delivery.breaker import host_key

    server = start_target()
    redis_client().delete("cronsvc:cb:" + host_key(server.base_url))
    yield server
    server.close()


@pytest.fixture
def metrics_open(settings):
    """/metrics answers the test client (REMOTE_ADDR 127.0.0.1)."""
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_IPS = ["127.0.0.1/32"]
    return settings
