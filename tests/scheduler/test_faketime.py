"""One clock with real processes: a scheduler whose clock is 30 s ahead, then jumps an hour
ahead and back (libfaketime, Debian's ``faketime``: ``make faketime``), against the test
database, a real worker and a local endpoint. The database's clock decides: no run is
created or delivered before it is due, no job's next run moves past its next occurrence,
every occurrence gets exactly one run, and the skew is reported.

Measured before the fix (issue 34): a scheduler 30 s ahead fired every delivery ~23 s
early; a jump of +1 h wrote tens of thousands of future occurrences as skipped and moved
every job's next run an hour ahead."""

import glob
import time
from datetime import timedelta

import pytest
from django.db.models.functions import Now

from apps.executions.models import Execution
from apps.jobs.models import Job
from apps.observability.models import Heartbeat
from apps.sql.clock import database_now
from tests.support.broker import use_private_queue
from tests.support.processes import start_scheduler, start_worker, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

INTERVAL = 4  # seconds between two runs of each job
JOBS = 10


def libfaketime():
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))
    assert found, "libfaketime is missing: `make faketime` (Debian's faketime package) installs it"
    return found[0]


class ProcessClock:
    """The offset of the scheduler's wall clock, read by libfaketime from a file (its
    monotonic clock is left alone, as an NTP step or a VM resume leaves it)."""

    def __init__(self, path, offset):
        self.path = path
        self.set(offset)
        self.env = dict(LD_PRELOAD=libfaketime(), FAKETIME_TIMESTAMP_FILE=str(path), FAKETIME_CACHE_DURATION=1,
                        FAKETIME_DONT_FAKE_MONOTONIC=1)

    def set(self, offset):
        self.path.write_text(f"{offset:+d}\n")


def sample(jobs, samples):
    """One look from the database's clock: runs created before they are due, and jobs whose
    next run is past their next occurrence (more than one interval ahead)."""
    early = Execution.objects.filter(job__in=jobs, scheduled_for__gt=Now()).count()
    moved = Job.objects.filter(id__in=[job.id for job in jobs],
                               due__next_run_at__gt=Now() + timedelta(seconds=INTERVAL + 1)).count()
    samples.append((early, moved))


def watch(seconds, jobs, samples):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sample(jobs, samples)
        time.sleep(0.2)


def test_a_skewed_then_jumping_scheduler_clock_fires_nothing_early_and_moves_no_schedule(tmp_path, make_tenant,
                                                                                       target):
    tenant = make_tenant(plan="enterprise")
    queue = use_private_queue(tenant)
    clock = ProcessClock(tmp_path / "faketime", 30)
    env = dict(OUTBOUND_ALLOWED_NETWORKS="127.0.0.0/8", SWEEPER_INTERVAL=0.5, CLOCK_SKEW_WARN_SECONDS=2)
    worker = start_worker(tmp_path, [queue], concurrency=2, **env)
    scheduler = start_scheduler(tmp_path, **env, **clock.env)
    samples = []
    try:
        worker.wait_ready()
        wait_for(lambda: Heartbeat.objects.filter(kind="scheduler").exists(), timeout=60,
                 message="the scheduler to beat")
        first = database_now().replace(microsecond=0) + timedelta(seconds=3)
        jobs = Job.objects.bulk_create([
            Job(project=tenant.project, organization=tenant.organization, name=f"ft{i}", schedule_type="interval",
                interval_seconds=INTERVAL, start_at=first, cron_expression="", url=target.url(f"/ft/{i}"),
                next_run_at=first, misfire_policy="run_all")
            for i in range(JOBS)
        ])
        watch(12, jobs, samples)  # 30 s ahead
        clock.set(3600)  # jumps an hour ahead
        watch(10, jobs, samples)
        clock.set(30)  # and back
        watch(6, jobs, samples)
        stopped_at = database_now()
    finally:
        codes = scheduler.stop(), worker.stop()
    assert codes == (0, 0), scheduler.output()[-3000:]

    early = [s for s in samples if s[0]]
    moved = [s for s in samples if s[1]]
    assert not early, f"runs created before they were due in {len(early)} of {len(samples)} looks"
    assert not moved, f"next runs moved ahead in {len(moved)} of {len(samples)} looks"
    runs = list(Execution.objects.filter(job__in=jobs).values_list("id", "job_id", "scheduled_for", "status"))
    assert not [r for r in runs if r[3] == "skipped"], "an occurrence recorded as skipped (never late by the database)"
    for job in jobs:
        times = sorted(at for _, job_id, at, _ in runs if job_id == job.id)
        expected = [first + timedelta(seconds=INTERVAL * k) for k in range(len(times))]
        assert times == expected, f"job {job.name}: gaps or doubles in {times}"
        assert times[-1] >= stopped_at - timedelta(seconds=INTERVAL + 5), f"job {job.name} stopped being scheduled"
        job.refresh_from_db()
        assert job.next_run_at <= stopped_at + timedelta(seconds=INTERVAL + 1)
    due_of = {str(run_id): at for run_id, _, at, _ in runs}
    deliveries = [(r.headers.get("x-cronsvc-execution-id"), r.at) for r in target.requests_to("/ft/")]
    assert deliveries, "nothing was delivered"
    fired_early = [(i, at) for i, at in deliveries if at < due_of[i].timestamp()]
    assert not fired_early, f"{len(fired_early)} deliveries before their due time"
    assert "clock skew" in scheduler.output()
