"""Draining a backlog (issue 38): larger batches while due jobs wait, the tick's other parts
once a second meanwhile, the due scan memoised within a batch, and two schedulers on one
backlog recording each occurrence exactly once."""

import threading
import uuid
from datetime import timedelta

import pytest
from django.db import connection

from apps.executions.models import Execution
from apps.executions.scheduling import process
from apps.executions.scheduling.process import SchedulerLoop
from apps.executions.scheduling.tick import (
    _AS_TEXT,
    _CLAIM_VALUES,
    CLAIM_FIELDS,
    MAX_DUE_SCAN,
    ClaimedJob,
    _batch_rows,
    _occurrences_for,
    _outcome_key,
    _uuid7s,
)
from apps.jobs.models import Job, JobDue
from apps.jobs.windowing import job_windows
from tests.conftest import utc

T0 = utc(2027, 3, 1, 12, 0)


def due_jobs(make_job, tenant, count, **fields):
    return [make_job(tenant, next_run_at=T0, **fields) for _ in range(count)]


@pytest.mark.django_db(transaction=True)
def test_a_full_batch_makes_the_next_one_the_backlog_batch(tenant, make_job, private_queue, broker):
    jobs = due_jobs(make_job, tenant, 30)
    loop = SchedulerLoop(batch_size=4, backlog_batch_size=10, sweep_interval=3600, clock=lambda: T0)

    assert loop.tick() is True  # 4: full
    assert Execution.objects.count() == 4
    assert loop.tick() is True  # 10: full again
    assert Execution.objects.count() == 14
    assert loop.tick() is True and loop.tick() is False  # 10, then the last 6
    assert Execution.objects.count() == 30
    assert loop.tick() is False and Execution.objects.count() == 30  # nothing due: the small batch again
    assert not loop.state.backlogged
    assert sorted(broker.published_ids(private_queue)) == sorted(
        str(i) for i in Execution.objects.filter(job__in=jobs).values_list("id", flat=True))


def test_the_backlog_batch_is_never_below_the_batch():
    assert SchedulerLoop(batch_size=50, backlog_batch_size=10).backlog_batch_size == 50


@pytest.mark.django_db(transaction=True)
def test_during_a_backlog_due_retries_wait_for_the_interval_then_go(tenant, make_job, private_queue, broker):
    due_jobs(make_job, tenant, 20)
    retried = make_job(tenant, next_run_at=None)
    loop = SchedulerLoop(batch_size=4, backlog_batch_size=4, sweep_interval=3600, clock=lambda: T0)
    assert loop.tick() is True  # the other parts ran after this batch
    retry = Execution.objects.create(job=retried, organization=tenant.organization, scheduled_for=T0,
                                     queue=private_queue, published_at=None, next_attempt_at=T0)

    assert loop.tick() is True  # backlogged, and less than a second since the other parts ran
    retry.refresh_from_db()
    assert retry.published_at is None

    loop.state.last_parts -= process.BACKLOG_PARTS_INTERVAL  # a second has passed
    assert loop.tick() is True
    retry.refresh_from_db()
    assert retry.published_at == T0 and str(retry.id) in broker.published_ids(private_queue)


@pytest.mark.django_db(transaction=True)
def test_after_a_backlog_the_other_parts_run_every_tick(tenant, make_job, private_queue, broker):
    due_jobs(make_job, tenant, 6)
    retried = make_job(tenant, next_run_at=None)
    loop = SchedulerLoop(batch_size=4, backlog_batch_size=4, sweep_interval=3600, clock=lambda: T0)
    assert loop.tick() is True
    retry = Execution.objects.create(job=retried, organization=tenant.organization, scheduled_for=T0,
                                     queue=private_queue, published_at=None, next_attempt_at=T0)
    assert loop.tick() is False  # the last 2: the backlog is over, the other parts run at once
    retry.refresh_from_db()
    assert retry.published_at == T0


