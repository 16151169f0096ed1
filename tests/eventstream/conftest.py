import uuid

import pytest
import redis
from django.conf import settings as django_settings


class Streams:
    """The test's own stream keys (a prefix of its own) on the test settings' Redis."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.client = redis.Redis.from_url(django_settings.REDIS_URL)

    def of(self, organization_id):
        return f"{self.prefix}:org:{organization_id}"

    def read_group(self, key, group="test", consumer="c1"):
        """Every entry of ``key`` through a consumer group, acknowledged: [(id, event)]."""
        import json

        try:
            self.client.xgroup_create(key, group, id="0", mkstream=True)
        except redis.ResponseError as exc:
            assert "BUSYGROUP" in str(exc)
        got = []
        while True:
            reply = self.client.xreadgroup(group, consumer, {key: ">"}, count=500)
            if not reply or not reply[0][1]:
                return got
            for entry_id, fields in reply[0][1]:
                got.append((entry_id.decode(), json.loads(fields[b"event"])))
                self.client.xack(key, group, entry_id)

    def cleanup(self):
        keys = list(self.client.scan_iter(f"{self.prefix}:*"))
        if keys:
            self.client.delete(*keys)
        self.client.close()


@pytest.fixture
def streams(settings):
    """The event stream on, to a prefix of this test's own."""
    found = Streams(f"test-events-{uuid.uuid4().hex[:8]}")
    settings.EVENT_STREAM = True
    settings.EVENT_STREAM_PREFIX = found.prefix
    settings.EVENT_STREAM_REDIS_URL = django_settings.REDIS_URL
    yield found
    found.cleanup()
