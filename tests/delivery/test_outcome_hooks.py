"""A hook riding on run outcomes that raises is logged and counted, undoes only its own
writes, and never takes the outcome (or the other hooks) down with it (invariant 6)."""

import pytest
from django.db import OperationalError, connection, transaction
from django.utils import timezone

from apps.executions import hooks
from apps.executions.hooks import RunOutcome, run_outcome_hooks

pytestmark = pytest.mark.django_db


@pytest.fixture
def probe():
    """A table the test's hooks write to; the test's own hooks instead of the apps'."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE hook_probe (written_by text)")
    saved = list(hooks._hooks)
    hooks._hooks.clear()
    yield lambda: sorted(row[0] for row in _rows())
    hooks._hooks[:] = saved


def _rows():
    with connection.cursor() as cursor:
        cursor.execute("SELECT written_by FROM hook_probe")
        return cursor.fetchall()


def write(name):
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO hook_probe VALUES (%s)", [name])


def outcome():
    return RunOutcome(execution_id=1, job_id=1, organization_id=1, status="succeeded", finished_at=timezone.now())


def test_a_raising_hook_undoes_only_its_own_writes_and_is_counted(probe, monkeypatch, caplog):
    counted = []
    monkeypatch.setattr(hooks._hook_failed, "_value", counted.append)

    def metering(outcomes):
        write("metering")

    def broken(outcomes):
        write("broken")
        raise ValueError("a bug in a hook")

    def notifying(outcomes):
        write("notifying")

    for hook in (metering, broken, notifying):
        hooks.on_outcomes(hook)
    with transaction.atomic():
        write("the outcome")
        run_outcome_hooks([outcome()])
    assert probe() == ["metering", "notifying", "the outcome"]
    assert counted == [f"{__name__}.test_a_raising_hook_undoes_only_its_own_writes_and_is_counted.<locals>.broken"]
    assert "failed on 1 runs; recorded without it" in caplog.text and "a bug in a hook" in caplog.text


def test_hooks_that_all_succeed_run_once(probe):
    calls = []
    hooks.on_outcomes(lambda outcomes: calls.append(len(outcomes)) or write("one"))
    with transaction.atomic():
        run_outcome_hooks([outcome(), None, outcome()])
    assert calls == [2] and probe() == ["one"]


def test_the_database_failing_is_the_callers_to_retry(probe):
    def deadlocked(outcomes):
        raise OperationalError("deadlock detected")

    hooks.on_outcomes(deadlocked)
    with pytest.raises(OperationalError):
        with transaction.atomic():
            run_outcome_hooks([outcome()])
