"""Downstream jobs decided in the transaction that records their upstreams' outcomes
(real PostgreSQL; the worker's recording path, apps.executions.worker.recording)."""

import pytest
from django.utils import timezone

from apps.executions.worker import batch
from apps.executions.hooks import RunOutcome
from apps.executions.models import Execution
from apps.executions.scheduling.triggers import trigger_now
from apps.workflows.triggering import start_downstream

from .conftest import finish, run_of

pytestmark = pytest.mark.django_db


def test_a_chain_of_three_runs_in_order_in_one_workflow_run(tenant, chain):
    jobs = chain(tenant, "A", ("B", [("A", "success")]), ("C", [("B", "success")]))
    first = trigger_now(jobs["A"])
    assert not run_of(jobs["B"], first.id).exists()  # nothing before A finishes
    first = finish(first, "succeeded")
    assert first.workflow_run_id == first.id  # the first execution starts the run
    (b,) = run_of(jobs["B"], first.id)
    assert (b.status, b.trigger, b.upstream_executions, b.published_at is not None) == (
        "queued", "dependency", [str(first.id)], True)
    assert not run_of(jobs["C"], first.id).exists()
    finish(b, "succeeded")
    (c,) = run_of(jobs["C"], first.id)
    assert (c.status, c.upstream_executions) == ("queued", [str(b.id)])
    finish(c, "succeeded")
    assert Execution.objects.filter(workflow_run_id=first.id).count() == 3


@pytest.mark.parametrize("on, upstream_status, expected", [
    ("success", "succeeded", "queued"), ("success", "failed", "skipped"), ("success", "dead", "skipped"),
    ("failure", "failed", "queued"), ("failure", "timed_out", "queued"), ("failure", "dead", "queued"),
    ("failure", "succeeded", "skipped"),
    ("any", "succeeded", "queued"), ("any", "failed", "queued"), ("any", "timed_out", "queued"),
])
def test_every_on_condition(tenant, chain, on, upstream_status, expected):
    jobs = chain(tenant, "A", ("B", [("A", on)]))
    first = finish(trigger_now(jobs["A"]), upstream_status)
    (b,) = run_of(jobs["B"], first.id)
    assert b.status == expected
    assert b.skip_reason == ("upstream_failed" if expected == "skipped" else "")


def test_a_skip_propagates_down_the_chain(tenant, chain):
    jobs = chain(tenant, "A", ("B", [("A", "success")]), ("C", [("B", "any")]), ("D", [("C", "failure")]))
    first = finish(trigger_now(jobs["A"]), "failed")
    rows = {e.job.name: e for e in Execution.objects.filter(workflow_run_id=first.id).select_related("job")}
    assert {name: (e.status, e.skip_reason) for name, e in rows.items()} == {
        "A": ("failed", ""), "B": ("skipped", "upstream_failed"), "C": ("skipped", "upstream_failed"),
        "D": ("skipped", "upstream_failed")}
    assert rows["C"].upstream_executions == [str(rows["B"].id)]
    assert all(e.finished_at is not None for e in rows.values())


def test_fan_out(tenant, chain):
    jobs = chain(tenant, "A", ("B", [("A", "success")]), ("C", [("A", "success")]), ("D", [("A", "failure")]))
    first = finish(trigger_now(jobs["A"]), "succeeded")
    statuses = dict(Execution.objects.filter(workflow_run_id=first.id, trigger="dependency")
                    .values_list("job__name", "status"))
    assert statuses == {"B": "queued", "C": "queued", "D": "skipped"}


def diamond(tenant, chain, mode, on="success"):
    return chain(tenant, "R", ("X", [("R", "success")]), ("Y", [("R", "success")]),
                 ("Z", [("X", on), ("Y", on)]), mode=mode)


def test_fan_in_all_waits_for_both_branches(tenant, chain):
    jobs = diamond(tenant, chain, "all")
    root = finish(trigger_now(jobs["R"]), "succeeded")
    x, y = run_of(jobs["X"], root.id).get(), run_of(jobs["Y"], root.id).get()
    finish(x, "succeeded")
    assert not run_of(jobs["Z"], root.id).exists()
    finish(y, "succeeded")
    (z,) = run_of(jobs["Z"], root.id)
    assert z.status == "queued"
    assert sorted(z.upstream_executions) == sorted([str(x.id), str(y.id)])


def test_fan_in_all_is_skipped_as_soon_as_one_branch_fails(tenant, chain):
    jobs = diamond(tenant, chain, "all")
    root = finish(trigger_now(jobs["R"]), "succeeded")
    finish(run_of(jobs["X"], root.id).get(), "failed")
    assert run_of(jobs["Z"], root.id).get().status == "skipped"
    finish(run_of(jobs["Y"], root.id).get(), "succeeded")
    assert run_of(jobs["Z"], root.id).count() == 1


