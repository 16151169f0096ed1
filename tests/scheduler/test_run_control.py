"""Execution windows and priority under overload in the claim transaction and the
publish of unpublished runs, called with explicit instants (no clock, no sleeps), on
PostgreSQL."""

import uuid
from datetime import timedelta

from apps.executions.scheduling import publishing, sweeper
from apps.executions.models import Execution
from apps.executions.scheduling.overload import overloaded_queues
from apps.executions.scheduling.tick import claim_due
from apps.jobs.models import Job
from tests.conftest import utc

# Friday 2027-06-11; the office window is Mon-Fri 08:00-18:00 UTC.
FRIDAY_17 = utc(2027, 6, 11, 17, 0)
MONDAY_08 = utc(2027, 6, 14, 8, 0)
OFFICE = [{"days": ["mon", "tue", "wed", "thu", "fri"], "start": "08:00", "end": "18:00"}]


def windowed_job(make_job, tenant, first_run, **fields):
    job = make_job(tenant, cron_expression="0 * * * *", timezone="UTC", windows=OFFICE, **fields)
    job.next_run_at = first_run
    job.save(update_fields=["next_run_at"])
    return job


def rows(job):
    return list(Execution.objects.filter(job=job).order_by("scheduled_for").values_list(
        "scheduled_for", "status", "skip_reason", "defer_reason", "deferred_from", "published_at"))


def test_occurrence_inside_the_window_runs_as_usual(tenant, make_job):
    job = windowed_job(make_job, tenant, FRIDAY_17)
    result = claim_due(FRIDAY_17, batch_size=10)
    assert result.created == 1 and len(result.to_publish) == 1
    assert rows(job) == [(FRIDAY_17, "queued", "", "", None, FRIDAY_17)]


def test_occurrence_outside_is_skipped_with_reason_outside_window(tenant, make_job):
    job = windowed_job(make_job, tenant, FRIDAY_17 + timedelta(hours=1))
    result = claim_due(FRIDAY_17 + timedelta(hours=1), batch_size=10)
    assert (result.skipped, result.to_publish) == (1, [])
    assert rows(job) == [(FRIDAY_17 + timedelta(hours=1), "skipped", "outside_window", "", None, None)]
    job.refresh_from_db()
    assert job.next_run_at == FRIDAY_17 + timedelta(hours=2)  # every occurrence is recorded


def test_deferred_occurrence_runs_at_the_next_opening_and_folds_the_rest(tenant, make_job):
    job = windowed_job(make_job, tenant, FRIDAY_17 + timedelta(hours=1), outside_window="defer")
    now = FRIDAY_17 + timedelta(hours=1)
    result = claim_due(now, batch_size=10)

    assert (result.created, result.deferred, result.to_publish) == (1, 1, [])
    assert rows(job) == [(MONDAY_08, "queued", "", "outside_window", FRIDAY_17 + timedelta(hours=1), None)]
    job.refresh_from_db()
    assert job.next_run_at == MONDAY_08 + timedelta(hours=1)  # the weekend's occurrences fold into it

    # Not published before the opening; published by the tick's due_retries at it.
    assert sweeper.due_retries(MONDAY_08 - timedelta(seconds=1)) == []
    (published, _queue), = sweeper.due_retries(MONDAY_08)
    assert Execution.objects.get(id=published).scheduled_for == MONDAY_08


def test_low_runs_are_held_while_their_queue_is_overloaded_and_go_out_after(tenant, make_job):
    plan_queue = tenant.organization.plan.queue
    low = make_job(tenant, priority="low")
    high = make_job(tenant, priority="high")
    for job in (low, high):
        job.next_run_at = FRIDAY_17
        job.save(update_fields=["next_run_at"])

    result = claim_due(FRIDAY_17, batch_size=10, overloaded=frozenset({plan_queue}))

    assert [queue for _, queue, _ in result.to_publish] == [f"{plan_queue}--high"]
    held = Execution.objects.get(job=low)
    assert (held.status, held.published_at, held.defer_reason, held.queue) == (
        "queued", None, "overload", f"{plan_queue}--low")
    # Passed over while the queue is still overloaded, never dropped; sent once it drains.
    assert sweeper.due_retries(FRIDAY_17, held_queues=[f"{plan_queue}--low"]) == []
    assert sweeper.due_retries(FRIDAY_17) == [(held.id, f"{plan_queue}--low")]


def test_normal_runs_are_not_held_and_keep_the_plain_queue(tenant, make_job):
    plan_queue = tenant.organization.plan.queue
    job = make_job(tenant)
    job.next_run_at = FRIDAY_17
    job.save(update_fields=["next_run_at"])
    result = claim_due(FRIDAY_17, batch_size=10, overloaded=frozenset({plan_queue}))
    assert [queue for _, queue, _ in result.to_publish] == [plan_queue]
    assert Job.objects.get(id=job.id).priority == "normal"


def test_overload_counts_a_plan_queue_with_its_sub_queues():
    depths = {"runs.pro": 400, "runs.pro--low": 700, "runs.pro--high": 0, "runs.free": 999, "runs.free.eu--low": 5}
    assert overloaded_queues(depths, threshold=1000) == {"runs.pro"}
    assert overloaded_queues(depths, threshold=0) == {"runs.pro", "runs.free", "runs.free.eu"}


def test_low_runs_go_out_in_small_messages(private_queue, broker):
    """A worker process takes a high message only between two messages: small low ones
    keep that wait short (apps.executions.scheduling.publishing.LOW_PRIORITY_CHUNK)."""
    low = f"{private_queue}--low"
    try:
        sent = publishing.publish({low: [uuid.uuid4() for _ in range(25)],
                                   private_queue: [uuid.uuid4() for _ in range(25)]})
        assert sent == 50
        assert (broker.client.llen(low), broker.client.llen(private_queue)) == (3, 1)
        assert len(broker.published_ids(low)) == 25
    finally:
        broker.drop(low)
