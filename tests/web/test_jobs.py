"""Dashboard, job form (validation, preview, test run), job detail, actions, tenancy, roles."""

from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.html import escape

from apps.accounts.models import AuditEvent
from apps.executions.models import Attempt, Execution
from apps.jobs.models import Job
from apps.projects.models import Project
from apps.web.views.jobs import mark_clock_changes
from tests.conftest import utc
from tests.support.target import start_target
from tests.web.conftest import job_form


def html(response):
    return response.content.decode()


# --- dashboard


def test_dashboard_groups_jobs_by_project_with_status_and_next_run(tenant, owner, make_job):
    other_project = Project.objects.create(organization=tenant.organization, name="Zeta", slug="zeta")
    make_job(tenant, name="alpha job", timezone="Asia/Tokyo", next_run_at=timezone.now() + timedelta(minutes=4))
    make_job(tenant, name="zeta job", project=other_project, enabled=False)
    make_job(tenant, name="broken job", consecutive_failures=3, last_status="failed",
             last_run_at=timezone.now() - timedelta(minutes=2))
    page = html(owner.get("/")).split('id="job-list"')[1]
    assert page.index("Default") < page.index("alpha job") < page.index("Zeta") < page.index("zeta job")
    assert "JST" in page and "in 4 min" in page
    assert ">paused<" in page and ">failing<" in page and ">new<" in page  # alpha job never ran: new


def test_dashboard_filters_by_status_project_tag_and_search(tenant, owner, make_job):
    make_job(tenant, name="nightly billing", tags=["billing"])
    make_job(tenant, name="paused thing", enabled=False)
    make_job(tenant, name="expired thing", expired_at=timezone.now())
    make_job(tenant, name="auto disabled", enabled=False, disabled_reason="Disabled automatically")
    assert "paused thing" in html(owner.get("/?status=paused"))
    assert "nightly billing" not in html(owner.get("/?status=paused"))
    assert "auto disabled" in html(owner.get("/?status=disabled"))
    assert "paused thing" not in html(owner.get("/?status=disabled"))
    assert "expired thing" in html(owner.get("/?status=expired"))
    assert "nightly billing" in html(owner.get("/?status=new"))  # never ran
    tagged = html(owner.get("/?tag=billing"))
    assert "nightly billing" in tagged and "paused thing" not in tagged
    found = html(owner.get("/?q=NIGHTLY"))
    assert "nightly billing" in found and "paused thing" not in found
    assert "No job matches" in html(owner.get(f"/?project={Project.objects.create(organization=tenant.organization, name='E', slug='e').pk}"))


def test_dashboard_polling_returns_only_the_job_list(tenant, owner, make_job):
    make_job(tenant, name="polled job")
    response = owner.get("/?status=healthy", HTTP_HX_REQUEST="true")
    body = html(response)
    assert body.lstrip().startswith('<div id="job-list"') and "<html" not in body
    assert 'hx-trigger="every 10s"' in body and "status=healthy" in body


def test_dashboard_shows_the_24_hour_strip(tenant, owner, make_job):
    job = make_job(tenant, name="stripy")
    now = timezone.now()
    Execution.objects.create(job=job, organization=tenant.organization, scheduled_for=now - timedelta(hours=2),
                             status="succeeded")
    Execution.objects.create(job=job, organization=tenant.organization, scheduled_for=now - timedelta(hours=1),
                             status="failed", trigger="manual")
    page = html(owner.get("/"))
    assert page.count('class="ok"') == 1 and page.count('class="failed"') == 1


def test_dashboard_shows_no_other_organization_jobs(tenant, other_tenant, owner, make_job):
    make_job(other_tenant, name="their secret job")
    assert "their secret job" not in html(owner.get("/"))
    assert "their secret job" not in html(owner.get("/?q=secret"))


# --- job form


