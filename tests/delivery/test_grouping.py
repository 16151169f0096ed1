"""Results recorded in groups and admission checks run for a whole batch (batch.py,
recording.record_attempts, outbound.Guards.*_many): the same outcome as one at a time."""

import dataclasses
import itertools
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.executions.worker import batch, recording
from apps.executions.worker.batch import run_batch
from apps.executions.models import Attempt, Execution
from apps.executions.worker.outbound import guards, redis_client

pytestmark = pytest.mark.usefixtures("allow_loopback")
_seconds = itertools.count(1)


def queued(tenant, job, **fields):
    values = dict(job=job, organization=tenant.organization, queue="q",
                  scheduled_for=timezone.now() - timedelta(seconds=next(_seconds)))
    values.update(fields)
    return Execution.objects.create(**values)


def running(tenant, job):
    return queued(tenant, job, status="running", started_at=timezone.now())


def result(execution, status, number=1):
    now = timezone.now()
    succeeded = status == "succeeded"
    return recording.FinishedAttempt(
        execution=execution, status=status, next_attempt_at=None, auto_disable_after=3,
        attempt=recording.AttemptValues(
            number=number, started_at=now, finished_at=now, duration_ms=5, request_method="GET",
            request_url="https://example.com/", request_headers={"User-Agent": "cronsvc"}, request_body="",
            response_status=200 if succeeded else 500, response_headers={"x": "1"}, response_body="body",
            remote_addr="127.0.0.1", outcome="succeeded" if succeeded else "failed",
            error_kind="" if succeeded else "http_5xx", error_message="" if succeeded else "HTTP 500"),
    )


def test_a_batch_with_every_kind_of_outcome_is_recorded(tenant, make_job, target):
    jobs = {
        "ok": make_job(tenant, url=target.url("/ok")),
        "not_found": make_job(tenant, url=target.url("/status/404")),
        "unavailable": make_job(tenant, url=target.url("/status/503"), max_attempts=3),
        "slow": make_job(tenant, url=target.url("/slow?seconds=2"), timeout_seconds=1),
    }
    executions = {name: queued(tenant, job) for name, job in jobs.items()}
    assert run_batch([e.id for e in executions.values()]) == 4
    got = {name: Execution.objects.get(id=e.id) for name, e in executions.items()}
    assert got["ok"].status == "succeeded" and got["ok"].response_status == 200
    assert (got["not_found"].status, got["not_found"].error_kind) == ("failed", "http_4xx")
    assert got["unavailable"].status == "queued" and got["unavailable"].next_attempt_at is not None
    assert got["unavailable"].published_at is None and got["unavailable"].finished_at is None
    assert (got["slow"].status, got["slow"].error_kind) == ("timed_out", "timeout")
    assert all(e.lease_expires_at is None for e in got.values())
    assert Attempt.objects.filter(execution__in=got.values()).count() == 4
    for name, job in jobs.items():
        job.refresh_from_db()
    assert (jobs["ok"].last_status, jobs["ok"].consecutive_failures) == ("succeeded", 0)
    assert (jobs["not_found"].last_status, jobs["not_found"].consecutive_failures) == ("failed", 1)
    assert jobs["unavailable"].last_status == "" and jobs["unavailable"].consecutive_failures == 0  # a retry
    assert (jobs["slow"].last_status, jobs["slow"].consecutive_failures) == ("timed_out", 1)
    # every concurrency slot was given back
    assert redis_client().zcard(guards().concurrency_key(tenant.organization.id)) == 0


def test_a_slow_response_does_not_hold_back_recording_the_fast_ones(tenant, make_job, target, monkeypatch):
    recorded = []
    original = recording.record_attempts

    def spy(results):
        recorded.append((time.monotonic(), {r.execution.id for r in results}))
        return original(results)

    monkeypatch.setattr(recording, "record_attempts", spy)
    slow = queued(tenant, make_job(tenant, url=target.url("/slow?seconds=1.5")))
    fast = [queued(tenant, make_job(tenant, url=target.url("/fast"))) for _ in range(5)]
    started = time.monotonic()
    run_batch([slow.id] + [e.id for e in fast])
    fast_ids = {e.id for e in fast}
    first_at, first_ids = recorded[0]
    assert first_at - started < 1.0 and first_ids <= fast_ids
    assert set().union(*(ids for _, ids in recorded)) == fast_ids | {slow.id}
    assert Execution.objects.filter(id__in=fast_ids | {slow.id}, status="succeeded").count() == 6


