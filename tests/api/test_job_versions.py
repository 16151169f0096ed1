"""Job versions on PostgreSQL: every change through the job services keeps one (API, pages,
admin, import, rollback), secrets never in clear, rollback as a new audited version, and
each execution naming its version (the scheduler's hand-written INSERT included)."""

import json
from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.accounts.models import AuditEvent
from apps.executions.models import Execution
from apps.executions.scheduling.tick import claim_due
from apps.executions.scheduling.triggers import trigger_now
from apps.jobs.models import Job, JobVersion
from tests.api.conftest import error_of, job_body

TOKEN, NEW_TOKEN, HEADER_SECRET = "tok-s3cr3t-one", "tok-s3cr3t-two", "hdr-s3cr3t-value"


def create(api, tenant, **overrides):
    response = api.post("/api/v1/jobs/", job_body(tenant, **overrides), format="json")
    assert response.status_code == 201, response.content
    return Job.objects.get(pk=response.json()["id"])


def versions(api, job):
    response = api.get(f"/api/v1/jobs/{job.pk}/versions/")
    assert response.status_code == 200, response.content
    return response.json()["results"]


def patch(api, job, body):
    response = api.patch(f"/api/v1/jobs/{job.pk}/", body, format="json")
    assert response.status_code == 200, response.content
    return response


def test_create_then_change_keeps_each_version_with_author_and_diff(api, tenant):
    job = create(api, tenant, name="first")
    (v1,) = versions(api, job)
    assert (v1["number"], v1["source"], v1["changes"], v1["rollback_of"]) == (1, "api", {}, None)
    assert v1["author"] == {"kind": "api_key", "id": str(tenant.api_key.pk), "name": tenant.api_key.name}
    patch(api, job, {"name": "second", "request": {"url": "https://example.com/v2"}})
    v2, _ = versions(api, job)
    assert v2["number"] == 2
    assert v2["changes"] == {"name": {"from": "first", "to": "second"},
                             "url": {"from": job.url, "to": "https://example.com/v2"}}
    job.refresh_from_db()
    assert job.version == 2
    detail = api.get(f"/api/v1/jobs/{job.pk}/versions/1/").json()
    assert detail["snapshot"]["name"] == "first" and detail["snapshot"]["dependencies"] == []


def test_a_change_that_changes_nothing_keeps_no_version(api, tenant):
    job = create(api, tenant, name="same")
    patch(api, job, {"name": "same"})
    api.post(f"/api/v1/jobs/{job.pk}/pause/")  # running state, in the audit log: not a version
    assert [v["number"] for v in versions(api, job)] == [1]


def test_secrets_never_appear_in_clear_in_versions(api, tenant):
    job = create(api, tenant, request={"url": "https://example.com/hook", "auth": {"type": "bearer", "token": TOKEN},
                                       "headers": {"X-API-Key": HEADER_SECRET, "X-Team": "data"}})
    patch(api, job, {"request": {"url": "https://example.com/hook", "auth": {"type": "bearer", "token": NEW_TOKEN},
                                 "headers": {"X-API-Key": HEADER_SECRET, "X-Team": "ops"}}})
    shown = json.dumps([versions(api, job), api.get(f"/api/v1/jobs/{job.pk}/versions/1/").json(),
                        api.get(f"/api/v1/jobs/{job.pk}/versions/2/").json()])
    with connection.cursor() as cursor:
        cursor.execute("SELECT snapshot::text, changes::text, secrets FROM jobs_jobversion WHERE job_id = %s",
                       [job.pk])
        stored = json.dumps(cursor.fetchall())
    for secret in (TOKEN, NEW_TOKEN, HEADER_SECRET):
        assert secret not in shown and secret not in stored
    v2 = versions(api, job)[0]
    assert v2["changes"]["auth"] == {"from": {"type": "bearer", "token": "••••"},
                                     "to": {"type": "bearer", "token": "••••"}}
    assert v2["changes"]["headers"] == {"from": {"X-Team": "data"}, "to": {"X-Team": "ops"}}
    assert JobVersion.objects.get(job=job, number=1).secrets["auth"]["token"] == TOKEN  # decrypted by the field


