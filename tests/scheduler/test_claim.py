"""The claim transaction, called with an explicit `now` (no clock, no sleeps)."""

from datetime import timedelta

import pytest

from apps.accounts.services import suspend_organization
from apps.executions import queries
from apps.executions.models import Execution
from apps.eventstream.models import OutboxEntry
from apps.executions.queries import ScheduledRunsInsert
from apps.executions.scheduling.tick import claim_due
from apps.jobs.models import Job
from apps.jobs.scheduling import due_time, next_occurrence
from apps.jobs.services import pause_job, resume_job
from apps.sql.bulk import binding_cursor
from tests.conftest import utc

T0 = utc(2027, 3, 1, 12, 0)


def schedule_job(make_job, tenant, first_run, **fields):
    job = make_job(tenant, **fields)
    job.next_run_at = first_run
    job.save(update_fields=["next_run_at"])
    return job


def executions(job):
    return list(Execution.objects.filter(job=job).order_by("scheduled_for").values_list("scheduled_for", "status", "skip_reason"))


def test_due_job_gets_one_execution_and_advances(tenant, make_job):
    job = schedule_job(make_job, tenant, T0, cron_expression="*/5 * * * *")
    later = schedule_job(make_job, tenant, T0 + timedelta(minutes=1))

    result = claim_due(T0 + timedelta(seconds=1), batch_size=100)

    assert (result.claimed, result.created) == (1, 1)
    assert executions(job) == [(T0, "queued", "")]
    job.refresh_from_db()
    assert job.next_run_at == T0 + timedelta(minutes=5)
    assert not Execution.objects.filter(job=later).exists()
    (execution_id, queue, due_at), = result.to_publish
    assert queue == tenant.organization.plan.queue and due_at == T0


def test_claiming_again_at_the_same_instant_creates_nothing(tenant, make_job):
    schedule_job(make_job, tenant, T0)
    claim_due(T0, batch_size=100)
    again = claim_due(T0, batch_size=100)
    assert again.claimed == 0 and Execution.objects.count() == 1


@pytest.fixture
def scheduler_writes(monkeypatch):
    """Whether each of the scheduler's writes (queries.ScheduledRunsInsert) skipped conflicts."""
    sent, run = [], ScheduledRunsInsert.run

    def recording_run(self, *args, careful, **kwargs):
        sent.append(careful)
        return run(self, *args, careful=careful, **kwargs)

    monkeypatch.setattr(ScheduledRunsInsert, "run", recording_run)
    return sent


def test_a_tick_inserts_without_conflict_handling_when_nothing_is_recorded_yet(tenant, make_job, scheduler_writes):
    # ON CONFLICT's speculative insertion costs on every row (bench/README.md)
    schedule_job(make_job, tenant, T0)
    assert claim_due(T0, batch_size=100).created == 1
    assert scheduler_writes == [False]


@pytest.mark.parametrize("event_stream", [False, True])
def test_an_occurrence_already_recorded_is_skipped_and_the_rest_of_its_batch_dispatched(tenant, make_job,
                                                                                         scheduler_writes,
                                                                                         settings, event_stream):
    settings.EVENT_STREAM = event_stream
    recorded = schedule_job(make_job, tenant, T0, cron_expression="*/5 * * * *")
    fresh = schedule_job(make_job, tenant, T0)
    Execution.objects.create(job=recorded, organization=recorded.organization, scheduled_for=T0,
                             trigger=Execution.Trigger.SCHEDULE, status=Execution.Status.SUCCEEDED, queue="q")

    result = claim_due(T0, batch_size=100)

    # the plain insert was refused (the whole transaction undone); the claim again skipped the row
    assert scheduler_writes == [False, True]
    assert (result.claimed, result.created) == (2, 1)
    assert executions(recorded) == [(T0, "succeeded", "")]
    assert executions(fresh) == [(T0, "queued", "")]
    assert [item[0] for item in result.to_publish] == [Execution.objects.get(job=fresh).id]
    recorded.refresh_from_db()
    assert recorded.next_run_at == T0 + timedelta(minutes=5)
    # the undone write's events went with it: one event, the fresh run's
    events = list(OutboxEntry.objects.values_list("subject_id", "status"))
    assert events == ([(fresh.id, "queued")] if event_stream else [])


