"""A worker's claim, recording and heartbeat and a scheduler's advance find the rows they are given by their keys
(apps.sql.planning), whatever PostgreSQL's statistics say: that every run is finished while
thousands wait (as in a burst), that the table is nearly empty, or (with its default costs)
that hashing a whole table beats 2,000 key lookups."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from psycopg.types.json import Jsonb

from apps.executions import queries
from apps.executions.models import Execution
from apps.executions.scheduling import tick
from apps.jobs.models import Job
from apps.sql.bulk import binding_cursor
from apps.sql.planning import BY_KEY, reach_rows_by_key

WAITING = 3000
STATUS_INDEXES = ("exec_unfinished", "exec_job_unfinished", "exec_search_time")


@pytest.fixture
def burst(tenant, make_job):
    """WAITING runs, every one of them finished when the statistics were taken, then all
    queued again, as in a burst; returns five of their ids."""
    job = make_job(tenant)
    start = timezone.now() - timedelta(days=1)
    Execution.objects.bulk_create(
        Execution(job=job, organization=tenant.organization, queue="q", status=Execution.Status.SUCCEEDED,
                  scheduled_for=start + timedelta(seconds=index)) for index in range(WAITING))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE executions_execution")
    Execution.objects.update(status=Execution.Status.QUEUED, published_at=timezone.now())
    return list(Execution.objects.order_by("?").values_list("id", flat=True)[:5])


def plan_of(sql, params):
    """The plan of ``sql`` in a transaction set as the code sets its own (reach_rows_by_key)."""
    reach_rows_by_key()
    with binding_cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params, binary=True)
        return "\n".join(row[0] for row in cursor.fetchall())


def assert_by_key(plan):
    assert "executions_execution_pkey" in plan, plan
    assert not [name for name in STATUS_INDEXES if name in plan], plan


def test_a_claim_reads_its_runs_by_key_while_a_burst_waits(burst):
    assert_by_key(plan_of(queries.CLAIM, [burst, burst, 30.0]))


def finish_params(ids):
    return queries.FINISHED.params(
        (execution_id, 1, "succeeded", 1, 5, 200, Jsonb({}), "", "127.0.0.1", "", "", None, timezone.now())
        for execution_id in sorted(ids))


def renew_params(ids):
    return [queries.HELD_IDS.params((execution_id,) for execution_id in ids)[0],
            queries.held_tokens((execution_id, 1) for execution_id in ids), 30.0]


def test_a_recording_and_a_heartbeat_reach_their_runs_by_key_while_a_burst_runs(burst):
    Execution.objects.filter(id__in=burst).update(status=Execution.Status.RUNNING, lease_token=1)
    params = finish_params(burst)
    assert_by_key(plan_of(queries.finish_sql(with_events=False), [*params, params[0]]))
    assert_by_key(plan_of(queries.RENEW_LEASES, renew_params(burst)))


def test_a_scheduler_tick_advances_its_claimed_jobs_by_key(tenant, make_job):
    # A claim of 2,000 jobs, the backlog batch: PostgreSQL's default costs chose to hash the
    # whole jobs table (a sequential scan) rather than look the 2,000 keys up. Both writes:
    # the due times, and the jobs that expired (here every one, to see that plan too).
    now = timezone.now()
    template = make_job(tenant)
    fields = {f.attname: getattr(template, f.attname) for f in Job._meta.concrete_fields if not f.primary_key}
    Job.objects.bulk_create(Job(**{**fields, "name": f"job {index}", "next_run_at": now}) for index in range(3000))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobs_job")
        cursor.execute("ANALYZE jobs_jobdue")
    claimed = list(Job.objects.order_by("?").values_list("id", flat=True)[:2000])
    plan = plan_of(f"WITH {queries.ADVANCE_JOBS} SELECT 1",
                   queries.advance_params((job_id, now, now) for job_id in claimed))
    assert "jobs_jobdue_pkey" in plan and "Seq Scan on jobs_jobdue" not in plan, plan
    assert "jobs_job_pkey" in plan and "Seq Scan on jobs_job " not in plan, plan


def test_a_claim_reads_its_runs_by_key_in_a_table_grown_since_its_statistics(tenant, make_job):
    # The statistics of a nearly empty table, then thousands of runs (as the delivery bench
    # fills its table before each run): the claim stays on the key.
    job = make_job(tenant)
    start = timezone.now() - timedelta(days=1)

    def add(count, offset):
        Execution.objects.bulk_create(
            Execution(job=job, organization=tenant.organization, queue="q",
                      scheduled_for=start + timedelta(seconds=offset + index)) for index in range(count))

    add(3, 0)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE executions_execution")
    add(WAITING, 10)
    ids = list(Execution.objects.order_by("?").values_list("id", flat=True)[:40])
    assert_by_key(plan_of(queries.CLAIM, [ids, ids, 30.0]))
    # the recording's finish and the heartbeat too (the heartbeat, whose list may hold
    # thousands, with no join at all: a nested loop over both lists grows as their product)
    Execution.objects.filter(id__in=ids).update(status=Execution.Status.RUNNING, lease_token=1)
    params = finish_params(ids)
    assert_by_key(plan_of(queries.finish_sql(with_events=False), [*params, params[0]]))
    plan = plan_of(queries.RENEW_LEASES, renew_params(ids))
    assert_by_key(plan)
    assert "Join" not in plan and "Nested Loop" not in plan, plan


def planner_settings():
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(f"current_setting('{name}')" for name in BY_KEY))
        return dict(zip(BY_KEY, cursor.fetchone()))


@pytest.mark.parametrize("operation, target, name", [
    ("claim", queries, "claim_queued"),  # a worker's claim
    ("tick", queries.ScheduledRunsInsert, "run"),  # a scheduler's tick
    ("recording", queries, "_returned_ids"),  # a worker's recording (its finish)
    ("heartbeat", queries, "_returned_ids"),  # a worker's heartbeat
])
def test_each_keyed_statement_runs_in_a_transaction_kept_on_keys(monkeypatch, tenant, make_job, operation, target,
                                                                  name):
    """The call sites: each statement above runs after reach_rows_by_key in its transaction."""
    from apps.executions.worker import batch, leases, recording

    seen = []
    original = getattr(target, name)

    def watched(*args, **kwargs):
        seen.append(planner_settings())
        return original(*args, **kwargs)

    job = make_job(tenant, next_run_at=timezone.now() - timedelta(seconds=1))
    if operation == "tick":
        monkeypatch.setattr(target, name, watched)
        assert tick.claim_due(timezone.now(), batch_size=10).created == 1
    else:
        execution = Execution.objects.create(job=job, organization=tenant.organization, queue="q",
                                             scheduled_for=timezone.now() - timedelta(seconds=1))
        if operation == "claim":
            monkeypatch.setattr(target, name, watched)
        (claimed,) = batch.claim([execution.id])
        with connection.cursor() as cursor:  # the claim's settings end with its transaction; the test's goes on
            cursor.execute("; ".join(f"RESET {setting}" for setting in BY_KEY))
        if operation != "claim":
            monkeypatch.setattr(target, name, watched)
        if operation == "heartbeat":
            heart = leases.LeaseRenewer(lease_seconds=30, thread=False)
            heart.hold([claimed])
            assert heart.beat() == 1
        if operation == "recording":
            assert recording.record_attempts([finished(claimed)]) == {claimed.id}
        leases.heartbeat().release([claimed.id])
    assert seen and all(settings == BY_KEY for settings in seen), seen


def finished(execution):
    from apps.executions.worker import recording

    now = timezone.now()
    attempt = recording.AttemptValues(
        number=1, started_at=now, finished_at=now, duration_ms=5, request_method="GET", request_url="http://x/",
        request_headers={}, request_body="", response_status=200, response_headers={}, response_body="",
        remote_addr="127.0.0.1", outcome="success", error_kind="", error_message="")
    return recording.FinishedAttempt(execution=execution, attempt=attempt, status="succeeded", next_attempt_at=None,
                                     auto_disable_after=0)