def test_create_a_job_through_the_form(tenant, owner):
    response = owner.post("/jobs/new/", job_form(tenant))
    assert response.status_code == 302
    job = Job.objects.get(name="Nightly report")
    assert response["Location"] == f"/jobs/{job.pk}/"
    assert job.organization == tenant.organization and job.cron_expression == "0 3 * * *"
    assert job.timezone == "Europe/Berlin" and job.method == "POST" and job.body_format == "json"
    assert job.headers == {"X-Team": "data"} and job.tags == ["billing", "nightly"]
    assert job.auth == {"type": "bearer", "token": "s3cr3t"}
    assert job.next_run_at is not None and job.max_attempts == 3 and job.retry_max_delay_seconds == 600
    assert AuditEvent.objects.filter(action="job.create", target_id=str(job.pk)).exists()


def test_form_errors_are_the_apis_messages_beside_the_fields(tenant, owner):
    response = owner.post("/jobs/new/", job_form(tenant, cron_expression="61 * * * *", name=""))
    assert response.status_code == 400
    page = html(response)
    assert Job.objects.count() == 0
    assert 'id="id_cron_expression-error"' in page and 'aria-invalid="true"' in page
    assert 'id="id_name-error"' in page and "This field may not be blank." in page
    assert "2 problems to fix" in page
    page = html(owner.post("/jobs/new/", job_form(tenant, url="http://10.1.2.3/internal")))
    assert 'id="id_url-error"' in page and "give a public http(s) address" in page
    page = html(owner.post("/jobs/new/", job_form(tenant, timezone="Mars/Olympus", cron_expression="5 4 * * *")))
    assert 'id="id_timezone-error"' in page and "is not a known IANA timezone" in page
    # The posted values come back, secrets excepted.
    assert 'value="5 4 * * *"' in page and 'value="Mars/Olympus"' in page and "s3cr3t" not in page


def test_the_same_message_as_the_api(tenant, owner, member_api):
    body = {"project": str(tenant.project.pk), "name": "x", "schedule": {"type": "cron", "expression": "* * 31 2 *"},
            "request": {"url": "https://example.com/"}}
    api_message = member_api.post("/api/v1/jobs/", body, format="json").json()["error"]["fields"]
    (path, (message,)), = api_message.items()
    page = html(owner.post("/jobs/new/", job_form(tenant, cron_expression="* * 31 2 *")))
    assert escape(message.removeprefix(f"{path}: ")) in page


@pytest.fixture
def member_api(tenant):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_login(tenant.owner)
    return client


def test_a_plan_limit_is_shown_beside_the_schedule(make_tenant, web_client):
    free = make_tenant(plan="free")
    client = web_client(free)
    page = html(client.post("/jobs/new/", job_form(free, cron_expression="*/5 * * * *")))
    assert "plan (Free)" in page and "The Pro plan allows it." in page
    assert 'id="id_cron_expression-error"' in page


def test_every_n_minutes_and_one_off_schedules(tenant, owner):
    owner.post("/jobs/new/", job_form(tenant, name="every", schedule_mode="every", every_n="2", every_unit="hours"))
    job = Job.objects.get(name="every")
    assert job.schedule_type == "interval" and job.interval_seconds == 7200
    owner.post("/jobs/new/", job_form(tenant, name="once", schedule_mode="once", once_at="2031-01-02T09:30",
                                      timezone="America/New_York"))
    job = Job.objects.get(name="once")
    assert job.schedule_type == "once" and job.run_at == utc(2031, 1, 2, 14, 30)
    page = html(owner.post("/jobs/new/", job_form(tenant, name="past", schedule_mode="once",
                                                  once_at="2001-01-01T00:00")))
    assert 'id="id_once_at-error"' in page


def test_edit_keeps_stored_secrets_when_left_empty_and_never_shows_them(tenant, owner, make_job):
    job = make_job(tenant, auth={"type": "basic", "username": "u", "password": "hunter2"})
    page = html(owner.get(f"/jobs/{job.pk}/edit/"))
    assert "hunter2" not in page and "leave empty to keep it" in page
    form = job_form(tenant, name="renamed", auth_type="basic", auth_username="u", auth_password="", auth_token="")
    assert owner.post(f"/jobs/{job.pk}/edit/", form).status_code == 302
    job.refresh_from_db()
    assert job.name == "renamed" and job.auth == {"type": "basic", "username": "u", "password": "hunter2"}
    owner.post(f"/jobs/{job.pk}/edit/", {**form, "auth_type": "none"})
    job.refresh_from_db()
    assert job.auth is None