def test_batch_size_bounds_a_tick_and_oldest_due_go_first(tenant, make_job):
    jobs = [schedule_job(make_job, tenant, T0 - timedelta(seconds=i)) for i in range(5)]
    result = claim_due(T0, batch_size=2)
    assert result.claimed == 2
    claimed = set(Execution.objects.values_list("job_id", flat=True))
    assert claimed == {jobs[4].id, jobs[3].id}


@pytest.mark.parametrize(
    "policy, expected",
    [
        # down from 12:00 to 12:21 with a 5-minute job and a 10-minute grace window
        ("run_once", [("12:00", "skipped", "misfire_expired"), ("12:05", "skipped", "misfire_expired"),
                      ("12:10", "skipped", "misfire_expired"), ("12:15", "skipped", "misfire_coalesced"),
                      ("12:20", "queued", "")]),
        ("run_all", [("12:00", "skipped", "misfire_expired"), ("12:05", "skipped", "misfire_expired"),
                     ("12:10", "skipped", "misfire_expired"), ("12:15", "queued", ""), ("12:20", "queued", "")]),
        ("skip", [("12:00", "skipped", "misfire_expired"), ("12:05", "skipped", "misfire_expired"),
                  ("12:10", "skipped", "misfire_expired"), ("12:15", "skipped", "misfire_skipped"),
                  ("12:20", "queued", "")]),
    ],
)
def test_misfire_policies(tenant, make_job, policy, expected):
    job = schedule_job(make_job, tenant, T0, cron_expression="*/5 * * * *", misfire_policy=policy,
                       misfire_grace_seconds=600)
    claim_due(T0 + timedelta(minutes=21), batch_size=100)
    got = [(at.strftime("%H:%M"), status, reason) for at, status, reason in executions(job)]
    assert got == expected
    job.refresh_from_db()
    assert job.next_run_at == T0 + timedelta(minutes=25)


def test_skip_policy_skips_even_the_latest_when_it_is_late(tenant, make_job):
    job = schedule_job(make_job, tenant, T0, cron_expression="0 * * * *", misfire_policy="skip")
    claim_due(T0 + timedelta(minutes=10), batch_size=100)
    assert executions(job) == [(T0, "skipped", "misfire_skipped")]


def test_run_once_runs_a_late_occurrence_within_grace(tenant, make_job):
    job = schedule_job(make_job, tenant, T0, cron_expression="0 * * * *", misfire_grace_seconds=3600)
    claim_due(T0 + timedelta(minutes=10), batch_size=100)
    assert executions(job) == [(T0, "queued", "")]


def test_overlap_forbid_skips_while_a_run_is_unfinished(tenant, make_job):
    job = schedule_job(make_job, tenant, T0, overlap_policy="forbid")
    Execution.objects.create(job=job, organization=tenant.organization, scheduled_for=T0 - timedelta(minutes=5),
                             status="running")
    allowed = schedule_job(make_job, tenant, T0)
    Execution.objects.create(job=allowed, organization=tenant.organization, scheduled_for=T0 - timedelta(minutes=5),
                             status="running")
    claim_due(T0, batch_size=100)
    assert executions(job)[-1] == (T0, "skipped", "overlap")
    assert executions(allowed)[-1] == (T0, "queued", "")


def test_overlap_forbid_runs_once_the_previous_run_finished(tenant, make_job):
    job = schedule_job(make_job, tenant, T0, overlap_policy="forbid", misfire_policy="run_all")
    Execution.objects.create(job=job, organization=tenant.organization, scheduled_for=T0 - timedelta(minutes=5),
                             status="succeeded")
    claim_due(T0 + timedelta(minutes=5), batch_size=100)
    # run_all would queue both missed runs; forbid lets only the first one start.
    assert executions(job)[1:] == [(T0, "queued", ""), (T0 + timedelta(minutes=5), "skipped", "overlap")]