def test_rollback_restores_the_definition_secrets_included_as_a_new_audited_version(api, tenant):
    job = create(api, tenant, name="v1", request={"url": "https://example.com/one",
                                                  "auth": {"type": "bearer", "token": TOKEN}})
    patch(api, job, {"name": "v2", "request": {"url": "https://example.com/two",
                                               "auth": {"type": "bearer", "token": NEW_TOKEN}},
                     "schedule": {"type": "cron", "expression": "0 * * * *"}})
    response = api.post(f"/api/v1/jobs/{job.pk}/versions/1/rollback/")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["number"], body["source"], body["rollback_of"]) == (3, "rollback", 1)
    assert body["changes"]["name"] == {"from": "v2", "to": "v1"}
    job.refresh_from_db()
    assert (job.version, job.name, job.url, job.cron_expression) == (3, "v1", "https://example.com/one", "0 3 * * *")
    assert job.auth == {"type": "bearer", "token": TOKEN}
    assert job.next_run_at is not None and job.next_run_at.minute == 0  # rescheduled by the restored cron
    event = AuditEvent.objects.get(organization=tenant.organization, action="job.rollback")
    assert (event.target_id, event.data) == (str(job.pk), {"to_version": 1, "version": 3})
    again = api.post(f"/api/v1/jobs/{job.pk}/versions/1/rollback/")
    assert again.status_code == 200 and again.json()["number"] == 3  # already that definition: nothing new


ENV_SECRET, NEW_ENV_SECRET = "env-s3cr3t-one", "env-s3cr3t-two"


def script_job(make_job, tenant, env):
    return make_job(tenant, url="", kind="script", script_language="python", script_source="print(1)\n",
                    script_env=env)


def test_a_scripts_environment_never_appears_in_clear_in_versions_and_rolls_back(api, tenant, make_job,
                                                                                 member_client):
    job = script_job(make_job, tenant, {"REGION": "eu", "TOKEN": ENV_SECRET})
    patch(api, job, {"script": {"language": "python", "source": "print(1)\n",
                                "env": {"REGION": "us", "TOKEN": NEW_ENV_SECRET}}})
    viewer = member_client(tenant, "viewer")
    shown = json.dumps([viewer.get(f"/api/v1/jobs/{job.pk}/versions/").json(),
                        viewer.get(f"/api/v1/jobs/{job.pk}/versions/1/").json(),
                        viewer.get(f"/api/v1/jobs/{job.pk}/versions/2/").json()])
    with connection.cursor() as cursor:
        cursor.execute("SELECT snapshot::text, changes::text, secrets FROM jobs_jobversion WHERE job_id = %s",
                       [job.pk])
        stored = json.dumps(cursor.fetchall())
    for secret in (ENV_SECRET, NEW_ENV_SECRET, '"eu"', '"us"'):
        assert secret not in shown and secret not in stored, secret
    v2 = versions(api, job)[0]
    assert v2["changes"]["script_env"] == {"from": {"REGION": "••••", "TOKEN": "••••"},
                                           "to": {"REGION": "••••", "TOKEN": "••••"}}
    response = api.post(f"/api/v1/jobs/{job.pk}/versions/1/rollback/")
    assert response.status_code == 201, response.content
    job.refresh_from_db()
    assert job.script_env == {"REGION": "eu", "TOKEN": ENV_SECRET}


def _migration():
    import importlib

    return importlib.import_module("apps.jobs.migrations.0012_jobversion_secret_fields_masked")


