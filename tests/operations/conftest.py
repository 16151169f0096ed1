import pytest
import redis
from django.conf import settings

from apps.executions.outbound import redis_client
from cronsvc.delivery.breaker import host_key
from tests.support.broker import Broker
from tests.support.target import start_target


@pytest.fixture
def broker():
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    yield Broker(client)
    client.close()


@pytest.fixture
def target():
    server = start_target()
    redis_client().delete("cronsvc:cb:" + host_key(server.base_url))
    yield server
    server.close()
