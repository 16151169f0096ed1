import pytest

from apps.executions.worker import recording
from apps.executions.models import Execution
from apps.jobs.models import Job, JobDependency


@pytest.fixture
def chain(make_job):
    """chain(tenant, "A", ("B", [("A", "success")]), ...) -> {name: Job}; jobs after the
    first have no schedule and depend on the named ones."""

    def make(tenant, *specs, mode="all", **fields):
        jobs = {}
        for spec in specs:
            name, links = (spec, []) if isinstance(spec, str) else spec
            schedule = {} if not links else {"schedule_type": Job.ScheduleType.NONE, "cron_expression": ""}
            job = make_job(tenant, name=name, dependency_mode=mode, **schedule, **fields.get(name, {}))
            for upstream, on in links:
                JobDependency.objects.create(downstream=job, upstream=jobs[upstream], on=on)
            jobs[name] = job
        return jobs

    return make


def finish(execution, status, *, response_status=200, body="", now=None):
    """Record ``execution``'s attempt the way a worker does (recording.record_attempts), so
    the outcome hooks run in the recording transaction."""
    from django.utils import timezone

    now = now or timezone.now()
    Execution.objects.filter(id=execution.id).update(status="running", started_at=now)
    execution = Execution.objects.get(id=execution.id)
    attempt = recording.AttemptValues(
        number=execution.attempt + 1, started_at=now, finished_at=now, duration_ms=5, request_method="POST",
        request_url="https://example.com/hook", request_headers={}, request_body="",
        response_status=response_status, response_headers={}, response_body=body, remote_addr="",
        outcome="succeeded" if status == "succeeded" else "failed", error_kind="", error_message="")
    recording.record_attempts([recording.FinishedAttempt(execution=execution, attempt=attempt, status=status,
                                                next_attempt_at=None, auto_disable_after=1000)])
    return Execution.objects.get(id=execution.id)


def run_of(job, run_id):
    return Execution.objects.filter(job=job, workflow_run_id=run_id, trigger="dependency")