@pytest.mark.django_db(transaction=True)
def test_two_schedulers_on_one_backlog_record_each_occurrence_once(tenant, make_job, private_queue, broker):
    jobs = due_jobs(make_job, tenant, 240, cron_expression="* * * * *")
    errors = []

    def drain():
        try:
            loop = SchedulerLoop(batch_size=10, backlog_batch_size=40, sweep_interval=3600, clock=lambda: T0)
            while loop.tick():
                pass
        except Exception as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            connection.close()

    schedulers = [threading.Thread(target=drain) for _ in range(2)]
    for scheduler in schedulers:
        scheduler.start()
    for scheduler in schedulers:
        scheduler.join(timeout=120)

    assert errors == []
    occurrences = list(Execution.objects.filter(job__in=jobs).values_list("job_id", "scheduled_for"))
    assert len(occurrences) == len(set(occurrences)) == 240  # none lost, none doubled
    assert {job_id for job_id, _ in occurrences} == {job.id for job in jobs}
    assert not Job.objects.filter(id__in=[j.id for j in jobs], due__next_run_at__lte=T0).exists()
    published = broker.published_ids(private_queue)
    assert len(published) == len(set(published)) == 240


# --- the due scan memoised within a batch: the same rows as each job scanned alone -----------

def claimed(index, **columns):
    """A claimed job as the claim query gives it, with the bench's kind of variety."""
    values = dict(
        id=f"00000000-0000-7000-8000-{index:012d}", organization_id="org", schedule_type="cron",
        cron_expression="*/5 * * * *", interval_seconds=None, run_at=None, timezone="UTC", start_at=None,
        end_at=None, jitter_seconds=0, misfire_policy="run_once", misfire_grace_seconds=600, overlap_policy="allow",
        region="", next_run_at=T0, created_at=T0 - timedelta(days=30), version=1, priority="normal", windows="[]",
        blackouts="[]", outside_window="skip", org_queue="runs.free", unfinished_run=None,
    )
    values.update(columns)
    return ClaimedJob(**values)


