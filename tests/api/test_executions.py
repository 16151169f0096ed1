"""/api/v1/executions/ and /api/v1/dead-letter/: history, detail with attempts, replay."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.accounts.models import AuditEvent
from apps.executions.models import Attempt, Execution
from tests.api.conftest import error_of
from tests.conftest import utc


@pytest.fixture
def history(tenant, make_job):
    """Two jobs in two projects with a few runs each."""
    from apps.projects.models import Project

    second_project = Project.objects.create(organization=tenant.organization, name="Second", slug="second")
    job_a, job_b = make_job(tenant), make_job(tenant, project=second_project)
    rows = {}
    for i, (job, status, trigger) in enumerate([
        (job_a, "succeeded", "schedule"), (job_a, "failed", "schedule"), (job_a, "dead", "schedule"),
        (job_b, "succeeded", "manual"), (job_b, "dead", "schedule"),
    ]):
        rows[i] = Execution.objects.create(job=job, organization=tenant.organization, status=status,
                                           trigger=trigger, scheduled_for=utc(2027, 1, 1, 0, i))
    return job_a, job_b, second_project, rows


def ids(response):
    assert response.status_code == 200, response.json()
    return [e["id"] for e in response.json()["results"]]


def test_list_newest_first_with_cursor(api, history):
    *_, rows = history
    first = api.get("/api/v1/executions/?page_size=3").json()
    assert [e["id"] for e in first["results"]] == [str(rows[i].pk) for i in (4, 3, 2)]
    assert "count" not in first  # no COUNT(*) over the history
    rest = api.get(first["next"]).json()
    assert [e["id"] for e in rest["results"]] == [str(rows[i].pk) for i in (1, 0)]


def test_filters(api, history):
    job_a, job_b, project, rows = history
    assert set(ids(api.get(f"/api/v1/executions/?job={job_a.pk}"))) == {str(rows[i].pk) for i in (0, 1, 2)}
    assert set(ids(api.get(f"/api/v1/executions/?project={project.pk}"))) == {str(rows[i].pk) for i in (3, 4)}
    assert set(ids(api.get("/api/v1/executions/?status=dead"))) == {str(rows[i].pk) for i in (2, 4)}
    assert ids(api.get("/api/v1/executions/?trigger=manual")) == [str(rows[3].pk)]
    window = "scheduled_for_after=2027-01-01T00:01:00Z&scheduled_for_before=2027-01-01T00:02:00Z"
    assert set(ids(api.get(f"/api/v1/executions/?{window}"))) == {str(rows[1].pk), str(rows[2].pk)}


def test_bad_filter_values_are_400(api, history):
    response = api.get("/api/v1/executions/?status=exploded")
    assert response.status_code == 400
    assert "status" in error_of(response)["fields"]


def test_detail_has_attempts_without_secrets(api, history):
    *_, rows = history
    execution = rows[1]
    execution.response_status, execution.error_kind, execution.error_message = 500, "http_5xx", "HTTP 500"
    execution.save()
    Attempt.objects.create(
        execution=execution, number=1, started_at=utc(2027, 1, 1), request_method="POST",
        request_url="https://example.com/", request_headers={"Authorization": "Bearer secret", "X-A": "1"},
        request_body="{}", response_status=500, response_headers={"Set-Cookie": "sid=1"}, response_body="oops",
        outcome="failed", error_kind="http_5xx", error_message="HTTP 500")
    detail = api.get(f"/api/v1/executions/{execution.pk}/").json()
    assert detail["response"] == {"status": 500, "headers": {}, "body": ""}
    assert detail["error"] == {"kind": "http_5xx", "message": "HTTP 500"}
    [attempt] = detail["attempts"]
    assert attempt["request"] == {"method": "POST", "url": "https://example.com/",
                                  "headers": {"Authorization": "••••", "X-A": "1"}, "body": "{}"}
    assert attempt["response"]["headers"] == {"Set-Cookie": "••••"}
    assert "secret" not in str(detail)


def test_replay_makes_a_new_linked_run(api, history):
    *_, rows = history
    response = api.post(f"/api/v1/executions/{rows[1].pk}/replay/")
    assert response.status_code == 202
    replay = response.json()
    assert (replay["trigger"], replay["status"], replay["replay_of"]) == ("replay", "queued", str(rows[1].pk))
    assert AuditEvent.objects.filter(action="execution.replay", target_id=str(rows[1].pk)).exists()


def test_unfinished_runs_cannot_be_replayed(api, tenant, make_job):
    running = Execution.objects.create(job=make_job(tenant), organization=tenant.organization,
                                       status="running", scheduled_for=timezone.now())
    response = api.post(f"/api/v1/executions/{running.pk}/replay/")
    assert response.status_code == 409
    assert error_of(response)["code"] == "execution_not_finished"


def test_the_dead_letter_reads_its_own_index(api, history):
    """The dead-letter list's page query matches the partial index of dead runs (migration
    0012: predicate and order): a page of dead runs is read without walking the history,
    which at 10M runs with few dead ones is all of it. (Sequential scans off: on a few rows
    the planner would rather read the table; the setting ends with the test's transaction.)"""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        assert len(ids(api.get("/api/v1/dead-letter/?page_size=50"))) == 2
    page = next(q["sql"] for q in captured.captured_queries if '"executions_execution"' in q["sql"] and "LIMIT" in q["sql"])
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + page)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "exec_org_dead" in plan and "Sort" not in plan.split("exec_org_dead")[0], plan


