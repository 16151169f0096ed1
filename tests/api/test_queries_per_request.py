"""The API's read paths make the same number of queries whatever the number of objects on
the page (no query per job or per run: issue 38, "queries per request"), and the history
pages written by the compiled representation are what DRF's serializer writes."""

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.renderers import JSONRenderer

from apps.api.representation import represent_many
from apps.executions.models import Execution
from apps.executions.history.serializers import ExecutionSerializer
from apps.jobs.models import JobDependency

pytestmark = pytest.mark.django_db


def statements(call):
    """The SQL ``call`` runs. (A request empties Django's query log when it starts, so the
    log is emptied first: CaptureQueriesContext counts from the log's length at entry.)"""
    call()  # the first request of a key also reads the key (apps.api.keycache): not per page
    connection.queries_log.clear()
    with CaptureQueriesContext(connection) as captured:
        response = call()
    assert response.status_code == 200, response.content[:300]
    return [query["sql"] for query in captured.captured_queries]


def add_runs(job, count, *, start):
    Execution.objects.bulk_create([
        Execution(job=job, organization=job.organization, status=Execution.Status.FAILED, attempt=1,
                  scheduled_for=start - timedelta(minutes=n), created_at=start - timedelta(minutes=n),
                  response_status=500, response_headers={"Authorization": "Bearer x"}, error_kind="http_status",
                  error_message="500", upstream_executions=[], cancelled_by=None)
        for n in range(count)
    ])


def test_job_list_queries_do_not_grow_with_the_page(api, tenant, make_job):
    first, second = make_job(tenant, name="a"), make_job(tenant, name="b")
    JobDependency.objects.create(upstream=first, downstream=second, on="success")  # the links' query too
    small = statements(lambda: api.get("/api/v1/jobs/?page_size=50"))
    jobs = [make_job(tenant, name=f"c{n:02d}") for n in range(20)]
    JobDependency.objects.create(upstream=jobs[0], downstream=jobs[1], on="failure")
    large = statements(lambda: api.get("/api/v1/jobs/?page_size=50"))
    assert len(large) == len(small) <= 3, large


@pytest.mark.parametrize("path", ["/api/v1/executions/?page_size=50", "/api/v1/jobs/{job}/executions/?page_size=50"])
def test_history_queries_do_not_grow_with_the_page(api, tenant, make_job, path):
    job = make_job(tenant)
    now = timezone.now()
    add_runs(job, 1, start=now)
    small = statements(lambda: api.get(path.format(job=job.pk)))
    add_runs(job, 40, start=now - timedelta(days=1))
    large = statements(lambda: api.get(path.format(job=job.pk)))
    assert len(large) == len(small) <= 2, large


def test_job_read_is_one_query(api, tenant, make_job):
    job = make_job(tenant)
    assert len(statements(lambda: api.get(f"/api/v1/jobs/{job.pk}/"))) == 1


def test_a_history_page_is_written_as_drf_writes_each_run(api, tenant, make_job):
    job = make_job(tenant)
    now = timezone.now()
    add_runs(job, 3, start=now)
    replayed = Execution.objects.filter(job=job).first()
    Execution.objects.create(job=job, organization=tenant.organization, status=Execution.Status.CANCELLED,
                             trigger=Execution.Trigger.REPLAY, replay_of=replayed, scheduled_for=now,
                             created_at=now, started_at=now, finished_at=now + timedelta(seconds=1),
                             duration_ms=1000, job_version=2, deferred_from=now - timedelta(hours=1),
                             defer_reason="outside_window", upstream_executions=[str(replayed.pk)],
                             cancelled_at=now, cancelled_by={"kind": "system", "id": None, "name": "cronsvc"})
    runs = list(Execution.objects.filter(job=job).order_by("-scheduled_for", "-id"))
    render = JSONRenderer().render
    assert render(represent_many(ExecutionSerializer, runs, {})) == render(ExecutionSerializer(runs, many=True).data)
    assert api.get(f"/api/v1/jobs/{job.pk}/executions/").json()["results"] == \
        json.loads(render(ExecutionSerializer(runs, many=True).data))