def test_fan_in_any_runs_once_on_the_first_branch(tenant, chain):
    jobs = diamond(tenant, chain, "any")
    root = finish(trigger_now(jobs["R"]), "succeeded")
    x = finish(run_of(jobs["X"], root.id).get(), "succeeded")
    (z,) = run_of(jobs["Z"], root.id)
    assert (z.status, z.upstream_executions) == ("queued", [str(x.id)])
    finish(run_of(jobs["Y"], root.id).get(), "succeeded")
    assert run_of(jobs["Z"], root.id).count() == 1


def test_fan_in_any_is_skipped_when_every_branch_missed(tenant, chain):
    jobs = diamond(tenant, chain, "any")
    root = finish(trigger_now(jobs["R"]), "succeeded")
    finish(run_of(jobs["X"], root.id).get(), "failed")
    assert not run_of(jobs["Z"], root.id).exists()  # Y may still succeed
    finish(run_of(jobs["Y"], root.id).get(), "failed")
    assert run_of(jobs["Z"], root.id).get().status == "skipped"


def test_a_paused_downstream_job_is_skipped_and_so_are_its_own(tenant, chain):
    jobs = chain(tenant, "A", ("B", [("A", "success")]), ("C", [("B", "success")]), B={"enabled": False})
    first = finish(trigger_now(jobs["A"]), "succeeded")
    assert (run_of(jobs["B"], first.id).get().skip_reason, run_of(jobs["C"], first.id).get().skip_reason) == (
        "job_paused", "upstream_failed")


def test_two_workflow_runs_stay_apart(tenant, chain):
    jobs = chain(tenant, "A", ("B", [("A", "success")]))
    first, second = trigger_now(jobs["A"]), trigger_now(jobs["A"], now=timezone.now() + timezone.timedelta(seconds=1))
    finish(first, "succeeded")
    finish(second, "failed")
    assert run_of(jobs["B"], first.id).get().status == "queued"
    assert run_of(jobs["B"], second.id).get().status == "skipped"


def test_a_retry_pending_decides_nothing(tenant, chain):
    jobs = chain(tenant, "A", ("B", [("A", "success")]))
    first = finish(trigger_now(jobs["A"]), "queued")  # a retry waits: not an outcome yet
    assert not Execution.objects.filter(job=jobs["B"]).exists()
    assert first.workflow_run_id is None


def test_jobs_without_downstream_are_left_alone(tenant, make_job, django_assert_num_queries):
    job = make_job(tenant)
    execution = trigger_now(job)
    outcome = RunOutcome(execution_id=execution.id, job_id=job.id, organization_id=job.organization_id,
                      status="succeeded", finished_at=timezone.now())
    with django_assert_num_queries(0):  # the one statement goes through psycopg directly, uncounted
        start_downstream([outcome] * 50)
    execution.refresh_from_db()
    assert execution.workflow_run_id is None


def test_downstream_executions_are_published_after_commit(tenant, chain, django_capture_on_commit_callbacks,
                                                          monkeypatch):
    from apps.workflows import triggering

    sent = []
    monkeypatch.setattr(triggering.publishing, "publish", lambda grouped: sent.append(dict(grouped)))
    jobs = chain(tenant, "A", ("B", [("A", "success")]), ("C", [("A", "success")]))
    with django_capture_on_commit_callbacks(execute=True):
        first = finish(trigger_now(jobs["A"]), "succeeded")
    ids = set(Execution.objects.filter(workflow_run_id=first.id, trigger="dependency").values_list("id", flat=True))
    published = {i for grouped in sent for batch in grouped.values() for i in batch}
    assert ids <= published and len(ids) == 2


@pytest.mark.parametrize("body_format, template, expected", [
    ("json", '{"total": {{ upstream.Extract.json.rows.total }}, "name": "{{ upstream.Extract.json.name }}", '
             '"code": {{ upstream.Extract.status }}}',
     b'{"total": 42, "name": "a \\"quoted\\" & <b>", "code": 200}'),
    ("form", "name={{ upstream.Extract.json.name }}&outcome={{ upstream.Extract.outcome }}",
     b"name=a+%22quoted%22+%26+%3Cb%3E&outcome=succeeded"),
])
def test_data_passing_into_the_downstream_body(tenant, chain, body_format, template, expected):
    jobs = chain(tenant, "Extract", ("Load", [("Extract", "success")]),
                 Load={"method": "POST", "body": template, "body_format": body_format})
    first = finish(trigger_now(jobs["Extract"]), "succeeded",
                   body='{"rows": {"total": 42}, "name": "a \\"quoted\\" & <b>"}')
    load = run_of(jobs["Load"], first.id).get()
    now = timezone.now()
    (claimed,) = batch.claim([load.id], now)
    run = batch.Run(execution=claimed)
    assert batch._prepare(run, now)
    assert run.prepared.body == expected