def test_schedule_preview_lists_the_next_5_runs(tenant, owner):
    response = owner.post("/jobs/preview/", {"schedule_mode": "cron", "cron_expression": "0 3 * * 1-5",
                                             "timezone": "Europe/Berlin", "project": str(tenant.project.pk)})
    page = html(response)
    assert "At 03:00, Monday through Friday (Europe/Berlin)" in page
    assert page.count(" 03:00 CE") == 5  # shown in the schedule's own timezone (CET or CEST)
    assert page.count("<li>") == 5
    bad = html(owner.post("/jobs/preview/", {"schedule_mode": "cron", "cron_expression": "nope"}))
    assert "Not a valid schedule" in bad
    every = html(owner.post("/jobs/preview/", {"schedule_mode": "every", "every_n": "90", "every_unit": "minutes",
                                               "timezone": "UTC"}))
    assert "Every 90 minutes" in every


def test_preview_warns_about_the_plan(make_tenant, web_client):
    free = make_tenant(plan="free")
    page = html(web_client(free).post("/jobs/preview/", {"schedule_mode": "cron", "cron_expression": "* * * * *",
                                                        "timezone": "UTC"}))
    assert "will be refused" in page


def test_clock_changes_are_marked():
    from cronsvc.schedules import CronSchedule, next_runs

    runs = next_runs(CronSchedule("30 2 * * *", "America/New_York"), utc(2027, 3, 12, 12), 3)
    marked = mark_clock_changes(runs, "America/New_York", utc(2027, 3, 12, 12))
    assert [m["change"] for m in marked] == [None, "Clock change: UTC−05:00 → UTC−04:00", None]
    assert marked[1]["local"].hour == 3  # the skipped 02:30 runs at 03:00 (Vixie cron)
    assert marked[1]["tzname"] == "EDT" and marked[0]["tzname"] == "EST"


@pytest.fixture
def target():
    server = start_target()
    yield server
    server.close()


