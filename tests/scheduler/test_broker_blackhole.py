"""A broker that accepts connections and never answers (blackholed, stalled): a real
scheduler keeps recording the due runs, tick after tick, and stops cleanly; what it could
not publish stays queued in the database for the sweeper (docs/operations.md)."""

from datetime import timedelta

import pytest

from apps.executions.models import Execution
from apps.jobs.models import Job
from apps.sql.clock import database_now
from tests.support.blackhole import Blackhole
from tests.support.broker import use_private_queue
from tests.support.processes import start_scheduler, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def due_jobs(tenant, count, at, prefix):
    return Job.objects.bulk_create([
        Job(project=tenant.project, organization=tenant.organization, name=f"{prefix}{i}", schedule_type="interval",
            interval_seconds=3600, start_at=at, cron_expression="", url="https://example.com/", next_run_at=at)
        for i in range(count)
    ])


def test_a_scheduler_keeps_recording_while_its_broker_never_answers(tmp_path, make_tenant):
    tenant = make_tenant(plan="enterprise")
    use_private_queue(tenant)
    blackhole = Blackhole()
    scheduler = start_scheduler(tmp_path, CELERY_BROKER_URL=f"redis://127.0.0.1:{blackhole.port}/0",
                                PUBLISH_TIMEOUT=1, SWEEPER_INTERVAL=0.5, SWEEPER_REPUBLISH_AFTER=1)
    try:
        for batch in range(3):
            due_jobs(tenant, 20, database_now() - timedelta(seconds=1), f"b{batch}-")
            wait_for(lambda: Execution.objects.count() == 20 * (batch + 1), timeout=60,
                     message=f"batch {batch} recorded while the broker hangs")
        assert blackhole.connections, "the scheduler never tried the broker"
    finally:
        code = scheduler.stop()
        blackhole.close()
    assert code == 0, scheduler.output()[-3000:]
    assert set(Execution.objects.values_list("status", flat=True)) == {"queued"}  # left for the sweeper
    assert "left for the sweeper" in scheduler.output()
