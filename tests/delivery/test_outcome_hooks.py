"""A hook riding on run outcomes that raises is logged and counted, undoes only its own
writes, and never takes the outcome (or the other hooks) down with it (invariant 6)."""

import uuid

import pytest
from django.db import OperationalError, connection, transaction
from django.utils import timezone

from apps.executions import hooks
from apps.executions.hooks import RunOutcome, run_outcome_hooks
from apps.executions.models import UsageMonth

pytestmark = pytest.mark.django_db


@pytest.fixture
def probe():
    """A table the test's hooks write to; the test's own hooks instead of the apps'."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE hook_probe (written_by text)")
    saved = list(hooks._hooks), list(hooks._last_hooks)
    hooks._hooks.clear()
    hooks._last_hooks.clear()
    yield lambda: sorted(row[0] for row in _rows())
    hooks._hooks[:], hooks._last_hooks[:] = saved


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


def test_a_hook_registered_last_runs_after_the_others(probe):
    calls = []
    hooks.on_outcomes(lambda outcomes: calls.append("last"), last=True)
    hooks.on_outcomes(lambda outcomes: calls.append("first"))
    hooks.on_outcomes(lambda outcomes: calls.append("second"))
    with transaction.atomic():
        run_outcome_hooks([outcome()])
    assert calls == ["first", "second", "last"]


def test_usage_is_metered_after_every_other_hook(make_tenant, caplog):
    """The counters' row locks, shared by every worker's recording, are taken last: held
    until the commit, not while the other hooks run (bench/README.md, "Usage counters,
    metered last")."""
    organization = make_tenant().organization
    seen = []

    def other_app(outcomes):
        seen.append(UsageMonth.objects.filter(organization=organization).values_list("runs", flat=True).first())

    counted = RunOutcome(execution_id=uuid.uuid4(), job_id=uuid.uuid4(), organization_id=organization.id,
                         status="succeeded", finished_at=timezone.now(), attempt_number=1, attempt_counted=True)
    hooks.on_outcomes(other_app)
    try:
        with transaction.atomic():
            run_outcome_hooks([counted])
    finally:
        hooks._hooks.remove(other_app)
    assert seen == [None]  # no counter yet while the other hooks ran
    assert "failed" not in caplog.text
    assert UsageMonth.objects.get(organization=organization).runs == 1
