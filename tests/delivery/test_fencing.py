"""Fenced leases (docs/architecture.md, "Fenced leases"), on PostgreSQL: every claim of a
run issues a new token, every write a worker makes for it is conditional on that token,
leases are short, on the database's clock and renewed by the worker's heartbeat, and the
sweeper takes back what ran out, a bounded number of times."""

import dataclasses
import itertools
from datetime import timedelta

import pytest
from django.db import OperationalError, connection
from django.db.models import F
from django.utils import timezone

from apps.executions import cancelling, hooks, purging
from apps.executions.models import Attempt, Execution, UsageMonth
from apps.executions.scheduling import sweeper
from apps.executions.worker import cancel_watch, batch, recording
from apps.executions.worker.leases import LeaseRenewer

_seconds = itertools.count(1)


def queued(tenant, job, **fields):
    values = dict(job=job, organization=tenant.organization, queue="q",
                  scheduled_for=timezone.now() - timedelta(seconds=next(_seconds)))
    values.update(fields)
    return Execution.objects.create(**values)


def result(execution, status, number=1, **attempt):
    now = timezone.now()
    succeeded = status == "succeeded"
    values = dict(
        number=number, started_at=now, finished_at=now, duration_ms=5, request_method="GET",
        request_url="https://example.com/", request_headers={}, request_body="",
        response_status=200 if succeeded else 500, response_headers={}, response_body="",
        remote_addr="127.0.0.1", outcome="succeeded" if succeeded else "failed",
        error_kind="" if succeeded else "http_5xx", error_message="" if succeeded else "HTTP 500")
    values.update(attempt)
    return recording.FinishedAttempt(execution=execution, status=status, next_attempt_at=None, auto_disable_after=3,
                            attempt=recording.AttemptValues(**values))


def expire(execution):
    Execution.objects.filter(id=execution.id).update(lease_expires_at=timezone.now() - timedelta(hours=1))


def runs_metered(tenant):
    return sum(UsageMonth.objects.filter(organization=tenant.organization).values_list("runs", flat=True))


def test_every_claim_issues_a_new_token(tenant, make_job):
    execution = queued(tenant, make_job(tenant))
    (first,) = batch.claim([execution.id])
    expire(first)
    assert sweeper.recover_expired_leases() == [(execution.id, "q")]
    (second,) = batch.claim([execution.id])
    assert 0 < first.lease_token < second.lease_token
    assert Execution.objects.get(id=execution.id).lease_token == second.lease_token


def test_a_superseded_workers_result_is_kept_as_history_and_changes_nothing(tenant, make_job):
    job = make_job(tenant)
    execution = queued(tenant, job)
    (late,) = batch.claim([execution.id])  # the worker that then stops (paused, partitioned)
    expire(late)
    sweeper.recover_expired_leases()
    (holder,) = batch.claim([execution.id])  # the worker that took it over
    metered = runs_metered(tenant)

    assert recording.record_attempts([result(late, "failed")]) == set()
    row = Execution.objects.get(id=execution.id)
    assert (row.status, row.lease_token, row.error_kind) == ("running", holder.lease_token, "")
    job.refresh_from_db()
    assert (job.consecutive_failures, job.last_status) == (0, "")  # its job's health untouched
    assert runs_metered(tenant) == metered + 1  # its request went out: metered
    (superseded,) = Attempt.objects.filter(execution_id=execution.id)
    assert superseded.superseded and superseded.superseded_token == late.lease_token

    assert recording.record_attempts([result(holder, "succeeded")]) == {execution.id}
    row.refresh_from_db()
    assert row.status == "succeeded"
    got = sorted(Attempt.objects.filter(execution_id=execution.id).values_list("number", "superseded_token", "outcome"))
    assert got == [(1, 0, "succeeded"), (1, late.lease_token, "failed")]  # one outcome for attempt 1


def test_the_fenced_writes_of_a_claimed_run_refuse_a_stale_token(tenant, make_job):
    execution = queued(tenant, make_job(tenant))
    (stale,) = batch.claim([execution.id])
    Execution.objects.filter(id=execution.id).update(lease_token=stale.lease_token + 1)  # another claim since
    now = timezone.now()
    assert not recording.skip_running(stale, "overlap", now)
    assert not recording.defer_running(stale, now, now=now)
    assert not recording.fail_running(stale, error_kind="invalid_request", error_message="x", now=now,
                                      auto_disable_after=0)
    assert Execution.objects.get(id=execution.id).status == "running"


