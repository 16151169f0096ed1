import pytest
import redis
from django.conf import settings

from tests.support.broker import Broker, use_private_queue


@pytest.fixture
def broker():
    """The real Redis broker, seen as lists of Celery messages per queue."""
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    yield Broker(client)
    client.close()


@pytest.fixture
def private_queue(tenant, broker):
    queue = use_private_queue(tenant)
    yield queue
    broker.drop(queue)