def test_the_migration_masks_old_versions_and_their_rollback_still_restores_the_secret(api, tenant, make_job):
    from django.apps import apps

    job = script_job(make_job, tenant, {"TOKEN": NEW_ENV_SECRET})
    patch(api, job, {"name": "renamed"})
    # A version as kept before the registry of secrets: the environment in clear.
    v1 = JobVersion.objects.get(job=job, number=1)
    clear = {**v1.snapshot, "script_env": {"TOKEN": ENV_SECRET}}
    JobVersion.objects.filter(pk=v1.pk).update(
        snapshot=clear, changes={"script_env": {"from": {"TOKEN": "older"}, "to": {"TOKEN": ENV_SECRET}}},
        secrets={"auth": {"type": "bearer", "token": TOKEN}})
    _migration().mask_version_secrets(apps, None)
    _migration().mask_version_secrets(apps, None)  # again: nothing left to change
    v1.refresh_from_db()
    assert v1.snapshot["script_env"] == {"TOKEN": "••••"}
    assert v1.changes["script_env"] == {"from": {"TOKEN": "••••"}, "to": {"TOKEN": "••••"}}
    assert v1.secrets == {"auth": {"type": "bearer", "token": TOKEN}, "script_env": {"TOKEN": ENV_SECRET}}
    assert ENV_SECRET not in json.dumps(api.get(f"/api/v1/jobs/{job.pk}/versions/1/").json())
    assert api.post(f"/api/v1/jobs/{job.pk}/versions/1/rollback/").status_code == 201
    job.refresh_from_db()
    assert job.script_env == {"TOKEN": ENV_SECRET} and job.name == v1.snapshot["name"]


def test_a_version_that_kept_a_secret_masked_only_refuses_the_rollback(api, tenant, make_job):
    job = script_job(make_job, tenant, {"TOKEN": ENV_SECRET})
    patch(api, job, {"name": "renamed"})
    JobVersion.objects.filter(job=job, number=1).update(secrets=None)
    response = api.post(f"/api/v1/jobs/{job.pk}/versions/1/rollback/")
    assert response.status_code == 409 and error_of(response)["code"] == "version_conflict"
    assert "script_env" in error_of(response)["message"]
    job.refresh_from_db()
    assert (job.name, job.script_env) == ("renamed", {"TOKEN": ENV_SECRET})


def test_rollback_is_validated_and_refused_when_an_upstream_is_gone(api, tenant):
    upstream = create(api, tenant, name="upstream")
    job = create(api, tenant, name="downstream", dependencies=[{"job": str(upstream.pk)}])
    patch(api, job, {"dependencies": []})
    assert api.delete(f"/api/v1/jobs/{upstream.pk}/").status_code == 204
    response = api.post(f"/api/v1/jobs/{job.pk}/versions/1/rollback/")
    assert response.status_code == 409 and error_of(response)["code"] == "version_conflict"
    missing = api.post(f"/api/v1/jobs/{job.pk}/versions/9/rollback/")
    assert missing.status_code == 404 and error_of(missing)["code"] == "not_found"


def test_a_rollback_is_validated_as_an_edit(api, tenant):
    job = create(api, tenant)
    patch(api, job, {"name": "renamed"})
    JobVersion.objects.filter(job=job, number=1).update(snapshot={**JobVersion.objects.get(job=job, number=1).snapshot,
                                                                  "timeout_seconds": 10**6})
    response = api.post(f"/api/v1/jobs/{job.pk}/versions/1/rollback/")
    assert response.status_code in (400, 402), response.content
    job.refresh_from_db()
    assert (job.name, job.version) == ("renamed", 2)


def test_another_tenants_versions_are_404(api, other_api, other_tenant):
    theirs = create(other_api, other_tenant)
    for method, path in [("get", "versions/"), ("get", "versions/1/"), ("post", "versions/1/rollback/")]:
        response = getattr(api, method)(f"/api/v1/jobs/{theirs.pk}/{path}")
        assert response.status_code == 404, (path, response.content)