def test_a_cancel_acknowledged_by_its_holder_is_the_runs_own_attempt(tenant, make_job):
    execution = queued(tenant, make_job(tenant))
    (claimed,) = batch.claim([execution.id])
    cancelling.cancel(claimed, by=cancelling.cancelled_by())
    recording.record_attempts([result(claimed, "cancelled", outcome="cancelled", error_kind="cancelled")])
    (attempt,) = Attempt.objects.filter(execution_id=execution.id)
    assert not attempt.superseded and Execution.objects.get(id=execution.id).status == "cancelled"


def test_the_claim_refuses_a_run_not_due_by_the_databases_clock(tenant, make_job):
    """A publisher whose clock runs ahead (or a worker's): the run is handed back to be
    published when it comes due by the database's clock, not sent early."""
    job = make_job(tenant)
    future = timezone.now() + timedelta(minutes=10)
    early = queued(tenant, job, scheduled_for=future, published_at=timezone.now())
    retry = queued(tenant, job, attempt=1, next_attempt_at=future, published_at=timezone.now())
    # a worker's own clock 1 h ahead changes nothing: the database's decides
    assert batch.claim([early.id, retry.id], timezone.now() + timedelta(hours=1)) == []
    for execution in (early, retry):
        execution.refresh_from_db()
        assert (execution.status, execution.published_at, execution.next_attempt_at) == ("queued", None, future)
    assert sweeper.due_retries() == []  # not due yet by the database's clock either


def test_the_claim_and_its_lease_are_on_the_databases_clock(tenant, make_job, settings):
    execution = queued(tenant, make_job(tenant, timeout_seconds=120))
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement_timestamp()")
        before = cursor.fetchone()[0]
    batch.claim([execution.id], timezone.now() - timedelta(days=1))  # a process clock a day behind
    execution.refresh_from_db()
    assert execution.started_at >= before
    # a short lease, whatever the job's timeout: the heartbeat renews it
    assert (execution.lease_expires_at - execution.started_at).total_seconds() == settings.LEASE_SECONDS


def test_a_retry_waits_from_the_databases_clock(tenant, make_job):
    execution = queued(tenant, make_job(tenant))
    (claimed,) = batch.claim([execution.id])
    skewed = result(claimed, "queued")
    finished = timezone.now() - timedelta(hours=1)  # the worker's clock an hour behind
    skewed = dataclasses.replace(skewed, next_attempt_at=finished + timedelta(seconds=30),
                                 attempt=dataclasses.replace(skewed.attempt, finished_at=finished))
    recording.record_attempts([skewed])
    execution.refresh_from_db()
    assert 25 < (execution.next_attempt_at - timezone.now()).total_seconds() <= 31


def test_the_heartbeat_renews_only_the_leases_its_process_still_holds(tenant, make_job):
    job = make_job(tenant)
    kept, taken = queued(tenant, job), queued(tenant, job)
    claimed = batch.claim([kept.id, taken.id])
    heart = LeaseRenewer(lease_seconds=30, thread=False)
    heart.hold(claimed)
    for execution in claimed:
        expire(execution)
    Execution.objects.filter(id=taken.id).update(lease_token=999)  # taken back and claimed again
    assert heart.beat() == 1
    assert set(heart.held) == {kept.id}  # no longer renews a run it lost
    kept.refresh_from_db()
    assert kept.lease_expires_at > timezone.now() + timedelta(seconds=25)
    assert sweeper.recover_expired_leases() == [(taken.id, "q")]
    batch.heartbeat().release([e.id for e in claimed])