@pytest.mark.parametrize("sequence", [
    ["failed"], ["succeeded"], ["failed", "failed", "failed"], ["failed", "succeeded", "failed"],
    ["succeeded", "failed", "failed", "failed"], ["failed", "timed_out", "succeeded"], ["dead", "failed"],
    ["succeeded", "succeeded"], ["failed", "succeeded", "failed", "failed", "failed", "succeeded"],
])
@pytest.mark.parametrize("failures_before", [0, 1])
def test_job_health_of_a_group_is_that_of_its_runs_one_by_one(tenant, make_job, sequence, failures_before):
    grouped, single = (make_job(tenant, consecutive_failures=failures_before) for _ in range(2))
    recording.record_attempts([result(running(tenant, grouped), status) for status in sequence])
    for status in sequence:
        execution = running(tenant, single)
        attempt = Attempt(execution_id=execution.id, **vars(result(execution, status).attempt))
        recording.record_attempt(execution, attempt=attempt, status=status, next_attempt_at=None,
                                 auto_disable_after=3)
    grouped.refresh_from_db()
    single.refresh_from_db()
    fields = ("last_status", "consecutive_failures", "enabled", "disabled_reason")
    assert [getattr(grouped, f) for f in fields] == [getattr(single, f) for f in fields]
    assert grouped.last_run_at is not None


@pytest.mark.parametrize("path", ["group", "one_by_one", "not_sent"])
def test_a_plan_that_auto_disables_after_0_failures_never_disables(tenant, make_job, path):
    job = make_job(tenant, consecutive_failures=4)
    for _ in range(2):
        execution = running(tenant, job)
        if path == "group":
            recording.record_attempts([dataclasses.replace(result(execution, "failed"), auto_disable_after=0)])
        elif path == "one_by_one":
            attempt = Attempt(execution_id=execution.id, **vars(result(execution, "failed").attempt))
            recording.record_attempt(execution, attempt=attempt, status="failed", next_attempt_at=None,
                                     auto_disable_after=0)
        else:
            recording.fail_running(execution, error_kind="template_error", error_message="x", now=timezone.now(),
                                   auto_disable_after=0)
    job.refresh_from_db()
    assert (job.enabled, job.disabled_reason, job.consecutive_failures) == (True, "", 6)


def test_a_run_whose_lease_was_taken_back_keeps_its_state(tenant, make_job):
    job = make_job(tenant)
    mine, lost = running(tenant, job), running(tenant, job)
    Execution.objects.filter(id=lost.id).update(status="queued", lease_expires_at=None)
    changed = recording.record_attempts([result(mine, "failed"), result(lost, "failed")])
    assert changed == {mine.id}
    lost.refresh_from_db()
    assert lost.status == "queued" and lost.attempts.count() == 1  # the request was made: it is history
    job.refresh_from_db()
    assert job.consecutive_failures == 1
    # the worker that took it over recorded the same attempt number first: that one stays
    recording.record_attempts([result(lost, "succeeded")])
    assert lost.attempts.get().outcome == "failed"


def test_batched_admission_holds_back_only_the_excess(tenant, make_job, target):
    plan = tenant.organization.plan
    plan.max_concurrency = 3
    plan.save()
    job = make_job(tenant, url=target.url("/slow?seconds=0.3"))
    executions = [queued(tenant, job) for _ in range(5)]
    runs = [batch.Run(e) for e in batch.claim([e.id for e in executions], timezone.now())]
    admitted = batch.admit_all(runs, timezone.now())
    try:
        assert len(admitted) == 3 and all(run.prepared for run in admitted)
        assert Execution.objects.filter(job=job, status="queued").count() == 2
        assert redis_client().zcard(guards().concurrency_key(tenant.organization.id)) == 3
    finally:
        batch.release_all(admitted)
    assert redis_client().zcard(guards().concurrency_key(tenant.organization.id)) == 0


@pytest.mark.django_db(transaction=True)
def test_a_hanging_endpoint_is_handed_to_the_late_recorder(settings, tenant, make_job, target):
    from tests.support.processes import wait_for

    # A handoff of a second: the fast runs are recorded by the task even on a loaded CI
    # machine (0.3 s once was not enough there for a process's first batch: its event loop,
    # session and connections are made then), and still far short of the slow endpoint.
    settings.DELIVERY_HANDOFF_SECONDS = 1.0
    slow = queued(tenant, make_job(tenant, url=target.url("/slow?seconds=5")))
    fast = [queued(tenant, make_job(tenant, url=target.url("/fast"))) for _ in range(3)]
    started = time.monotonic()
    assert run_batch([slow.id] + [e.id for e in fast]) == 4
    assert time.monotonic() - started < 3.5  # the task did not wait for the slow one
    assert Execution.objects.filter(id__in=[e.id for e in fast], status="succeeded").count() == 3
    assert Execution.objects.get(id=slow.id).status == "running"
    wait_for(lambda: Execution.objects.get(id=slow.id).status == "succeeded", timeout=10,
             message="the late recorder to record the slow run")
    assert Attempt.objects.filter(execution_id=slow.id).count() == 1
    assert batch.wait_for_late_runs(5)
    assert batch._capacity().in_use == 0
    assert redis_client().zcard(guards().concurrency_key(tenant.organization.id)) == 0


