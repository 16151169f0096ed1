"""Schedule endpoints: next runs of a job, preview of an unsaved schedule, crontab import."""

import pytest

from apps.jobs.models import Job
from tests.api.conftest import error_of, key_client


def RUN(occurrence):
    """What a job's next run says of its occurrence when no execution window moves it."""
    return {"status": "run", "reason": "", "occurrence": occurrence}


def test_next_runs_of_a_job_in_its_timezone(api, tenant, make_job):
    job = make_job(tenant, cron_expression="30 2 * * *", timezone="Europe/Berlin")
    response = api.get(f"/api/v1/jobs/{job.pk}/next-runs/?count=3&after=2027-03-27T00:00:00Z")
    assert response.status_code == 200
    assert response.json() == {
        "runs": [
            {"at": "2027-03-27T01:30:00Z", "local": "2027-03-27T02:30:00+01:00", **RUN("2027-03-27T01:30:00Z")},
            # 28 March: 02:30 does not exist in Berlin; Vixie cron runs it at the jump.
            {"at": "2027-03-28T01:00:00Z", "local": "2027-03-28T03:00:00+02:00", **RUN("2027-03-28T01:00:00Z")},
            {"at": "2027-03-29T00:30:00Z", "local": "2027-03-29T02:30:00+02:00", **RUN("2027-03-29T00:30:00Z")},
        ],
        "description": "At 02:30 (Europe/Berlin)",
    }


def test_next_runs_defaults_to_five(api, tenant, make_job):
    job = make_job(tenant)
    assert len(api.get(f"/api/v1/jobs/{job.pk}/next-runs/").json()["runs"]) == 5


@pytest.mark.parametrize("count", ["0", "101", "x", "-1"])
def test_bad_count_is_invalid_count(api, tenant, make_job, count):
    job = make_job(tenant)
    response = api.get(f"/api/v1/jobs/{job.pk}/next-runs/?count={count}")
    assert response.status_code == 400
    assert error_of(response)["code"] == "invalid_count"


def test_bad_after_is_400(api, tenant, make_job):
    job = make_job(tenant)
    response = api.get(f"/api/v1/jobs/{job.pk}/next-runs/?after=yesterday")
    assert response.status_code == 400
    assert "after" in error_of(response)["fields"]


def test_next_runs_stop_at_the_window(api, tenant, make_job):
    from tests.conftest import utc

    job = make_job(tenant, cron_expression="0 * * * *", end_at=utc(2027, 1, 1, 2, 0))
    runs = api.get(f"/api/v1/jobs/{job.pk}/next-runs/?count=10&after=2027-01-01T00:00:00Z").json()["runs"]
    assert [r["at"] for r in runs] == ["2027-01-01T01:00:00Z", "2027-01-01T02:00:00Z"]


def test_next_runs_of_a_job_without_schedule_is_empty_with_the_reason(api, tenant, make_job):
    job = make_job(tenant, schedule_type=Job.ScheduleType.NONE, cron_expression="")
    response = api.get(f"/api/v1/jobs/{job.pk}/next-runs/?count=3")
    assert response.status_code == 200
    assert response.json() == {"runs": [], "description": "Runs when its upstream jobs trigger it"}


def test_preview_of_an_unsaved_schedule(api):
    response = api.post("/api/v1/schedules/preview/", {
        "schedule": {"type": "interval", "seconds": 3600, "anchor": "2027-01-01T00:15:00Z", "timezone": "Asia/Kolkata"},
        "count": 2, "after": "2027-01-01T00:00:00Z"})
    assert response.status_code == 200, response.json()
    assert response.json() == {
        "runs": [{"at": "2027-01-01T00:15:00Z", "local": "2027-01-01T05:45:00+05:30"},
                 {"at": "2027-01-01T01:15:00Z", "local": "2027-01-01T06:45:00+05:30"}],
        "description": "Every hour",
    }


