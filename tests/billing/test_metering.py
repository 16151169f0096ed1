"""Usage metering: every attempt counted once, in the recording transaction; quota
warnings once per threshold per month; a blocking plan's runs past the quota skipped."""

import itertools
from datetime import date, timedelta

import pytest
from django.utils import timezone

from apps.billing.models import QuotaWarning
from apps.executions.hooks import RunOutcome
from apps.executions.models import Attempt, Execution, UsageDay, UsageMonth
from apps.executions.usage.metering import meter_outcomes
from apps.executions.worker.batch import run_batch
from tests.conftest import utc

_seconds = itertools.count(1)


def outcome(tenant, finished_at, status="succeeded", counted=True):
    return RunOutcome(execution_id=None, job_id=None, organization_id=tenant.organization.id, status=status,
                   finished_at=finished_at, attempt_number=1 if counted else None, attempt_counted=counted)


def queued(tenant, job, **fields):
    values = dict(job=job, organization=tenant.organization, queue="q",
                  scheduled_for=timezone.now() - timedelta(seconds=next(_seconds)))
    values.update(fields)
    return Execution.objects.create(**values)


def usage(tenant, month=None):
    month = month or timezone.now().date().replace(day=1)
    return UsageMonth.objects.filter(organization=tenant.organization, month=month).values_list("runs", flat=True).first() or 0


def test_counts_attempts_per_month_and_day(tenant, other_tenant):
    meter_outcomes([
        outcome(tenant, utc(2030, 1, 31, 23, 59)),
        outcome(tenant, utc(2030, 1, 31, 10, 0), status="failed"),
        outcome(tenant, utc(2030, 1, 31, 10, 0), status="queued"),  # a failed attempt, retry waiting
        outcome(tenant, utc(2030, 2, 1, 0, 0)),
        outcome(tenant, utc(2030, 2, 1, 0, 0), status="skipped", counted=False),  # no request made
        outcome(other_tenant, utc(2030, 1, 5, 0, 0)),
    ])
    meter_outcomes([outcome(tenant, utc(2030, 1, 2, 0, 0))])
    assert usage(tenant, date(2030, 1, 1)) == 4
    assert usage(tenant, date(2030, 2, 1)) == 1
    assert usage(other_tenant, date(2030, 1, 1)) == 1
    day = UsageDay.objects.get(organization=tenant.organization, day=date(2030, 1, 31))
    assert (day.runs, day.succeeded, day.failed) == (3, 1, 2)
    assert UsageMonth.objects.get(organization=tenant.organization, month=date(2030, 1, 1)).quota == 500_000


@pytest.mark.usefixtures("allow_loopback")
def test_a_redelivered_batch_counts_nothing_more(tenant, make_job, target):
    ok = make_job(tenant, url=target.url("/ok"))
    failing = make_job(tenant, url=target.url("/status/503"), max_attempts=3, retry_initial_delay_seconds=600,
                       retry_max_delay_seconds=600)
    ids = [queued(tenant, ok).id for _ in range(4)] + [queued(tenant, failing).id]
    assert run_batch(ids) == 5
    assert run_batch(ids) == 0  # the same message again: nothing claimed, nothing counted
    attempts = Attempt.objects.filter(execution__organization=tenant.organization).count()
    assert attempts == 5 and usage(tenant) == 5
    today = UsageDay.objects.get(organization=tenant.organization, day=timezone.now().date())
    assert (today.succeeded, today.failed) == (4, 1)


def test_quota_warnings_at_80_and_100_percent_once_each(tenant):
    from apps.notifications.models import Notification

    plan = tenant.organization.plan
    plan.monthly_executions = 10
    plan.save()
    when = utc(2030, 3, 5, 12, 0)
    meter_outcomes([outcome(tenant, when) for _ in range(7)])
    assert not QuotaWarning.objects.exists()
    meter_outcomes([outcome(tenant, when)])  # 8 of 10
    meter_outcomes([outcome(tenant, when)])
    assert list(QuotaWarning.objects.values_list("threshold", "runs")) == [(80, 8)]
    meter_outcomes([outcome(tenant, when) for _ in range(3)])  # 12: past 100%
    meter_outcomes([outcome(tenant, when) for _ in range(5)])
    assert list(QuotaWarning.objects.order_by("threshold").values_list("threshold", "runs")) == [(80, 8), (100, 12)]
    sent = Notification.objects.filter(organization_id=tenant.organization.id, event="quota")
    assert sent.count() == 2
    assert all(tenant.owner.email in n.recipients for n in sent if n.recipients)
    meter_outcomes([outcome(tenant, utc(2030, 4, 1, 0, 0)) for _ in range(8)])  # a new month: warned again
    assert QuotaWarning.objects.filter(month=date(2030, 4, 1), threshold=80).count() == 1