def test_a_batch_costs_the_same_queries_whatever_its_size(tenant, make_job, target, monkeypatch):
    """No column a run reads is left out of the claim (batch.CLAIMED_FIELDS): one would
    cost a query per run. (recording.py's statements go through psycopg directly and are
    not counted here; they are a fixed three per group. The outcome hooks may query once
    per group, so the batch is recorded as one group: results wait for each other.)"""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    monkeypatch.setattr(batch, "GROUP_WAIT", 10.0)

    def queries_for(count, **job_fields):
        executions = [queued(tenant, make_job(tenant, url=target.url("/q"), **job_fields)) for _ in range(count)]
        with CaptureQueriesContext(connection) as captured:
            run_batch([e.id for e in executions])
        assert Execution.objects.filter(id__in=[e.id for e in executions], status="succeeded").count() == count
        # savepoints: one pair per recorded group, and the results may come back in several
        return len([q for q in captured if "SAVEPOINT" not in q["sql"]])

    assert queries_for(1) == queries_for(6)
    limited = dict(rate_limit_per_minute=600, overlap_policy="forbid", success_body_contains="path")
    assert queries_for(1, **limited) == queries_for(6, **limited)


def _fresh_keys(*keys):
    redis_client().delete(*keys)


def test_batched_concurrency_caps_take_slots_in_order_per_organization():
    shared = guards()
    org_a, org_b = "grouping-org-a", "grouping-org-b"
    _fresh_keys(shared.concurrency_key(org_a), shared.concurrency_key(org_b))
    now = time.time()
    requests = [(org_a, 2, 30, "a1"), (org_b, 1, 30, "b1"), (org_a, 2, 30, "a2"),
                (org_a, 2, 30, "a3"), (org_b, 1, 30, "b2"), (org_a, 2, 30, "a1")]
    # a1 asking again keeps the slot it holds; a3 and b2 find their organization full
    assert shared.acquire_many(requests, now) == [True, True, True, False, False, True]
    shared.settle_many(releases=[(org_a, "a1"), (org_a, "a2"), (org_b, "b1")], now=now)
    assert shared.acquire_many([(org_a, 2, 30, "a3"), (org_b, 1, 30, "b2")], now) == [True, True]


def test_batched_circuit_checks_let_one_run_per_host_probe_a_half_open_circuit():
    shared = guards()
    breaker = shared.breaker
    down, up = "grouping-down.example:443", "grouping-up.example:443"
    _fresh_keys(breaker._key(down), breaker._key(up))
    now = time.time()
    for _ in range(breaker.failure_threshold):
        shared.settle_many(failures=[down], now=now)
    assert [d.allowed for d in shared.circuit_many([down, up, down], now)] == [False, True, False]
    later = now + breaker.cooldown_seconds + 1
    decisions = shared.circuit_many([down, up, down, down], later)
    assert [(d.allowed, d.state) for d in decisions] == [
        (True, "half_open"), (True, "closed"), (False, "half_open"), (False, "half_open")]
    # as for a caller behind another worker's probe: ask again when the probe's lease ends
    assert decisions[2].retry_at == pytest.approx(later + breaker.probe_lease_seconds)
    shared.settle_many(successes=[down, down], now=later)
    assert all(d.allowed for d in shared.circuit_many([down, down], later))


def test_overlap_locks_are_given_back_with_the_group_and_only_by_their_holder():
    shared = guards()
    mine, taken_over = "grouping-job-mine", "grouping-job-taken-over"
    _fresh_keys(f"cronsvc:running:{mine}", f"cronsvc:running:{taken_over}")
    assert shared.lock_jobs([(mine, "run-1", 30), (taken_over, "run-2", 30)]) == [True, True]
    # run-2's lock ran out and another run holds the job now: run-2 giving it back changes nothing
    redis_client().set(f"cronsvc:running:{taken_over}", "run-3")
    shared.settle_many(unlocks=[(mine, "run-1"), (taken_over, "run-2")], now=time.time())
    assert shared.lock_jobs([(mine, "run-4", 30), (taken_over, "run-4", 30)]) == [True, False]