def test_preview_honours_the_window(api):
    response = api.post("/api/v1/schedules/preview/", {
        "schedule": {"type": "cron", "expression": "0 0 * * *"}, "after": "2027-01-01T00:00:00Z",
        "start_at": "2027-02-01T00:00:00Z", "count": 1})
    assert response.json()["runs"] == [{"at": "2027-02-01T00:00:00Z", "local": "2027-02-01T00:00:00+00:00"}]


@pytest.mark.parametrize("body, code, field", [
    ({"schedule": {"type": "cron", "expression": "bad"}}, "invalid_cron", "schedule.expression"),
    ({"schedule": {"type": "cron", "expression": "0 0 30 2 *"}}, "never_fires", "schedule.expression"),
    ({"schedule": {"type": "cron", "expression": "0 0 * * *", "timezone": "Nowhere/City"}}, "unknown_timezone",
     "schedule.timezone"),
    ({"schedule": {"type": "cron", "expression": "0 0 * * *"}, "count": 0}, "invalid_count", "count"),
    ({"schedule": {"type": "cron", "expression": "0 0 * * *"}, "count": 500}, "invalid_count", "count"),
    ({"schedule": {"type": "cron", "expression": "0 0 * * *"}, "start_at": "2027-02-01T00:00:00Z",
      "end_at": "2027-01-01T00:00:00Z"}, "invalid_window", "end_at"),
    ({"schedule": {"type": "cron", "expression": "0 0 * * *"}, "colour": 1}, "unknown_field", "colour"),
])
def test_preview_errors(api, body, code, field):
    response = api.post("/api/v1/schedules/preview/", body)
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == code
    assert field in error["fields"]


CRONTAB = """\
# nightly jobs
CRON_TZ=Europe/Berlin
0 3 * * * curl -fsS -X POST https://example.com/report -H 'X-Team: data' -d '{"a": 1}'
*/15 * * * * wget -q -O- https://example.com/ping
0 4 * * * /usr/local/bin/backup.sh
* * * * * curl http://127.0.0.1/internal
"""


def test_import_dry_run_reports_and_creates_nothing(api, tenant):
    response = api.post("/api/v1/jobs/import-crontab/", {"crontab": CRONTAB, "project": str(tenant.project.pk)})
    assert response.status_code == 200, response.json()
    result = response.json()
    assert result["dry_run"] is True
    assert [(j["line"], j["id"]) for j in result["jobs"]] == [(3, None), (4, None)]
    report = result["jobs"][0]
    assert report["schedule"] == {"type": "cron", "expression": "0 3 * * *", "timezone": "Europe/Berlin"}
    assert report["request"]["method"] == "POST" and report["request"]["headers"] == {"X-Team": "data"}
    assert [(e["line"], e["code"]) for e in result["errors"]] == [(5, "not_http"), (6, "forbidden_target")]
    assert result["errors"][0]["text"] == "0 4 * * * /usr/local/bin/backup.sh"
    assert not Job.objects.for_organization(tenant.organization).exists()


def test_import_creates_the_valid_lines(api, tenant):
    response = api.post("/api/v1/jobs/import-crontab/", {
        "crontab": CRONTAB, "project": str(tenant.project.pk), "dry_run": False})
    assert response.status_code == 201
    created = [j["id"] for j in response.json()["jobs"]]
    assert len(created) == 2 and all(created)
    jobs = Job.objects.for_organization(tenant.organization)
    assert {str(j.pk) for j in jobs} == set(created)
    assert {j.timezone for j in jobs} == {"Europe/Berlin"}