def test_paused_job_is_not_claimed_and_resumes_from_now(tenant, make_job):
    job = schedule_job(make_job, tenant, T0, cron_expression="*/5 * * * *", misfire_policy="run_all")
    pause_job(job)
    assert claim_due(T0 + timedelta(hours=2), batch_size=100).claimed == 0
    resume_job(job, now=T0 + timedelta(hours=2, minutes=1))
    job.refresh_from_db()
    assert job.next_run_at == T0 + timedelta(hours=2, minutes=5)
    claim_due(T0 + timedelta(hours=2, minutes=5), batch_size=100)
    assert executions(job) == [(T0 + timedelta(hours=2, minutes=5), "queued", "")]


def test_once_job_expires_after_its_run(tenant, make_job):
    job = schedule_job(make_job, tenant, T0, schedule_type="once", run_at=T0, cron_expression="")
    result = claim_due(T0, batch_size=100)
    assert result.expired == 1
    job.refresh_from_db()
    assert job.next_run_at is None and job.expired_at == T0
    assert executions(job) == [(T0, "queued", "")]


def test_job_past_its_end_is_expired_not_deleted(tenant, make_job):
    job = schedule_job(make_job, tenant, T0, cron_expression="0 * * * *", end_at=T0 + timedelta(minutes=30))
    claim_due(T0, batch_size=100)
    job.refresh_from_db()
    assert job.next_run_at is None and job.expired_at is not None
    assert Job.objects.filter(id=job.id).exists()


def test_suspended_organization_fires_nothing_and_moves_on(tenant, make_job):
    job = schedule_job(make_job, tenant, T0, cron_expression="*/5 * * * *")
    suspend_organization(tenant.organization, reason="unpaid")
    result = claim_due(T0 + timedelta(seconds=30), batch_size=100)
    assert result.claimed == 1 and result.created == 0
    assert not Execution.objects.filter(job=job).exists()
    job.refresh_from_db()
    assert job.next_run_at == T0 + timedelta(minutes=5)


def test_jitter_delays_the_due_time_but_not_the_occurrence(tenant, make_job):
    job = make_job(tenant, cron_expression="0 * * * *", jitter_seconds=600)
    first = next_occurrence(job, T0)
    job.next_run_at = due_time(first, job)
    job.save(update_fields=["next_run_at"])
    offset = job.next_run_at - first
    assert timedelta(0) <= offset < timedelta(seconds=600)
    assert claim_due(first + offset - timedelta(seconds=1), batch_size=10).claimed == (offset == timedelta(0))
    claim_due(first + offset, batch_size=10)
    assert executions(job) == [(first, "queued", "")]
    job.refresh_from_db()
    assert job.next_run_at == first + timedelta(hours=1) + offset


def plan_nodes(node, inside_lock=False):
    """(node type, parent relationship, under a LockRows node) of each node of a JSON plan."""
    yield node["Node Type"], node.get("Parent Relationship"), inside_lock
    for child in node.get("Plans", []):
        yield from plan_nodes(child, inside_lock or node["Node Type"] == "LockRows")


def test_the_claim_runs_its_per_job_subqueries_for_the_jobs_it_locked_only(tenant, make_job, monkeypatch):
    # Below the row locks, the organization's state and the unfinished-run check would run
    # for every row read, also those another scheduler holds and SKIP LOCKED passes over.
    schedule_job(make_job, tenant, T0, overlap_policy="forbid")
    sent = []
    fetch = queries.fetch_binary
    monkeypatch.setattr(queries, "fetch_binary", lambda sql, params: sent.append((sql, params)) or fetch(sql, params))
    assert claim_due(T0, batch_size=100).claimed == 1
    (sql, params), = sent
    with binding_cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params, binary=True)
        nodes = list(plan_nodes(cursor.fetchone()[0][0]["Plan"]))
    assert any(kind == "LockRows" for kind, _, _ in nodes), nodes
    subplans = [(kind, inside) for kind, relationship, inside in nodes if relationship == "SubPlan"]
    assert len(subplans) == 2 and not any(inside for _, inside in subplans), nodes
