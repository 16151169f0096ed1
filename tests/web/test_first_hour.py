"""Rough edges of a newcomer's first hour on the job pages (issue 35): a job that never ran
is new, a timezone typed in lower case, versions in words, a megabyte pasted into the body."""

from urllib.parse import urlencode

from django.utils import timezone

from apps.jobs.models import Job
from cronsvc.delivery.curl import curl_command
from tests.web.conftest import job_form


def html(response):
    return response.content.decode()


def test_a_job_that_never_ran_is_new_not_healthy(tenant, owner, make_job):
    fresh = make_job(tenant, name="fresh job")
    ran = make_job(tenant, name="ran job", last_run_at=timezone.now(), last_status="succeeded")
    page = html(owner.get(f"/jobs/{fresh.pk}/"))
    assert '<span class="badge pending">new</span>' in page and ">healthy<" not in page
    assert '<span class="badge ok">healthy</span>' in html(owner.get(f"/jobs/{ran.pk}/"))
    listed = html(owner.get("/?status=new"))
    assert "fresh job" in listed and "ran job" not in listed
    assert "ran job" in html(owner.get("/?status=healthy"))


def test_a_timezone_typed_in_any_case_is_accepted(tenant, owner):
    response = owner.post("/jobs/new/", job_form(tenant, timezone="europe/paris"))
    assert response.status_code == 302, html(response)
    assert Job.objects.get().timezone == "Europe/Paris"


def test_a_misspelt_timezone_gets_close_names_suggested(tenant, owner):
    page = html(owner.post("/jobs/new/", job_form(tenant, timezone="Europe/Pari")))
    assert 'id="id_timezone-error"' in page and "did you mean &#x27;Europe/Paris&#x27;" in page
    page = html(owner.post("/jobs/new/", job_form(tenant, timezone="berlin")))
    assert "did you mean &#x27;Europe/Berlin&#x27;" in page
    assert Job.objects.count() == 0


def test_the_projects_timezone_is_accepted_in_any_case(tenant, owner):
    response = owner.post("/settings/projects/new/", {"name": "Paris office", "timezone": "EUROPE/PARIS"})
    assert response.status_code == 302
    assert tenant.organization.projects.get(name="Paris office").timezone == "Europe/Paris"


def test_versions_name_the_fields_as_the_form_does(tenant, owner):
    owner.post("/jobs/new/", job_form(tenant))
    job = Job.objects.get()
    owner.post(f"/jobs/{job.pk}/edit/", job_form(tenant, cron_expression="0 4 * * *", retry_max_delay_seconds="900"))
    page = html(owner.get(f"/jobs/{job.pk}/versions/"))
    assert "Cron expression" in page and "Longest retry delay (s)" in page
    assert "<code>cron_expression</code>" not in page and "retry_max_delay_seconds" not in page


def post_form(client, path, data):
    """As a browser posts the job form (urlencoded; the test client's default is multipart)."""
    return client.post(path, urlencode(data, doseq=True), content_type="application/x-www-form-urlencoded")


def test_two_megabytes_in_the_body_get_the_fields_error_not_a_bare_413(tenant, owner):
    body = "x" * (2 * 1024 * 1024)
    response = post_form(owner, "/jobs/new/", job_form(tenant, body=body))
    assert response.status_code == 400
    page = html(response)
    assert 'id="id_body-error"' in page and "Far too long" in page and "nothing was saved" in page
    assert 'value="Nightly report"' in page  # the rest of the form comes back as typed
    assert Job.objects.count() == 0
    owner.post("/jobs/new/", job_form(tenant))
    job = Job.objects.get()
    response = post_form(owner, f"/jobs/{job.pk}/edit/", job_form(tenant, body=body, name="Renamed"))
    assert response.status_code == 400 and 'id="id_body-error"' in html(response)
    job.refresh_from_db()
    assert job.name == "Nightly report"