def test_import_respects_plan_limits(make_tenant, make_job):
    free = make_tenant(plan="free")
    for _ in range(free.organization.plan.max_jobs - 1):
        make_job(free)
    crontab = "0 3 * * * curl https://example.com/a\n0 4 * * * curl https://example.com/b\n" \
              "*/5 * * * * curl https://example.com/c\n"
    response = key_client(free.full_api_key).post("/api/v1/jobs/import-crontab/", {
        "crontab": crontab, "project": str(free.project.pk), "dry_run": False})
    result = response.json()
    assert [j["line"] for j in result["jobs"]] == [1]
    assert [(e["line"], e["code"]) for e in result["errors"]] == [(2, "plan_limit"), (3, "plan_limit")]
    assert Job.objects.for_organization(free.organization).count() == free.organization.plan.max_jobs


def test_import_refuses_huge_crontabs(api, tenant):
    response = api.post("/api/v1/jobs/import-crontab/", {
        "crontab": "# x\n" * 1001, "project": str(tenant.project.pk)})
    assert response.status_code == 400
    assert error_of(response)["code"] == "crontab_too_large"


def test_import_into_another_organizations_project_is_refused(api, other_tenant):
    response = api.post("/api/v1/jobs/import-crontab/", {"crontab": CRONTAB, "project": str(other_tenant.project.pk)})
    assert response.status_code == 400
    assert error_of(response)["code"] == "does_not_exist"


@pytest.mark.parametrize("body, field", [
    ({"schedule": {"type": "once", "at": "9999-12-31T23:59:59Z"}}, "schedule.at"),
    ({"schedule": {"type": "interval", "seconds": 60, "anchor": "0001-01-01T00:00:00Z"}}, "schedule.anchor"),
    ({"schedule": {"type": "cron", "expression": "0 0 * * *"}, "after": "0001-01-01T00:00:00Z"}, "after"),
    ({"schedule": {"type": "cron", "expression": "0 0 * * *"}, "end_at": "9999-01-01T00:00:00Z"}, "end_at"),
])
def test_preview_refuses_instants_the_schedule_math_cannot_reach(api, body, field):
    response = api.post("/api/v1/schedules/preview/", body)
    assert response.status_code == 400
    assert error_of(response)["code"] == "out_of_range"
    assert field in error_of(response)["fields"]


def test_next_runs_refuses_out_of_range_after(api, tenant, make_job):
    job = make_job(tenant)
    response = api.get(f"/api/v1/jobs/{job.pk}/next-runs/?after=0001-01-01T00:00:00Z")
    assert error_of(response)["code"] == "out_of_range"


@pytest.mark.parametrize("overrides, field", [
    ({"schedule": {"type": "once", "at": "9999-12-31T23:59:59Z"}}, "schedule.at"),
    ({"start_at": "9999-01-01T00:00:00Z"}, "start_at"),
    ({"schedule": {"type": "interval", "seconds": 3600}, "start_at": "0001-01-01T00:00:00Z"}, "start_at"),
])
def test_jobs_refuse_out_of_range_instants(api, tenant, overrides, field):
    from tests.api.conftest import job_body

    response = api.post("/api/v1/jobs/", job_body(tenant, **overrides))
    assert response.status_code == 400
    assert error_of(response)["code"] == "out_of_range"
    assert field in error_of(response)["fields"]


def test_import_names_the_real_command_and_odd_curl_forms(api, tenant):
    crontab = ("0 4 * * * root /usr/local/bin/backup.sh\n"
               "0 5 * * * root curl -G -d 'q=a b' https://example.com/search\n"
               "0 6 * * * root curl -G -d q=ok https://example.com/search\n")
    response = api.post("/api/v1/jobs/import-crontab/", {"crontab": crontab, "project": str(tenant.project.pk)})
    assert response.status_code == 200, response.json()
    result = response.json()
    assert [(e["line"], e["code"]) for e in result["errors"]] == [(1, "not_http"), (2, "invalid_url")]
    assert "runs '/usr/local/bin/backup.sh' as root" in result["errors"][0]["reason"]
    assert [j["request"]["url"] for j in result["jobs"]] == ["https://example.com/search?q=ok"]
