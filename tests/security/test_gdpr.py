"""Customer data rights: export everything (secrets masked), delete after a grace period
(nothing of the organization left in any table), purge old audit events."""

import gzip
import json
from datetime import timedelta

import pytest
from django.db.models import QuerySet
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts import gdpr
from apps.accounts.models import AuditEvent, DataExport, ErasedOrganization, Membership, Organization, User
from apps.executions.models import Execution
from apps.jobs.models import Job
from apps.jobs.services import pause_job

from .world import SECRET_HEADER, SECRET_TOKEN, build_world

pytestmark = pytest.mark.django_db


def owner_client(tenant):
    client = APIClient()
    client.force_login(tenant.owner)
    return client


def rows_of(organization):
    """{model label: rows} of every table holding the organization's data."""
    counts = {}
    for model, lookup in gdpr.organization_tables():
        count = model._base_manager.filter(**{lookup: organization.pk}).count()
        if count:
            counts[model._meta.label] = count
    return counts


def test_export_holds_everything_but_secrets(make_tenant, django_capture_on_commit_callbacks):
    world = build_world(make_tenant)
    client = owner_client(world.a)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post("/api/v1/organization/exports/")
    assert response.status_code == 202 and response.json()["status"] == "pending"
    export = DataExport.objects.get(pk=response.json()["id"])
    assert len(callbacks) == 1  # the background task is queued after commit
    gdpr.run_export(export, now=timezone.now())  # what that task runs

    status = client.get(f"/api/v1/organization/exports/{export.pk}/").json()
    assert status["status"] == "ready" and status["size_bytes"] > 0
    download = client.get(f"/api/v1/organization/exports/{export.pk}/download/")
    assert download.status_code == 200 and download["Content-Type"] == "application/gzip"
    data = json.loads(gzip.decompress(download.content))

    a = world.objects
    assert data["organization"]["name"] == a["organization"].name
    assert {m["email"] for m in data["members"]} == {a["owner"].email, a["member"].email}
    tables = data["tables"]
    assert a["job"].name in {row["name"] for row in tables["jobs.Job"]}
    assert str(a["execution"].pk) in {str(row["id"]) for row in tables["executions.Execution"]}
    assert tables["executions.Attempt"]  # reached through the execution
    assert "job.create" in {row["action"] for row in tables["accounts.AuditEvent"]}
    assert a["project"].name in {row["name"] for row in tables["projects.Project"]}
    text = json.dumps(data)
    assert a["invitation"].email in {row["email"] for row in tables["accounts.Invitation"]}
    for secret in (SECRET_TOKEN, SECRET_HEADER, a["api_key"].secret_hash, a["invitation"].token_hash):
        assert secret not in text
    # Secret fields are exported masked (cronsvc.secrets): which secret, never its value.
    assert {row["signing_secrets"] for row in tables["projects.Project"]} == {"••••"}
    job_row = next(row for row in tables["jobs.Job"] if row["name"] == a["job"].name)
    assert (job_row["auth"], job_row["secret_headers"]) == ({"type": "bearer", "token": "••••"}, {"X-Api-Key": "••••"})
    # Nothing of B in A's export.
    assert world.b.organization.name not in text and world.b.owner.email not in text


def test_only_an_owner_exports_or_deletes(make_tenant, api, tenant):
    member = User.objects.create_user(email="admin-not-owner@example.com")
    Membership.objects.create(user=member, organization=tenant.organization, role=Membership.Role.ADMIN)
    client = APIClient()
    client.force_login(member)
    for do in (lambda c: c.post("/api/v1/organization/exports/"), lambda c: c.post("/api/v1/organization/deletion/")):
        assert do(client).status_code == 403
        assert do(api).status_code == 403  # an API key is not an owner
    assert Organization.objects.get(pk=tenant.organization.pk).erase_after is None


def test_deletion_stops_jobs_at_once_and_erases_after_the_grace(make_tenant, settings):
    settings.ORG_DELETION_GRACE_DAYS = 7
    world = build_world(make_tenant)
    a = world.a.organization
    client = owner_client(world.a)
    response = client.post("/api/v1/organization/deletion/")
    assert response.status_code == 202
    assert not Job.objects.filter(organization=a, enabled=True).exists()
    assert not Job.objects.filter(organization=a, due__next_run_at__isnull=False).exists()

    a.refresh_from_db()
    now = timezone.now()
    assert a.erase_after > now + timedelta(days=6)
    assert gdpr.erase_due_organizations(now=now + timedelta(days=6)) == 0  # still in its grace
    assert rows_of(a)
    assert gdpr.erase_due_organizations(now=now + timedelta(days=8)) == 1

    assert rows_of(a) == {}  # every table with a key to the organization (or to its rows)
    assert not Organization.objects.filter(pk=a.pk).exists()
    assert not User.objects.filter(email__in=[world.a.owner.email, world.objects["member"].email]).exists()
    erased = ErasedOrganization.objects.get(organization_id=a.pk)
    assert erased.plan_code == "enterprise"
    assert a.name not in json.dumps([f.value_to_string(erased) for f in ErasedOrganization._meta.fields])
    # B untouched.
    assert Organization.objects.filter(pk=world.b.organization.pk).exists()
    assert Job.objects.filter(organization=world.b.organization).count() == Job.objects.count()