def test_a_viewer_reads_versions_but_cannot_roll_back(api, tenant, member_client):
    job = create(api, tenant, name="a")
    patch(api, job, {"name": "b"})
    viewer = member_client(tenant, "viewer")
    assert viewer.get(f"/api/v1/jobs/{job.pk}/versions/").status_code == 200
    assert viewer.post(f"/api/v1/jobs/{job.pk}/versions/1/rollback/").status_code == 403
    developer = member_client(tenant, "developer")
    response = developer.post(f"/api/v1/jobs/{job.pk}/versions/1/rollback/")
    assert response.status_code == 201
    assert response.json()["author"] == {"kind": "user", "id": str(developer.user.pk), "name": developer.user.email}


def test_a_job_made_outside_the_services_gets_its_baseline_on_first_change(api, tenant, make_job):
    job = make_job(tenant, name="legacy")
    patch(api, job, {"name": "changed"})
    v2, v1 = versions(api, job)
    assert (v1["number"], v1["source"], v2["number"]) == (1, "initial", 2)
    assert v2["changes"]["name"] == {"from": "legacy", "to": "changed"}


def test_the_crontab_import_keeps_version_1(api, tenant):
    response = api.post("/api/v1/jobs/import-crontab/", {
        "project": str(tenant.project.pk), "crontab": "*/5 * * * * curl https://example.com/a\n", "dry_run": False}, format="json")
    assert response.status_code == 201, response.content
    job = Job.objects.get(pk=response.json()["jobs"][0]["id"])
    assert list(job.versions.values_list("number", "source")) == [(1, "import")]


def test_an_admin_edit_keeps_a_version(api, tenant, rf):
    from django.contrib.admin.sites import site

    from apps.accounts.models import User

    job = create(api, tenant, name="before")
    operator = User.objects.create_superuser(email="ops@example.com", password="x" * 20)
    request = rf.post("/admin/")
    request.user = operator
    job.name = "by operator"
    site._registry[Job].save_model(request, job, form=None, change=True)
    latest = job.versions.order_by("-number").first()
    assert (latest.number, latest.source, latest.actor_user_id) == (2, "admin", operator.pk)
    assert latest.changes == {"name": {"from": "before", "to": "by operator"}}
    assert versions(api, job)[0]["author"]["kind"] == "operator"


def test_executions_name_the_version_they_ran_with(api, tenant):
    job = create(api, tenant, schedule={"type": "cron", "expression": "* * * * *"})
    patch(api, job, {"name": "v2"})
    manual = trigger_now(Job.objects.select_related("organization__plan").get(pk=job.pk))
    assert manual.job_version == 2
    job.refresh_from_db()
    claim_due(job.next_run_at + timedelta(seconds=1), batch_size=10)
    scheduled = Execution.objects.get(job=job, trigger="schedule")
    assert scheduled.job_version == 2
    shown = api.get(f"/api/v1/executions/{scheduled.pk}/").json()
    assert shown["job_version"] == 2


def test_the_scheduler_carries_versions_without_a_query_per_run(tenant, make_job):
    now = timezone.now()
    for jobs in (1, 20):
        made = [make_job(tenant, cron_expression="* * * * *", next_run_at=now, version=7) for _ in range(jobs)]
        with CaptureQueriesContext(connection) as queries:
            claim_due(now + timedelta(seconds=1), batch_size=100)
        counts = len(queries)
        assert set(Execution.objects.filter(job__in=made).values_list("job_version", flat=True)) == {7}
        Execution.objects.all().delete()
        Job.objects.filter(pk__in=[j.pk for j in made]).update(enabled=False)
        if jobs == 1:
            one_job = counts
    assert counts == one_job


def test_the_schema_documents_versions(api):
    paths = api.get("/api/v1/schema/?format=json").json()["paths"]
    assert "get" in paths["/api/v1/jobs/{id}/versions/"]
    assert "get" in paths["/api/v1/jobs/{id}/versions/{number}/"]
    rollback = paths["/api/v1/jobs/{id}/versions/{number}/rollback/"]["post"]
    assert {"201", "402", "404", "409"} <= set(rollback["responses"])
