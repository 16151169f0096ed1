"""The dead-letter store (apps/executions/worker/deadletters.py) and ``manage.py deadletters``, on
the test Redis (a key of each test's own)."""

import json
import uuid
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from apps.executions.worker import deadletters


@pytest.fixture(autouse=True)
def own_key(monkeypatch):
    key = f"test:deadletter:{uuid.uuid4().hex}"
    client = deadletters._client()
    monkeypatch.setattr(deadletters, "KEY", key)
    yield key
    client.delete(key)


def command(*args):
    out = StringIO()
    call_command("deadletters", *args, stdout=out)
    return out.getvalue()


def test_a_dead_letter_is_kept_with_its_reason_and_counted(monkeypatch):
    counted = []
    monkeypatch.setattr(deadletters._counter, "_value", counted.append)
    assert deadletters.record("runs.pro", "not JSON: Expecting value", b"\xffgarbage") is True
    (entry,) = deadletters.entries()
    assert entry["queue"] == "runs.pro" and entry["reason"] == "not JSON: Expecting value"
    assert entry["body"] == "\\xffgarbage"
    assert counted == ["not JSON"]  # the metric's label: the reason's kind, not its details


def test_bodies_are_cut_and_the_list_is_capped(monkeypatch):
    monkeypatch.setattr(deadletters, "MAX_ENTRIES", 3)
    for n in range(5):
        deadletters.record("q", "not JSON: x", f"{n}" * 10_000)
    letters = deadletters.entries()
    assert [letter["body"][0] for letter in letters] == ["4", "3", "2"]  # newest first, oldest dropped
    assert len(letters[0]["body"]) < deadletters.BODY_LIMIT + 40
    assert letters[0]["body"].endswith("[10000 characters]")


def test_a_dead_letter_redis_refuses_is_logged_and_never_raises(settings, caplog):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    assert deadletters.record("q", "not JSON: x", "body") is False
    assert "NOT STORED" in caplog.text and "body" in caplog.text


def test_the_command_lists_and_purges():
    deadletters.record("runs.free", "not JSON: one", "first")
    deadletters.record("runs.free", "unknown task: two", {"task": "x"})
    shown = command("list")
    assert shown.index("unknown task") < shown.index("not JSON")  # newest first
    assert "2 shown, 2 kept" in shown
    lines = command("list", "--json", "-n", "1").splitlines()
    assert [json.loads(line)["reason"] for line in lines] == ["unknown task: two"]
    assert "1 dead letters dropped" in command("purge", "--oldest", "1")
    assert [e["body"] for e in deadletters.entries()] == ['{"task": "x"}']
    assert "1 dead letters dropped" in command("purge")
    assert deadletters.entries() == []


def test_the_command_refuses_without_redis(settings):
    settings.REDIS_URL = ""
    with pytest.raises(CommandError, match="REDIS_URL"):
        command("list")