@pytest.mark.usefixtures("allow_loopback")
def test_a_blocking_plan_skips_runs_past_the_quota(make_tenant, make_job, target):
    free = make_tenant(plan="free")
    plan = free.organization.plan
    plan.monthly_executions = 3
    plan.save()
    job = make_job(free, url=target.url("/ok"))
    first = [queued(free, job).id for _ in range(2)]
    assert run_batch(first) == 2
    rest = [queued(free, job).id for _ in range(3)]
    assert run_batch(rest) == 1  # one run left in the quota
    skipped = Execution.objects.filter(id__in=rest, status="skipped")
    assert skipped.count() == 2 and set(skipped.values_list("skip_reason", flat=True)) == {"quota_exceeded"}
    assert usage(free) == 3 and len(target.requests_to("/ok")) == 3
    assert QuotaWarning.objects.filter(organization=free.organization, threshold=100).exists()


@pytest.mark.usefixtures("allow_loopback")
def test_an_overage_plan_runs_on_past_the_quota(tenant, make_job, target):
    plan = tenant.organization.plan  # pro: overage
    plan.monthly_executions = 2
    plan.save()
    job = make_job(tenant, url=target.url("/ok"))
    assert run_batch([queued(tenant, job).id for _ in range(4)]) == 4
    assert usage(tenant) == 4


def test_an_attempt_stored_after_its_lease_was_lost_counts_by_its_own_result(tenant):
    when = utc(2030, 5, 2, 8, 0)
    stray = dict(organization_id=tenant.organization.id, execution_id=None, job_id=None, finished_at=when,
                 attempt_number=1, attempt_counted=True, status="running", moved=False)
    meter_outcomes([RunOutcome(**stray), RunOutcome(**stray, error_kind="timeout")])
    day = UsageDay.objects.get(organization=tenant.organization, day=date(2030, 5, 2))
    assert (day.runs, day.succeeded, day.failed) == (2, 1, 1)


@pytest.mark.django_db(transaction=True)
def test_concurrent_recordings_lose_no_count_and_never_deadlock(make_tenant):
    """Workers record groups at the same time, each group's metering in its own recording
    transaction and in one statement (both counters): the rows of the same organizations'
    months and days are locked in one order by every group, so none waits on another in a
    cycle (a deadlock would roll a whole recording back) and every count lands."""
    import threading
    import time

    from django.db import connection, transaction

    tenants = [make_tenant() for _ in range(3)]
    moments = [utc(2031, 3, 30, 12, 0), utc(2031, 3, 31, 23, 59), utc(2031, 4, 1, 0, 0)]
    workers, rounds = 4, 25
    start, errors = threading.Barrier(workers), []

    def record(seat):
        # each worker meets the keys in another order; a held transaction makes them overlap
        group = [outcome(t, m, status="succeeded" if (seat + i) % 2 else "failed")
                 for i, (t, m) in enumerate(itertools.product(tenants[seat % 3:] + tenants[:seat % 3], moments))]
        try:
            start.wait(10)
            for _ in range(rounds):
                with transaction.atomic():
                    meter_outcomes(group if seat % 2 else group[::-1])
                    time.sleep(0.002)
        except Exception as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)
        finally:
            connection.close()  # this thread's own

    threads = [threading.Thread(target=record, args=(seat,)) for seat in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    for tenant in tenants:
        assert usage(tenant, date(2031, 3, 1)) == workers * rounds * 2
        assert usage(tenant, date(2031, 4, 1)) == workers * rounds
        days = UsageDay.objects.filter(organization=tenant.organization).order_by("day")
        assert [(d.day.day, d.runs, d.succeeded + d.failed) for d in days] == [
            (30, workers * rounds, workers * rounds), (31, workers * rounds, workers * rounds),
            (1, workers * rounds, workers * rounds)]
