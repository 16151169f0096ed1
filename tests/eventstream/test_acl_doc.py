"""The ACL line docs/event-stream.md gives a customer works as written on a real Redis:
on a non-zero database index too (the client's SELECT), read through a consumer group."""

import re
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis
from django.conf import settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "event-stream.md"


def documented_acl():
    lines = [line for line in DOC.read_text().splitlines() if line.startswith("ACL SETUSER ")]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("db", [0, 5])
def test_the_documented_acl_user_reads_its_stream(db):
    server = urlsplit(settings.REDIS_URL)
    admin = redis.Redis(host=server.hostname, port=server.port or 6379, db=db)
    user, password = f"acl-doc-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    key = f"cronsvc:events:org:{uuid.uuid4()}"
    line = documented_acl().replace("acme", user, 1)
    line = re.sub(r">\S+", f">{password}", line, count=1)
    line = re.sub(r"~cronsvc:events:org:\S+", f"~{key}", line, count=1)
    admin.execute_command(*line.split())
    try:
        admin.xadd(key, {"event": '{"type": "execution"}'})
        customer = redis.Redis(host=server.hostname, port=server.port or 6379, db=db,
                               username=user, password=password)
        assert customer.ping()
        customer.xgroup_create(key, "billing", id="0")
        reply = customer.xreadgroup("billing", "c1", {key: ">"}, count=10)
        (entry_id, fields), = reply[0][1]
        assert fields == {b"event": b'{"type": "execution"}'}
        assert customer.xack(key, "billing", entry_id) == 1
        with pytest.raises(redis.exceptions.NoPermissionError):
            customer.xadd(key, {"event": "forged"})  # read only
        with pytest.raises(redis.exceptions.NoPermissionError):
            customer.xrange("cronsvc:events:org:someone-else")  # its own stream only
        customer.close()
    finally:
        admin.execute_command("ACL", "DELUSER", user)
        admin.delete(key)
        admin.close()
