import pytest
import redis
from django.conf import settings

from tests.support.broker import Broker


@pytest.fixture
def broker():
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    yield Broker(client)
    client.close()