def test_test_run_sends_one_request_and_saves_nothing(tenant, owner, target, settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    form = job_form(tenant, url=target.url("/try"), method="POST", body='{"hello": "{{ job.name }}"}')
    response = owner.post("/jobs/test-run/", form)
    page = html(response)
    assert "Success" in page and "HTTP 200" in page and "&quot;path&quot;: &quot;/try&quot;" in page
    (received,) = target.requests_to("/try")
    assert received.body == b'{"hello": "Nightly report"}'
    assert "webhook-signature" in received.headers and received.headers["authorization"] == "Bearer s3cr3t"
    assert "s3cr3t" not in page  # the request as sent is shown with its secrets masked
    assert Job.objects.count() == 0 and Execution.objects.count() == 0


def test_test_run_refuses_private_targets_and_invalid_forms(tenant, owner, target):
    page = html(owner.post("/jobs/test-run/", job_form(tenant, url=target.url("/nope"))))
    assert "Fix these first" in page
    assert target.requests_to("/nope") == []
    assert "Fix these first" in html(owner.post("/jobs/test-run/", job_form(tenant, cron_expression="x")))


def test_test_runs_are_rate_limited(tenant, owner, settings):
    settings.TEST_RUNS_PER_MINUTE = 1
    owner.post("/jobs/test-run/", job_form(tenant, cron_expression="x"))
    assert owner.post("/jobs/test-run/", job_form(tenant, cron_expression="x")).status_code == 429


# --- job detail and actions


def test_job_detail_shows_configuration_next_runs_history_and_attempts(tenant, owner, make_job):
    job = make_job(tenant, name="detailed", cron_expression="0 * * * *", timezone="Europe/Berlin",
                   auth={"type": "bearer", "token": "t0ps3cret"}, headers={"X-A": "b"})
    now = timezone.now()
    execution = Execution.objects.create(
        job=job, organization=tenant.organization, scheduled_for=now - timedelta(minutes=5), status="succeeded",
        started_at=now - timedelta(minutes=5) + timedelta(seconds=2), finished_at=now - timedelta(minutes=5, seconds=-3),
        duration_ms=812, response_status=200, response_body='{"ok": true}', attempt=1)
    Attempt.objects.create(execution=execution, number=1, started_at=execution.started_at, duration_ms=812,
                           request_method="GET", request_url=job.url,
                           request_headers={"Authorization": "Bearer t0ps3cret", "X-A": "b"},
                           response_status=200, response_body='{"ok": true}', outcome="succeeded")
    page = html(owner.get(f"/jobs/{job.pk}/"))
    assert "Every hour" in page and "CET" in page or "CEST" in page
    assert page.count('class="next-runs"') == 1
    assert "812 ms" in page and "HTTP 200" in page and "2.0 s" in page  # duration, response, lateness
    assert "t0ps3cret" not in page
    detail = html(owner.get(f"/executions/{execution.pk}/", HTTP_HX_REQUEST="true"))
    assert "Attempt 1" in detail and "Authorization: ••••" in detail and "t0ps3cret" not in detail
    assert "&quot;ok&quot;: true" in detail


def test_history_is_paginated_and_filtered_by_status(tenant, owner, make_job):
    job = make_job(tenant)
    now = timezone.now()
    Execution.objects.bulk_create([
        Execution(job=job, organization=tenant.organization, scheduled_for=now - timedelta(minutes=i),
                  status="failed" if i % 5 == 0 else "succeeded") for i in range(45)])
    page = html(owner.get(f"/jobs/{job.pk}/history/"))
    assert "Page 1 of 3" in page
    failed = html(owner.get(f"/jobs/{job.pk}/history/?status=failed"))
    assert failed.count('badge bad">Failed') == 9 and "Page 1" not in failed


def test_stats_over_each_range(tenant, owner, make_job):
    job = make_job(tenant)
    now = timezone.now()
    Execution.objects.bulk_create([
        Execution(job=job, organization=tenant.organization, scheduled_for=now - timedelta(hours=i),
                  status="succeeded" if i % 4 else "failed", duration_ms=100 + i) for i in range(1, 100)])
    for name, runs in (("24h", 23), ("7d", 99), ("30d", 99)):
        page = html(owner.get(f"/jobs/{job.pk}/stats/?range={name}"))
        assert f"{runs} finished runs in the last {name}" in page
        assert 'id="stats-data"' in page


def test_pause_resume_trigger_duplicate_delete(tenant, owner, make_job):
    job = make_job(tenant, name="acted on", auth={"type": "bearer", "token": "keep-me"})
    assert owner.post(f"/jobs/{job.pk}/pause/").status_code == 302
    job.refresh_from_db()
    assert not job.enabled and job.paused_reason.startswith("paused by")
    owner.post(f"/jobs/{job.pk}/resume/")
    job.refresh_from_db()
    assert job.enabled and job.next_run_at is not None
    owner.post(f"/jobs/{job.pk}/trigger/")
    assert Execution.objects.get(job=job).trigger == "manual"
    response = owner.post(f"/jobs/{job.pk}/duplicate/")
    copy = Job.objects.get(name="acted on (copy)")
    assert response["Location"] == f"/jobs/{copy.pk}/edit/"
    assert not copy.enabled and copy.auth == {"type": "bearer", "token": "keep-me"}
    assert "Delete “acted on”?" in html(owner.get(f"/jobs/{job.pk}/delete/"))
    owner.post(f"/jobs/{job.pk}/delete/")
    assert not Job.objects.filter(pk=job.pk).exists()
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"job.pause", "job.resume", "job.trigger", "job.create", "job.delete"} <= actions


JOB_URLS = ["/jobs/{}/", "/jobs/{}/edit/", "/jobs/{}/history/", "/jobs/{}/stats/", "/jobs/{}/delete/"]
JOB_POSTS = ["/jobs/{}/pause/", "/jobs/{}/resume/", "/jobs/{}/trigger/", "/jobs/{}/duplicate/",
             "/jobs/{}/delete/", "/jobs/{}/edit/", "/jobs/{}/test-run/"]