def test_deletion_can_be_cancelled(tenant, make_job):
    make_job(tenant)
    client = owner_client(tenant)
    client.post("/api/v1/organization/deletion/")
    assert client.get("/api/v1/organization/deletion/").json()["erase_after"] is not None
    assert client.delete("/api/v1/organization/deletion/").json() == {"erase_after": None}
    assert gdpr.erase_due_organizations(now=timezone.now() + timedelta(days=30)) == 0
    assert Organization.objects.filter(pk=tenant.organization.pk).exists()
    actions = set(AuditEvent.objects.filter(organization=tenant.organization).values_list("action", flat=True))
    assert {"organization.delete_requested", "organization.delete_cancelled"} <= actions


def test_cancelling_the_deletion_resumes_the_jobs_it_paused_and_only_those(tenant, make_job):
    running = make_job(tenant, name="running", cron_expression="0 3 * * *")
    held = make_job(tenant, name="held by its owner", cron_expression="0 4 * * *")
    pause_job(held, reason="waiting for the new endpoint")
    client = owner_client(tenant)
    client.post("/api/v1/organization/deletion/")
    running.refresh_from_db()
    assert not running.enabled and running.next_run_at is None

    assert client.delete("/api/v1/organization/deletion/").status_code == 200
    running.refresh_from_db()
    held.refresh_from_db()
    assert running.enabled and running.paused_reason == "" and running.next_run_at > timezone.now()
    assert not held.enabled and held.paused_reason == "waiting for the new endpoint"
    cancelled = AuditEvent.objects.get(organization=tenant.organization, action="organization.delete_cancelled")
    assert cancelled.data == {"resumed_jobs": 1}


def test_a_user_in_another_organization_is_kept(make_tenant):
    a, b = make_tenant(), make_tenant()
    shared = User.objects.create_user(email="consultant@example.com")
    Membership.objects.create(user=shared, organization=a.organization, role=Membership.Role.ADMIN)
    Membership.objects.create(user=shared, organization=b.organization, role=Membership.Role.ADMIN)
    gdpr.erase_organization(a.organization, now=timezone.now())
    assert User.objects.filter(pk=shared.pk).exists()
    assert Membership.objects.filter(user=shared).count() == 1


def test_audit_events_are_purged_after_the_retention(tenant, settings):
    settings.AUDIT_RETENTION_DAYS = 365
    now = timezone.now()
    old = AuditEvent.objects.create(organization=tenant.organization, action="old",
                                    created_at=now - timedelta(days=366))
    recent = AuditEvent.objects.create(organization=tenant.organization, action="recent",
                                       created_at=now - timedelta(days=364))
    assert gdpr.purge_audit_events(now=now, batch_size=1) >= 1
    assert not AuditEvent.objects.filter(pk=old.pk).exists()
    assert AuditEvent.objects.filter(pk=recent.pk).exists()


def test_housekeeping_is_scheduled():
    from django_celery_beat.models import PeriodicTask

    tasks = set(PeriodicTask.objects.values_list("task", flat=True))
    assert {"apps.accounts.tasks.erase_deleted_organizations", "apps.accounts.tasks.purge_audit_events"} <= tasks


def test_the_settings_page_exports_and_deletes(tenant, make_job, client):
    job = make_job(tenant)
    client.force_login(tenant.owner)
    assert client.get("/settings/data/").status_code == 200
    assert client.post("/settings/data/export/").status_code == 302
    export = DataExport.objects.get(organization=tenant.organization)
    gdpr.run_export(export, now=timezone.now())
    response = client.get(f"/settings/data/exports/{export.pk}/")
    assert response.status_code == 200 and json.loads(gzip.decompress(response.content))["tables"]["jobs.Job"]
    client.post("/settings/data/delete/", {"confirm": "not the name"})
    assert Organization.objects.get(pk=tenant.organization.pk).erase_after is None
    client.post("/settings/data/delete/", {"confirm": tenant.organization.name})
    assert Organization.objects.get(pk=tenant.organization.pk).erase_after is not None
    job.refresh_from_db()
    assert not job.enabled and job.next_run_at is None


def test_a_big_export_is_streamed_in_chunks_and_complete(make_tenant, monkeypatch):
    world = build_world(make_tenant)
    org, job, now = world.a.organization, world.objects["job"], timezone.now()
    Execution.objects.bulk_create(
        Execution(job=job, organization=org, scheduled_for=now - timedelta(minutes=i), status=Execution.Status.DEAD,
                  attempt=1, finished_at=now) for i in range(2, 25))
    expected = {str(pk) for pk in Execution.objects.filter(organization=org).values_list("pk", flat=True)}
    monkeypatch.setattr(gdpr, "EXPORT_CHUNK_SIZE", 5)  # many chunks for a few rows
    chunk_sizes = []
    real_iterator = QuerySet.iterator
    monkeypatch.setattr(QuerySet, "iterator",
                        lambda qs, chunk_size=None: chunk_sizes.append(chunk_size) or real_iterator(qs, chunk_size))

    export = gdpr.run_export(DataExport.objects.create(organization=org), now=now)

    assert export.status == DataExport.Status.READY
    data = json.loads(gzip.decompress(export.archive))
    assert {str(row["id"]) for row in data["tables"]["executions.Execution"]} == expected
    assert len(data["tables"]["executions.Execution"]) == len(expected) == 24
    assert data["tables"]["executions.Attempt"] and data["tables"]["jobs.Job"]
    assert chunk_sizes and set(chunk_sizes) == {5}  # every table was read chunk by chunk
