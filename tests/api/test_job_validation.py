"""Job validation: stable codes at the right paths (400), plan limits (402 plan_limit)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.jobs.models import Job
from tests.api.conftest import error_of, job_body, key_client


def refused(api, tenant, status=400, **overrides):
    response = api.post("/api/v1/jobs/", job_body(tenant, **overrides))
    assert response.status_code == status, response.json()
    return error_of(response)


@pytest.mark.parametrize("schedule, code, field", [
    ({"type": "cron", "expression": "61 * * * *"}, "invalid_cron", "schedule.expression"),
    ({"type": "cron", "expression": "0 3 * * *", "timezone": "Mars/Olympus"}, "unknown_timezone", "schedule.timezone"),
    ({"type": "cron", "expression": "0 0 30 2 *"}, "never_fires", "schedule.expression"),
    ({"type": "interval", "seconds": 5}, "interval_too_short", "schedule.seconds"),
    ({"type": "once", "at": "2001-01-01T00:00:00Z"}, "in_the_past", "schedule.at"),
    ({"type": "once", "at": "2100-01-01T00:00:00"}, "invalid_schedule", "schedule.at"),
    ({"type": "weekly"}, "invalid_schedule", "schedule.type"),
    ({"type": "interval", "seconds": 300, "anchor": "2030-01-01T00:00:00Z"}, "invalid_schedule", "schedule.anchor"),
    ("0 3 * * *", "invalid_schedule", "schedule"),
])
def test_schedule_errors(api, tenant, schedule, code, field):
    error = refused(api, tenant, schedule=schedule)
    assert error["code"] == code
    assert field in error["fields"], error
    assert error["message"].startswith(field)


def test_end_before_start_is_invalid_window(api, tenant):
    error = refused(api, tenant, start_at="2100-01-02T00:00:00Z", end_at="2100-01-01T00:00:00Z")
    assert error["code"] == "invalid_window"
    assert "end_at" in error["fields"]


def test_a_window_with_no_run_never_fires(api, tenant):
    error = refused(api, tenant, schedule={"type": "cron", "expression": "0 3 1 1 *"},
                    start_at="2100-02-01T00:00:00Z", end_at="2100-03-01T00:00:00Z")
    assert error["code"] == "never_fires"


@pytest.mark.parametrize("request_spec, code, field", [
    ({"url": "https://example.com/", "headers": {"Bad Name": "x"}}, "invalid_header", "request.headers.Bad Name"),
    ({"url": "https://example.com/", "headers": {"X-A": "a\r\nb"}}, "invalid_header", "request.headers.X-A"),
    ({"url": "https://example.com/", "headers": {"webhook-signature": "x"}}, "reserved_header",
     "request.headers.webhook-signature"),
    ({"url": "https://example.com/", "headers": {"X-Cronsvc-Job-Id": "x"}}, "reserved_header",
     "request.headers.X-Cronsvc-Job-Id"),
    ({"url": "http://127.0.0.1/hook"}, "forbidden_target", "request.url"),
    ({"url": "http://169.254.169.254/latest/meta-data"}, "forbidden_target", "request.url"),
    ({"url": "http://10.1.2.3:8080/"}, "forbidden_target", "request.url"),
    ({"url": "http://localhost/"}, "forbidden_target", "request.url"),
    ({"url": "ftp://example.com/"}, "forbidden_target", "request.url"),
    ({"url": "https://example.com/", "method": "GET", "body": "x"}, "body_not_allowed", "request.body"),
    ({"url": "https://example.com/", "method": "POST", "body": "{{ nope }}"}, "unknown_variable", "request.body"),
    ({"url": "https://example.com/", "auth": {"type": "digest"}}, "invalid_auth", "request.auth.type"),
    ({"url": "https://example.com/", "method": "TRACE"}, "invalid_choice", "request.method"),
])
def test_request_errors(api, tenant, request_spec, code, field):
    error = refused(api, tenant, request=request_spec)
    assert error["code"] == code
    assert field in error["fields"], error


def test_private_targets_are_allowed_when_the_operator_says_so(api, tenant, settings):
    settings.OUTBOUND_ALLOW_PRIVATE = True
    assert api.post("/api/v1/jobs/", job_body(tenant, request={"url": "http://127.0.0.1:8080/"})).status_code == 201


def test_allowed_networks_lift_specific_ranges(api, tenant, settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = ["10.1.0.0/16"]
    assert api.post("/api/v1/jobs/", job_body(tenant, request={"url": "http://10.1.2.3:8080/"})).status_code == 201
    assert refused(api, tenant, request={"url": "http://10.2.0.1:8080/"})["code"] == "forbidden_target"


@pytest.mark.parametrize("success, code, field", [
    ({"status_codes": "abc"}, "invalid_status_codes", "success.status_codes"),
    ({"status_codes": "700"}, "invalid_status_codes", "success.status_codes"),
    ({"body_regex": "("}, "invalid_regex", "success.body_regex"),
])
def test_success_criteria_errors(api, tenant, success, code, field):
    error = refused(api, tenant, success=success)
    assert error["code"] == code
    assert field in error["fields"]


def test_retry_max_delay_below_initial(api, tenant):
    error = refused(api, tenant, retry={"initial_delay_seconds": 60, "max_delay_seconds": 10})
    assert error["code"] == "invalid_retry"


def test_region_must_be_configured(api, tenant, settings):
    settings.REGIONS = ["eu"]
    assert refused(api, tenant, region="us")["code"] == "invalid_region"
    assert api.post("/api/v1/jobs/", job_body(tenant, region="eu")).status_code == 201


def test_other_projects_are_unknown(api, tenant, other_tenant):
    error = refused(api, tenant, project=str(other_tenant.project.pk))
    assert error["code"] == "does_not_exist"
    assert "project" in error["fields"]


def test_several_problems_are_reported_together(api, tenant):
    error = refused(api, tenant, schedule={"type": "cron", "expression": "0 0 30 2 *"},
                    request={"url": "http://127.0.0.1/", "headers": {"Host": "x"}})
    assert error["code"] == "never_fires"
    assert {"schedule.expression", "request.url", "request.headers.Host"} <= set(error["fields"])


# --- plan limits: 402 plan_limit naming the limit and the plan that allows it


def test_schedule_more_frequent_than_the_plan_allows(make_tenant):
    free = make_tenant(plan="free")  # one run an hour at most
    error = refused(key_client(free.full_api_key), free, status=402,
                    schedule={"type": "cron", "expression": "*/5 * * * *"})
    assert error["code"] == "plan_limit"
    assert error["limit"] == "min_interval_seconds"
    assert error["reason"] == "interval_too_short"
    assert error["plan"] == "pro"
    assert "schedule.expression" in error["fields"]


def test_interval_a_higher_plan_allows(make_tenant):
    free = make_tenant(plan="free")
    error = refused(key_client(free.full_api_key), free, status=402, schedule={"type": "interval", "seconds": 30})
    assert (error["code"], error["plan"]) == ("plan_limit", "business")


def test_max_jobs(make_tenant, make_job):
    free = make_tenant(plan="free")
    for _ in range(free.organization.plan.max_jobs):
        make_job(free)
    error = refused(key_client(free.full_api_key), free, status=402)
    assert (error["code"], error["limit"], error["plan"]) == ("plan_limit", "max_jobs", "pro")


def test_timeout_above_the_plan(api, tenant):
    error = refused(api, tenant, status=402, request={"url": "https://example.com/", "timeout_seconds": 120})
    assert (error["code"], error["limit"], error["plan"]) == ("plan_limit", "max_timeout_seconds", "business")
    assert "request.timeout_seconds" in error["fields"]


def test_attempts_above_the_plan(api, tenant):
    error = refused(api, tenant, status=402, retry={"max_attempts": 8})
    assert (error["code"], error["limit"], error["plan"]) == ("plan_limit", "max_attempts", "business")


def test_nothing_is_created_when_refused(api, tenant):
    refused(api, tenant, status=402, retry={"max_attempts": 8})
    assert not Job.objects.for_organization(tenant.organization).exists()


def test_ports_follow_the_operator_setting(api, tenant, settings):
    settings.OUTBOUND_ALLOWED_PORTS = "443"
    assert refused(api, tenant, request={"url": "https://example.com:8443/"})["code"] == "forbidden_target"
    assert api.post("/api/v1/jobs/", job_body(tenant, request={"url": "https://example.com/"})).status_code == 201


@pytest.mark.parametrize("url, hint", [
    ("https://héllo.example/hook", "xn--hllo-bpa.example"),
    ("https://faß.de/", "xn--fa-hia.de"),
    ("http://ex\u3002ample.com/", None),
    ("http://xn--/", None),  # the delivery engines' IDNA encoders raise UnicodeError on these
    ("http://xn--zz-zz.com/", None),
    ("http://" + "a" * 64 + ".com/", None),
    ("http://%31%32%37.0.0.1/", None),
])
def test_a_host_that_is_not_an_ascii_host_name_is_a_400_invalid_host(api, tenant, url, hint):
    error = refused(api, tenant, request={"url": url})
    assert error["code"] == "invalid_host" and "request.url" in error["fields"], error
    if hint:
        assert hint in error["message"]


def test_an_international_name_in_its_xn_form_is_accepted(api, tenant):
    body = job_body(tenant, request={"url": "https://xn--hllo-bpa.example/hook"})
    assert api.post("/api/v1/jobs/", body).status_code == 201


def test_a_create_neither_counts_the_jobs_nor_reads_every_plan(api, tenant):
    """max_jobs is checked against the count the database keeps (apps.jobs.jobcount); the
    platform's floor (all plans) is read only for a schedule the plan does not allow."""
    assert api.post("/api/v1/jobs/", job_body(tenant, name="first")).status_code == 201
    with CaptureQueriesContext(connection) as queries:
        assert api.post("/api/v1/jobs/", job_body(tenant, name="second")).status_code == 201
    statements = [query["sql"] for query in queries]
    assert not [sql for sql in statements if "COUNT(" in sql.upper() or "billing_plan" in sql], statements
    assert any("jobs_organizationjobcount" in sql for sql in statements)


@pytest.mark.parametrize("project", ["not-a-uuid", 12, True, None, ["x"]])
def test_a_malformed_project_id_is_a_field_error(api, tenant, project):
    error = refused(api, tenant, project=project)
    assert "project" in error["fields"], error


def test_a_project_id_is_read_in_any_spelling_of_its_uuid(api, tenant):
    for spelling in (tenant.project.pk.hex, str(tenant.project.pk).upper(), f"{{{tenant.project.pk}}}"):
        response = api.post("/api/v1/jobs/", job_body(tenant, project=spelling, name=f"as {spelling}"))
        assert response.status_code == 201, response.json()
        assert response.json()["project"] == str(tenant.project.pk)
