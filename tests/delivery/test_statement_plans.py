"""The worker's and the scheduler's statements find the rows they are given by their keys
(apps.sql.planning).

PostgreSQL's statistics of a history whose runs are nearly all finished made the unfinished-
runs index look cheap, so a claim, a finish or a lease renewal of a few runs read every
queued or running run (a whole burst) to find them. Here the statistics say "all finished"
while thousands of runs wait, as in a burst: each statement's plan must reach the runs
through the primary key only."""

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone
from psycopg.types.json import Jsonb

from apps.executions import queries
from apps.executions.models import Execution
from apps.executions.scheduling import tick
from apps.jobs.models import Job
from apps.sql.bulk import binding_cursor

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's planner")

WAITING = 3000
STATUS_INDEXES = ("exec_unfinished", "exec_job_unfinished", "exec_search_time")


@pytest.fixture
def burst(tenant, make_job):
    """WAITING runs, every one of them finished when the statistics were taken; returns a
    function that puts them all in ``status`` and gives five of their ids."""
    job = make_job(tenant)
    start = timezone.now() - timedelta(days=1)
    Execution.objects.bulk_create(
        Execution(job=job, organization=tenant.organization, queue="q", status=Execution.Status.SUCCEEDED,
                  scheduled_for=start + timedelta(seconds=index)) for index in range(WAITING))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE executions_execution")

    def put_in(status):
        Execution.objects.update(status=status, published_at=timezone.now())
        return list(Execution.objects.order_by("?").values_list("id", flat=True)[:5])

    return put_in


def plan_of(sql, params):
    with binding_cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params, binary=True)
        return "\n".join(row[0] for row in cursor.fetchall())


def assert_by_key(plan):
    assert "executions_execution_pkey" in plan, plan
    assert not [name for name in STATUS_INDEXES if name in plan], plan


def test_a_claim_reads_its_runs_by_key_while_a_burst_waits(burst):
    ids = burst(Execution.Status.QUEUED)
    assert_by_key(plan_of(queries.CLAIM, [ids, ids, 30.0]))


def test_a_finish_reads_its_runs_by_key_while_a_burst_runs(burst):
    ids = burst(Execution.Status.RUNNING)
    rows = [(execution_id, 1, "succeeded", 1, 5, 200, Jsonb({}), "", "", "", "", None, timezone.now()) for execution_id in ids]
    assert_by_key(plan_of(queries.finish_sql(with_events=False), queries.FINISHED.params(rows)))


def test_a_lease_renewal_reads_its_runs_by_key_while_a_burst_runs(burst):
    ids = burst(Execution.Status.RUNNING)
    assert_by_key(plan_of(queries.RENEW_LEASES, [*queries.HELD_LEASES.params([(i, 1) for i in ids]), 30.0]))


def test_a_scheduler_tick_advances_its_claimed_jobs_by_key(tenant, make_job):
    # A claim of 2,000 jobs, the backlog batch: PostgreSQL's default costs chose to hash the
    # whole jobs table (a sequential scan) rather than look the 2,000 keys up.
    template = make_job(tenant)
    fields = {f.attname: getattr(template, f.attname) for f in Job._meta.concrete_fields if not f.primary_key}
    Job.objects.bulk_create(Job(**{**fields, "name": f"job {index}"}) for index in range(3000))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobs_job")
    claimed = list(Job.objects.order_by("?").values_list("id", flat=True)[:2000])
    with transaction.atomic():
        tick._begin_claim()
        plan = plan_of(queries.ADVANCE_JOBS, queries.ADVANCED.params((job_id, timezone.now(), None) for job_id in claimed))
    assert "jobs_job_pkey" in plan and "Seq Scan on jobs_job" not in plan, plan