def test_a_form_too_large_to_read_and_the_api_keep_the_413(tenant, owner, api):
    from apps.api.middleware import LONG_FORM_READ_FACTOR
    from django.conf import settings

    huge = "x" * (settings.MAX_REQUEST_BODY_BYTES * LONG_FORM_READ_FACTOR + 1)
    response = post_form(owner, "/jobs/new/", job_form(tenant, body=huge))
    assert response.status_code == 413
    response = api.post("/api/v1/jobs/", {"name": "x", "body": "x" * (2 * 1024 * 1024)}, format="json")
    assert response.status_code == 413 and response.json()["error"]["code"] == "request_too_large"


def test_any_other_page_over_the_limits_gets_a_page_that_says_what_to_do(tenant, owner):
    """Forms other than the job form are not read past the limit, but a person still gets
    a page of the site's own, saying nothing was saved and what to shorten."""
    body = urlencode({"name": "x" * (2 * 1024 * 1024)})
    response = owner.post("/monitors/new/", body, content_type="application/x-www-form-urlencoded",
                          HTTP_ACCEPT="text/html,application/xhtml+xml")
    assert response.status_code == 413
    page = html(response)
    assert "<h1>Too large to send</h1>" in page and "Nothing was saved" in page and "shorten the longest field" in page
    assert 'href="/"' in page  # the site's own error layout, a way back
    response = owner.get("/jobs/", HTTP_ACCEPT="text/html", HTTP_X_PADDING="y" * 40000)
    assert response.status_code == 431 and "Clear this site" in html(response)
    scripted = owner.post("/monitors/new/", body, content_type="application/x-www-form-urlencoded")
    assert scripted.status_code == 413 and scripted["Content-Type"].startswith("text/plain")


def _run_with_attempt(tenant, job):
    from apps.executions.models import Attempt, Execution

    now = timezone.now()
    execution = Execution.objects.create(job=job, organization=tenant.organization, scheduled_for=now,
                                         status="failed", attempt=1, started_at=now, finished_at=now)
    Attempt.objects.create(
        execution=execution, number=1, started_at=now, finished_at=now, duration_ms=12, request_method="POST",
        request_url="https://example.com/hook?team=a b",
        request_headers={"Authorization": "Bearer s3cr3t-token", "X-Team": "data's"},
        request_body='{"job": "it\'s"}', response_status=503, outcome="failed")
    return execution


def test_a_runs_page_offers_run_again_and_the_request_as_curl_without_secrets(tenant, owner, web_client, make_job):
    import shlex

    job = make_job(tenant, name="curl job")
    execution = _run_with_attempt(tenant, job)
    page = html(owner.get(f"/executions/{execution.pk}/"))
    assert "Run again" in page and f'action="/jobs/{job.pk}/trigger/"' in page
    assert 'data-copy="curl-command"' in page and "s3cr3t" not in page
    command = curl_command("POST", "https://example.com/hook?team=a b",
                           {"Authorization": "Bearer s3cr3t-token", "X-Team": "data's"}, '{"job": "it\'s"}')
    words = shlex.split(command.replace("\\\n", " "))
    assert words[:4] == ["curl", "-X", "POST", "https://example.com/hook?team=a b"]
    assert ["-H", "Authorization: ••••"] == words[4:6] and ["-H", "X-Team: data's"] == words[6:8]
    assert words[8:] == ["--data-raw", '{"job": "it\'s"}'] and "s3cr3t" not in command

    response = owner.post(f"/jobs/{job.pk}/trigger/")  # "Run again" posts the job's own trigger
    assert response.status_code == 302 and job.executions.count() == 2
    viewer = web_client(tenant, role="viewer")
    page = html(viewer.get(f"/executions/{execution.pk}/"))
    assert "Run again" not in page and 'data-copy="curl-command"' in page
    assert viewer.post(f"/jobs/{job.pk}/trigger/").status_code == 403
