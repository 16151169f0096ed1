"""/api/v1/jobs/: the representation, create/read/update/delete and the job actions."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.executions.models import Execution
from apps.jobs.models import Job
from tests.api.conftest import error_of, job_body
from tests.conftest import utc

MASK = "••••"


def create(api, tenant, **overrides):
    response = api.post("/api/v1/jobs/", job_body(tenant, **overrides))
    assert response.status_code == 201, response.json()
    return response.json()


def test_create_returns_the_documented_representation(api, tenant):
    job = create(api, tenant, tags=["reports"], request={
        "url": "https://example.com/hook", "method": "POST", "headers": {"X-Team": "data"},
        "body": '{"id": "{{ job.id }}"}', "body_format": "json", "timeout_seconds": 20,
        "auth": {"type": "bearer", "token": "s3cr3t"}})
    assert set(job) >= {
        "id", "project", "name", "description", "tags", "enabled", "schedule", "start_at", "end_at",
        "jitter_seconds", "request", "retry", "misfire_policy", "overlap_policy", "region", "next_run_at",
        "last_run_at", "last_status", "consecutive_failures", "description_human", "created_at", "updated_at",
    }
    assert job["schedule"] == {"type": "cron", "expression": "0 3 * * *", "timezone": "Europe/Berlin"}
    assert job["request"]["auth"] == {"type": "bearer", "token": MASK}
    assert job["request"]["headers"] == {"X-Team": "data"}
    assert set(job["retry"]) == {"max_attempts", "initial_delay_seconds", "max_delay_seconds", "multiplier",
                                 "retry_on_timeout"}
    assert job["success"] == {"status_codes": "200-299", "body_contains": "", "body_regex": ""}
    assert job["description_human"] == "At 03:00 (Europe/Berlin)"
    assert job["next_run_at"].endswith(":00Z") and job["next_run_at"][11:13] in ("01", "02")
    stored = Job.objects.get(pk=job["id"])
    assert stored.auth == {"type": "bearer", "token": "s3cr3t"}
    assert stored.organization_id == tenant.organization.pk


def test_schedule_timezone_defaults_to_the_projects(api, tenant):
    tenant.project.timezone = "America/New_York"
    tenant.project.save()
    job = create(api, tenant, schedule={"type": "cron", "expression": "0 9 * * 1-5"})
    assert job["schedule"]["timezone"] == "America/New_York"


@pytest.mark.parametrize("schedule, expected", [
    ({"type": "interval", "seconds": 300}, {"type": "interval", "seconds": 300, "timezone": "UTC"}),
    ({"type": "once", "at": "2100-01-01T00:00:00+01:00"},
     {"type": "once", "at": "2099-12-31T23:00:00Z", "timezone": "UTC"}),
    ({"type": "cron", "expression": "@daily", "timezone": "Asia/Tokyo"},
     {"type": "cron", "expression": "@daily", "timezone": "Asia/Tokyo"}),
])
def test_every_kind_of_schedule_round_trips(api, tenant, schedule, expected):
    assert create(api, tenant, schedule=schedule)["schedule"] == expected


def test_once_job_runs_at_its_instant(api, tenant):
    job = create(api, tenant, schedule={"type": "once", "at": "2100-01-01T00:00:00Z"})
    assert job["next_run_at"] == "2100-01-01T00:00:00Z"
    assert job["description_human"].startswith("Once at 2100-01-01 00:00")


def test_retry_and_success_are_written_through(api, tenant):
    job = create(api, tenant, retry={"max_attempts": 5, "initial_delay_seconds": 5, "max_delay_seconds": 60,
                                     "multiplier": 3, "retry_on_timeout": True},
                 success={"status_codes": "200-299, 304", "body_contains": "ok", "body_regex": "^o"})
    stored = Job.objects.get(pk=job["id"])
    assert (stored.max_attempts, stored.retry_initial_delay_seconds, stored.retry_max_delay_seconds,
            stored.retry_multiplier, stored.retry_on_timeout) == (5, 5, 60, 3.0, True)
    assert (stored.success_status_codes, stored.success_body_contains, stored.success_body_regex) == (
        "200-299, 304", "ok", "^o")


def test_list_is_paginated_searchable_and_ordered(api, tenant):
    for name, tags in (("alpha", ["billing"]), ("beta", []), ("gamma", ["nightly"])):
        create(api, tenant, name=name, tags=tags)
    page = api.get("/api/v1/jobs/?page_size=2").json()
    assert page["count"] == 3 and len(page["results"]) == 2 and page["next"]
    assert [j["name"] for j in api.get("/api/v1/jobs/?search=bill").json()["results"]] == ["alpha"]
    assert [j["name"] for j in api.get("/api/v1/jobs/?search=amm").json()["results"]] == ["gamma"]
    assert [j["name"] for j in api.get("/api/v1/jobs/?tag=nightly").json()["results"]] == ["gamma"]
    assert [j["name"] for j in api.get("/api/v1/jobs/?ordering=-name").json()["results"]][0] == "gamma"
    assert api.get("/api/v1/jobs/?page_size=500").json()["count"] == 3  # capped at 200, no error


def test_list_pages_show_each_job_as_its_own_read_does_links_across_pages_included(api, tenant, make_job):
    """The list reads links only for jobs that have some, page by page: a job's entry must
    still equal its own document, whether its upstream or downstream is on the same page,
    on another page, or it has none."""
    from apps.jobs.models import JobDependency

    a, b, c, _ = (make_job(tenant, name=name) for name in ("a", "b", "c", "d"))
    JobDependency.objects.create(upstream=a, downstream=b, on="success")  # same page (page size 2)
    JobDependency.objects.create(upstream=a, downstream=c, on="failure")  # across pages
    listed, url = [], "/api/v1/jobs/?page_size=2"
    while url:
        page = api.get(url).json()
        listed += page["results"]
        url = page["next"]
    assert [job["name"] for job in listed] == ["a", "b", "c", "d"]
    for job in listed:
        assert job == api.get(f"/api/v1/jobs/{job['id']}/").json(), job["name"]
    assert [(x["name"], x["on"]) for x in listed[0]["dependents"]] == [("b", "success"), ("c", "failure")]
    assert listed[2]["dependencies"] == [{"job": str(a.pk), "on": "failure"}]
    assert (listed[3]["dependencies"], listed[3]["dependents"]) == ([], [])  # d: no links at all


def test_patch_changes_only_what_it_names_and_keeps_auth(api, tenant):
    job = create(api, tenant, request={"url": "https://example.com/a", "auth": {"type": "basic",
                                                                               "username": "u", "password": "p"}})
    response = api.patch(f"/api/v1/jobs/{job['id']}/", {"request": {"url": "https://example.com/b"}})
    assert response.status_code == 200, response.json()
    assert response.json()["request"]["url"] == "https://example.com/b"
    assert response.json()["request"]["auth"] == {"type": "basic", "username": "u", "password": MASK}
    assert response.json()["next_run_at"] == job["next_run_at"]
    assert Job.objects.get(pk=job["id"]).auth == {"type": "basic", "username": "u", "password": "p"}


def test_put_of_what_get_returned_keeps_the_masked_secret(api, tenant):
    job = create(api, tenant, request={"url": "https://example.com/", "auth": {"type": "bearer", "token": "t0k"}})
    response = api.put(f"/api/v1/jobs/{job['id']}/", {**job, "name": "renamed"})
    assert response.status_code == 200, response.json()
    assert Job.objects.get(pk=job["id"]).auth == {"type": "bearer", "token": "t0k"}


def test_mask_without_a_stored_secret_is_refused(api, tenant):
    job = create(api, tenant)
    response = api.patch(f"/api/v1/jobs/{job['id']}/", {"request": {"auth": {"type": "bearer", "token": MASK}}})
    assert response.status_code == 400
    assert error_of(response)["code"] == "invalid_auth"


def test_null_auth_removes_it(api, tenant):
    job = create(api, tenant, request={"url": "https://example.com/", "auth": {"type": "bearer", "token": "t"}})
    response = api.patch(f"/api/v1/jobs/{job['id']}/", {"request": {"auth": None}})
    assert response.json()["request"]["auth"] is None
    assert Job.objects.get(pk=job["id"]).auth is None


def test_changing_the_schedule_recomputes_next_run(api, tenant):
    job = create(api, tenant)
    response = api.patch(f"/api/v1/jobs/{job['id']}/", {"schedule": {"type": "once", "at": "2100-06-01T12:00:00Z"}})
    assert response.json()["next_run_at"] == "2100-06-01T12:00:00Z"
    assert response.json()["schedule"]["timezone"] == "UTC"  # the project's, as on create


def test_editing_a_finished_one_off_job_does_not_revalidate_its_schedule(api, tenant, make_job):
    job = make_job(tenant, schedule_type="once", cron_expression="", run_at=utc(2001, 1, 1))
    response = api.patch(f"/api/v1/jobs/{job.pk}/", {"name": "still here"})
    assert response.status_code == 200, response.json()


def test_delete(api, tenant):
    job = create(api, tenant)
    assert api.delete(f"/api/v1/jobs/{job['id']}/").status_code == 204
    assert not Job.objects.filter(pk=job["id"]).exists()


def test_pause_and_resume(api, tenant):
    job = create(api, tenant)
    paused = api.post(f"/api/v1/jobs/{job['id']}/pause/")
    assert paused.status_code == 200 and paused.json()["enabled"] is False
    resumed = api.post(f"/api/v1/jobs/{job['id']}/resume/")
    assert resumed.status_code == 200 and resumed.json()["enabled"] is True
    assert resumed.json()["next_run_at"] is not None


def test_patch_enabled_pauses_and_resumes(api, tenant):
    job = create(api, tenant)
    assert api.patch(f"/api/v1/jobs/{job['id']}/", {"enabled": False}).json()["enabled"] is False
    assert not Job.objects.get(pk=job["id"]).enabled
    assert api.patch(f"/api/v1/jobs/{job['id']}/", {"enabled": True}).json()["enabled"] is True


def test_actions_refuse_a_body_with_unknown_fields(api, tenant):
    job = create(api, tenant)
    response = api.post(f"/api/v1/jobs/{job['id']}/pause/", {"reason": "x"})
    assert response.status_code == 400
    assert error_of(response)["code"] == "unknown_field"


def test_trigger_queues_a_manual_execution(api, tenant):
    job = create(api, tenant)
    response = api.post(f"/api/v1/jobs/{job['id']}/trigger/")
    assert response.status_code == 202
    execution = response.json()
    assert (execution["job"], execution["trigger"], execution["status"]) == (job["id"], "manual", "queued")
    assert Execution.objects.filter(pk=execution["id"], trigger="manual").exists()


def test_job_executions_are_cursor_paginated(api, tenant, make_job):
    job = make_job(tenant)
    other = make_job(tenant)
    base = timezone.now()
    for i in range(3):
        Execution.objects.create(job=job, organization=tenant.organization, scheduled_for=base - timedelta(minutes=i))
    Execution.objects.create(job=other, organization=tenant.organization, scheduled_for=base)
    first = api.get(f"/api/v1/jobs/{job.pk}/executions/?page_size=2").json()
    assert set(first) == {"next", "previous", "results"}
    assert len(first["results"]) == 2 and first["next"]
    second = api.get(first["next"]).json()
    assert len(second["results"]) == 1 and second["next"] is None
    assert {e["job"] for e in first["results"] + second["results"]} == {str(job.pk)}
    status_filtered = api.get(f"/api/v1/jobs/{job.pk}/executions/?status=succeeded").json()
    assert status_filtered["results"] == []


def test_bad_cursor_is_400(api, tenant, make_job):
    job = make_job(tenant)
    response = api.get(f"/api/v1/jobs/{job.pk}/executions/?cursor=garbage")
    assert response.status_code == 400
    assert error_of(response)["code"] == "invalid_cursor"


def test_idempotency_key_replays_the_first_result(api, tenant):
    body = job_body(tenant)
    first = api.post("/api/v1/jobs/", body, HTTP_IDEMPOTENCY_KEY="create-1")
    again = api.post("/api/v1/jobs/", body, HTTP_IDEMPOTENCY_KEY="create-1")
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert Job.objects.for_organization(tenant.organization).count() == 1
    other = api.post("/api/v1/jobs/", body, HTTP_IDEMPOTENCY_KEY="create-2")
    assert other.json()["id"] != first.json()["id"]


def test_idempotency_key_with_another_body_is_a_conflict(api, tenant):
    api.post("/api/v1/jobs/", job_body(tenant), HTTP_IDEMPOTENCY_KEY="k")
    response = api.post("/api/v1/jobs/", job_body(tenant, name="else"), HTTP_IDEMPOTENCY_KEY="k")
    assert response.status_code == 409
    assert error_of(response)["code"] == "idempotency_key_reused"


def test_failed_create_does_not_burn_the_idempotency_key(api, tenant):
    bad = api.post("/api/v1/jobs/", job_body(tenant, name=""), HTTP_IDEMPOTENCY_KEY="k")
    assert bad.status_code == 400
    good = api.post("/api/v1/jobs/", job_body(tenant, name=""), HTTP_IDEMPOTENCY_KEY="k")
    assert good.status_code == 400  # ran again, not replayed
    assert api.post("/api/v1/jobs/", job_body(tenant), HTTP_IDEMPOTENCY_KEY="k").status_code == 201


def test_expired_idempotency_key_runs_again(api, tenant):
    from apps.accounts.models import IdempotencyKey

    first = api.post("/api/v1/jobs/", job_body(tenant), HTTP_IDEMPOTENCY_KEY="k").json()
    IdempotencyKey.objects.update(created_at=timezone.now() - timedelta(hours=25))
    second = api.post("/api/v1/jobs/", job_body(tenant), HTTP_IDEMPOTENCY_KEY="k").json()
    assert second["id"] != first["id"]


def test_expired_idempotency_keys_can_be_purged(api, tenant):
    from apps.api.idempotency import purge_expired
    from apps.accounts.models import IdempotencyKey

    api.post("/api/v1/jobs/", job_body(tenant), HTTP_IDEMPOTENCY_KEY="old")
    api.post("/api/v1/jobs/", job_body(tenant), HTTP_IDEMPOTENCY_KEY="new")
    IdempotencyKey.objects.filter(key="old").update(created_at=timezone.now() - timedelta(hours=25))
    assert purge_expired() == 1
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["new"]


def test_idempotency_keys_are_per_client(api, tenant, make_key):
    _, other_client = make_key(tenant)
    first = api.post("/api/v1/jobs/", job_body(tenant), HTTP_IDEMPOTENCY_KEY="same")
    second = other_client.post("/api/v1/jobs/", job_body(tenant), HTTP_IDEMPOTENCY_KEY="same")
    assert second.json()["id"] != first.json()["id"]


def test_the_unfiltered_list_total_is_the_kept_job_count_and_filtered_totals_are_counted(api, tenant, make_job):
    """The total of every job of the organization comes from the count the database keeps
    (no COUNT over the jobs); a filter, or a key limited to some projects, counts its own."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from apps.projects.models import Project
    from apps.accounts.apikeys import create_api_key
    from tests.api.conftest import key_client

    other = Project.objects.create(organization=tenant.organization, name="Other")
    for name in ("a", "b", "c"):
        make_job(tenant, name=name)
    make_job(tenant, name="elsewhere", project=other)
    with CaptureQueriesContext(connection) as queries:
        page = api.get("/api/v1/jobs/?page_size=2&page=2&ordering=-name").json()
    assert page["count"] == 4 and [job["name"] for job in page["results"]] == ["b", "a"]
    assert not [q["sql"] for q in queries.captured_queries if "COUNT(" in q["sql"].upper()]
    assert api.get("/api/v1/jobs/?search=a").json()["count"] == 1
    key, full = create_api_key(tenant.organization, "one project")
    key.limited_to_projects = True
    key.save()
    key.projects.set([other])
    assert key_client(full).get("/api/v1/jobs/").json()["count"] == 1