def test_dead_letter_lists_dead_runs_only(api, history):
    *_, rows = history
    assert ids(api.get("/api/v1/dead-letter/")) == [str(rows[4].pk), str(rows[2].pk)]
    assert api.get(f"/api/v1/dead-letter/{rows[0].pk}/").status_code == 404


def test_bulk_replay(api, history):
    *_, rows = history
    response = api.post("/api/v1/dead-letter/replay/", {"ids": [str(rows[2].pk), str(rows[4].pk)]})
    assert response.status_code == 202
    replays = response.json()["replays"]
    assert [r["replay_of"] for r in replays] == [str(rows[2].pk), str(rows[4].pk)]
    assert Execution.objects.filter(trigger="replay").count() == 2
    assert AuditEvent.objects.get(action="execution.bulk_replay").data["replayed"] == [str(rows[2].pk), str(rows[4].pk)]


def test_bulk_replay_of_the_same_job_twice_in_one_call(api, tenant, make_job):
    job = make_job(tenant)
    dead = [Execution.objects.create(job=job, organization=tenant.organization, status="dead",
                                     scheduled_for=timezone.now() - timedelta(minutes=i)) for i in range(3)]
    response = api.post("/api/v1/dead-letter/replay/", {"ids": [str(e.pk) for e in dead]})
    assert response.status_code == 202
    assert len(response.json()["replays"]) == 3


def test_bulk_replay_with_a_non_dead_id_replays_nothing(api, history):
    *_, rows = history
    response = api.post("/api/v1/dead-letter/replay/", {"ids": [str(rows[2].pk), str(rows[0].pk)]})
    assert response.status_code == 404
    assert str(rows[0].pk) in error_of(response)["message"]
    assert not Execution.objects.filter(trigger="replay").exists()


@pytest.mark.parametrize("body", [{}, {"ids": []}, {"ids": ["nope"]}, {"ids": ["0" * 32] * 101}])
def test_bulk_replay_validation(api, body):
    assert api.post("/api/v1/dead-letter/replay/", body).status_code == 400


@pytest.mark.parametrize("query", [
    "scheduled_for_before=0676-01-12T00:35:07%2B18:43",  # an offset PostgreSQL refuses
    "scheduled_for_after=0001-01-01T00:00:00%2B05:00",  # before year 1 in UTC
])
def test_extreme_date_filters_are_answered_not_crashed(api, history, query):
    response = api.get(f"/api/v1/executions/?{query}")
    assert response.status_code in (200, 400)
    if response.status_code == 400:
        assert error_of(response)["code"] == "out_of_range"