def test_the_heartbeats_verdict_holds_beat_after_beat(tenant, make_job):
    # Past five executions PostgreSQL may plan a prepared statement generically (its
    # parameters unknown): the verdict must not change with the plan.
    job = make_job(tenant)
    claimed = batch.claim([queued(tenant, job).id for _ in range(8)])
    heart = LeaseRenewer(lease_seconds=30, thread=False)
    heart.hold(claimed)
    for taken in claimed[:7]:
        Execution.objects.filter(id=taken.id).update(lease_token=F("lease_token") + 1)  # taken back
        assert heart.beat() == len(heart.held)
        assert taken.id not in heart.held
    assert set(heart.held) == {claimed[7].id}
    batch.heartbeat().release([e.id for e in claimed])


def test_a_run_taken_back_too_often_fails_instead_of_being_sent_forever(tenant, make_job, settings):
    settings.LEASE_MAX_RECLAIMS = 2
    finished = []
    hook = hooks.on_outcomes(finished.extend)
    try:
        execution = queued(tenant, make_job(tenant))
        for _ in range(2):
            batch.claim([execution.id])
            expire(execution)
            assert sweeper.recover_expired_leases() == [(execution.id, "q")]
        batch.claim([execution.id])
        expire(execution)
        assert sweeper.recover_expired_leases() == []
    finally:
        hooks._hooks.remove(hook)
    execution.refresh_from_db()
    assert (execution.status, execution.error_kind, execution.lease_reclaims) == ("failed", "lease_lost", 3)
    assert [(o.status, o.error_kind) for o in finished] == [("failed", "lease_lost")]


def test_deleting_a_job_with_a_run_in_flight_does_not_fail_the_other_runs_recording(tenant, make_tenant, make_job):
    other = make_tenant()
    deleted_job = make_job(tenant)
    kept = queued(other, make_job(other))
    claimed = batch.claim([queued(tenant, deleted_job).id, kept.id])
    purging.delete_job(deleted_job)
    assert recording.record_attempts([result(e, "succeeded") for e in claimed]) == {kept.id}
    assert Execution.objects.get(id=kept.id).status == "succeeded"


def test_one_runs_failure_to_record_does_not_roll_back_anothers(tenant, make_job):
    job = make_job(tenant)
    claimed = batch.claim([queued(tenant, job).id, queued(tenant, job).id])
    poisoned = claimed[0].id

    def failing_hook(outcomes):  # the database refusing this run's writes (a hook's own bug is only skipped)
        if any(o.execution_id == poisoned for o in outcomes):
            raise OperationalError("the database refused this run's writes")

    hooks.on_outcomes(failing_hook)
    try:
        assert recording.record_attempts([result(e, "succeeded") for e in claimed]) == {claimed[1].id}
    finally:
        hooks._hooks.remove(failing_hook)
    assert Execution.objects.get(id=poisoned).status == "running"  # taken back when its lease ends
    assert Execution.objects.get(id=claimed[1].id).status == "succeeded"


def test_usage_counts_an_attempt_once_its_request_started():
    def attempt(outcome, kind):
        return dataclasses.replace(result(None, "failed").attempt, outcome=outcome, error_kind=kind)

    assert recording.metered(attempt("succeeded", ""))
    assert recording.metered(attempt("failed", "http_5xx"))
    assert recording.metered(attempt("failed", "timeout"))  # sent, no answer in time
    assert recording.metered(attempt("failed", "script_exit"))  # the script ran
    for kind in ("forbidden_target", "dns_error", "connect_error", "tls_error", "sandbox_unavailable",
                 "script_too_large"):
        assert not recording.metered(attempt("failed", kind)), kind
    assert not recording.metered(attempt("cancelled", "cancelled"))


def test_a_failed_read_of_the_cancel_flags_loses_no_cancel(tenant, make_job, monkeypatch):
    execution = queued(tenant, make_job(tenant), status="running")
    watch = cancel_watch.CancelWatch(interval=60)
    watch._thread = object()  # checked by hand here, no thread
    cancellation = watch.watch(execution.id)
    watch.check_once()  # the run has been looked at once: no flag
    cancelling.raise_flags([execution.id])
    read = cancel_watch.raised

    def redis_away(ids):
        raise ConnectionError("Redis away")

    monkeypatch.setattr(cancel_watch, "raised", redis_away)
    with pytest.raises(ConnectionError):
        watch.check_once()
    monkeypatch.setattr(cancel_watch, "raised", read)
    watch.check_once()
    assert cancellation.cancelled