def test_another_organizations_job_is_404_everywhere(tenant, other_tenant, owner, make_job):
    theirs = make_job(other_tenant, name="not yours")
    execution = Execution.objects.create(job=theirs, organization=other_tenant.organization,
                                         scheduled_for=timezone.now())
    for url in JOB_URLS:
        response = owner.get(url.format(theirs.pk))
        assert response.status_code == 404, url
        assert "Not found" in html(response)
    for url in JOB_POSTS:
        assert owner.post(url.format(theirs.pk)).status_code == 404, url
    assert owner.get(f"/executions/{execution.pk}/").status_code == 404
    theirs.refresh_from_db()
    assert theirs.enabled and Job.objects.filter(pk=theirs.pk).exists()


def test_a_viewer_reads_but_cannot_change(tenant, web_client, make_job):
    viewer = web_client(tenant, "viewer")
    job = make_job(tenant, name="look only")
    page = html(viewer.get(f"/jobs/{job.pk}/"))
    assert "look only" in page and "Pause</button>" not in page
    for url in JOB_POSTS[:5]:
        response = viewer.post(url.format(job.pk))
        assert response.status_code == 403, url
        assert "Not allowed" in html(response)
    assert viewer.get("/jobs/new/").status_code == 403
    assert viewer.post("/jobs/new/", job_form(tenant)).status_code == 403
    job.refresh_from_db()
    assert job.enabled


def test_a_developer_limited_to_a_project_sees_only_it(tenant, web_client, make_job):
    from apps.api.accounts.members import set_member_projects
    from apps.accounts.models import Membership

    other = Project.objects.create(organization=tenant.organization, name="Other", slug="other")
    developer = web_client(tenant, "developer")
    set_member_projects(Membership.objects.get(user=developer.user), [tenant.project.pk])
    mine, hidden = make_job(tenant, name="granted job"), make_job(tenant, name="hidden job", project=other)
    page = html(developer.get("/"))
    assert "granted job" in page and "hidden job" not in page
    assert developer.get(f"/jobs/{hidden.pk}/").status_code == 404
    assert developer.post(f"/jobs/{mine.pk}/pause/").status_code == 302
    refused = html(developer.post("/jobs/new/", job_form(tenant, project=str(other.pk))))
    assert 'id="id_project-error"' in refused


def test_a_suspended_organization_gets_an_explanation(tenant, owner):
    from apps.accounts.services import suspend_organization

    suspend_organization(tenant.organization, reason="unpaid invoice")
    response = owner.get("/")
    assert response.status_code == 403 and "unpaid invoice" in html(response)


def test_the_form_sets_the_jobs_connect_timeout_and_rate_limit(tenant, owner):
    response = owner.post("/jobs/new/", job_form(tenant, connect_timeout_seconds="2.5", rate_limit_per_minute="12"))
    assert response.status_code == 302
    job = Job.objects.get(name="Nightly report")
    assert (job.connect_timeout_seconds, job.rate_limit_per_minute) == (2.5, 12)
    page = html(owner.get(f"/jobs/{job.pk}/edit/"))
    assert 'name="connect_timeout_seconds"' in page and 'value="2.5"' in page and 'value="12"' in page
    page = html(owner.post(f"/jobs/{job.pk}/edit/", job_form(tenant, connect_timeout_seconds="0")))
    assert 'id="id_connect_timeout_seconds-error"' in page
    owner.post(f"/jobs/{job.pk}/edit/", job_form(tenant))  # left empty: the platform's defaults again
    job.refresh_from_db()
    assert (job.connect_timeout_seconds, job.rate_limit_per_minute) == (None, None)


def test_history_and_run_pages_show_lateness_without_the_jitter(tenant, owner, make_job):
    job = make_job(tenant, jitter_seconds=60)
    scheduled = timezone.now().replace(microsecond=0) - timedelta(minutes=5)
    execution = Execution.objects.create(  # 45 s of jitter, then 3 s late
        job=job, organization=tenant.organization, scheduled_for=scheduled, jitter_seconds=45, status="running",
        started_at=scheduled + timedelta(seconds=48), trigger="schedule")
    history = html(owner.get(f"/jobs/{job.pk}/history/"))
    assert 'data-label="Late by" class="num">3.0 s<' in history and "48.0 s" not in history
    detail = html(owner.get(f"/executions/{execution.pk}/"))
    assert "<dt>Late by</dt><dd data-lateness>3.0 s" in detail and "after its 45 s of jitter" in detail