def varied_jobs():
    now = T0 + timedelta(minutes=3)
    jobs = []
    crons = ["*/5 * * * *", "0 * * * *", "* * * * *", "0 12 * * MON#1", "@hourly"]
    zones = ["UTC", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kathmandu"]
    for index in range(240):
        columns = dict(cron_expression=crons[index % 5], timezone=zones[index % 4],
                       next_run_at=T0 - timedelta(minutes=(index % 3) * 5))
        if index % 11 == 0:
            columns.update(schedule_type="interval", cron_expression="", interval_seconds=60 * (1 + index % 2),
                           start_at=T0 - timedelta(hours=1))
        if index % 13 == 0:
            columns.update(jitter_seconds=30)
        if index % 17 == 0:
            columns.update(misfire_policy="run_all", misfire_grace_seconds=60)
        if index % 19 == 0:
            columns.update(overlap_policy="forbid", unfinished_run="some-run")
        if index % 23 == 0:
            columns.update(end_at=T0 + timedelta(minutes=1))
        if index % 29 == 0:
            columns.update(windows='[{"days": ["mon", "tue", "wed", "thu", "fri"], "start": "13:00", "end": "17:00"}]')
        if index % 31 == 0:
            columns.update(schedule_type="once", cron_expression="", run_at=T0, next_run_at=T0)
        jobs.append(claimed(index, **columns))
    # a job far behind: more than MAX_DUE_SCAN occurrences due, twice (same schedule and due time)
    behind = dict(cron_expression="* * * * *", next_run_at=T0 - timedelta(minutes=MAX_DUE_SCAN + 50))
    jobs += [claimed(900, **behind), claimed(901, **behind)]
    return jobs, now


def test_the_memoised_due_scan_gives_every_job_the_rows_of_its_own_scan():
    jobs, now = varied_jobs()
    scans = {}
    shared = [_occurrences_for(job, now, frozenset(), scans) for job in jobs]
    alone = [_occurrences_for(job, now, frozenset(), None) for job in jobs]
    assert shared == alone
    assert len(scans) < len(jobs) / 2  # the jobs sharing a schedule shared its scan
    assert any(len(rows) > 1 for rows, _ in alone) and any(rows == [] or nxt is None for rows, nxt in alone)


def test_a_claimed_jobs_windows_read_as_text_are_the_jobs_own(tenant, make_job):
    windows = [{"days": ["mon", "tue", "wed", "thu", "fri"], "start": "09:00", "end": "17:00"}]
    blackouts = [{"start": "2027-12-24", "end": "2027-12-26"}]
    job = make_job(tenant, windows=windows, blackouts=blackouts, timezone="Europe/Berlin", next_run_at=T0)
    columns = dict(zip(CLAIM_FIELDS, [getattr(job, name) for name in CLAIM_FIELDS]))
    text = JobDue.objects.filter(job_id=job.id).annotate(**_AS_TEXT).values_list(*_CLAIM_VALUES).get()
    as_text = dict(zip(CLAIM_FIELDS, text))
    assert isinstance(as_text["windows"], str) and isinstance(columns["windows"], list)
    assert job_windows(claimed(1, **{**columns, **as_text})) == job_windows(job) is not None
    plain = make_job(tenant, next_run_at=T0)
    text = JobDue.objects.filter(job_id=plain.id).annotate(**_AS_TEXT).values_list(*_CLAIM_VALUES).get()
    assert job_windows(claimed(2, **dict(zip(CLAIM_FIELDS, text)))) is None


def test_the_shared_outcome_gives_every_job_the_rows_of_its_own_computation():
    # varied_jobs' mix, and what else an outcome reads: the organization (suspended, its
    # queue), the priority under overload, interval jobs anchored at their creation, who the
    # job is (organization, version), an unfinished run of a job that allows overlaps
    jobs, now = varied_jobs()
    more = []
    for index, job in enumerate(jobs):
        columns = {"organization_id": f"org-{index % 3}", "version": 1 + index % 4}
        if index % 7 == 0:
            columns.update(org_queue=None)  # suspended
        if index % 5 == 0:
            columns.update(org_queue="runs.pro", priority="low")
        if index % 9 == 0:
            columns.update(unfinished_run="another-run")
        more.append(job._replace(**columns))
    for index in range(12):  # interval jobs without start_at: anchored at created_at
        more.append(claimed(1000 + index, schedule_type="interval", cron_expression="", interval_seconds=300,
                            created_at=T0 - timedelta(days=30, seconds=37 * (index % 3))))
    overloaded = frozenset({"runs.pro"})
    rows, _due_at, updates = _batch_rows(more, now, overloaded)
    alone_rows, alone_updates = [], []
    for job in more:
        job_rows, next_at = _occurrences_for(job, now, overloaded, None)
        alone_rows += job_rows
        alone_updates.append((job.id, next_at, now if next_at is None else None))
    assert rows == alone_rows and updates == alone_updates
    assert len({_outcome_key(job) for job in more}) < len(more) * 0.7  # many jobs shared an outcome
    assert {row.status for row in rows} == {"queued", "skipped"} and any(row.defer_reason for row in rows)


def test_a_batchs_ids_are_uuid7_of_the_database_time_and_behave_as_uuids():
    ids = _uuid7s(500, T0)
    assert len(set(ids)) == 500
    for value in ids[:50]:
        same = uuid.UUID(str(value))
        assert (value.version, value.variant) == (7, uuid.RFC_4122)
        assert value == same and hash(value) == hash(same) and value.bytes == same.bytes
        assert value.int >> 80 == int(T0.timestamp() * 1000)  # the 48-bit millisecond time
    later = _uuid7s(1, T0 + timedelta(milliseconds=1))[0]
    assert max(ids) < later
