"""Secrets at rest: encrypted in the table, readable after a key rotation, old key removable."""

import io

import pytest
from django.core.management import call_command
from django.db import connection

from apps.accounts.rotation import encrypted_fields, pending
from apps.jobs.models import Job
from cronsvc.crypto import new_key

KEY_A, KEY_B = new_key(), new_key()


@pytest.fixture
def key_a(settings):
    """Key A only, set before the tenant (and its project's signing secret) is made."""
    settings.ENCRYPTION_KEYS = [KEY_A]


def raw_column(model, pk, column):
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM {model._meta.db_table} WHERE id = %s", [pk])
        return cursor.fetchone()[0]


def test_every_encrypted_field_is_found():
    found = {model._meta.label: set(names) for model, names in encrypted_fields()}
    assert {"auth", "secret_headers"} <= found["jobs.Job"]
    assert "signing_secrets" in found["projects.Project"]


@pytest.mark.django_db
def test_values_are_not_stored_in_clear(key_a, settings, tenant, make_job):
    job = make_job(tenant, auth={"type": "bearer", "token": "tok-in-clear-never"},
                   secret_headers={"X-Api-Key": "hdr-in-clear-never"})
    assert "tok-in-clear-never" not in raw_column(Job, job.pk, "auth")
    assert "hdr-in-clear-never" not in raw_column(Job, job.pk, "secret_headers")
    job.refresh_from_db()
    assert job.auth["token"] == "tok-in-clear-never"
    assert job.secret_headers == {"X-Api-Key": "hdr-in-clear-never"}


@pytest.mark.django_db
def test_rotation_then_old_key_removed(key_a, settings, tenant, make_job):
    jobs = [make_job(tenant, auth={"type": "basic", "username": f"u{i}", "password": f"p{i}"},
                     secret_headers={"Authorization": f"Bearer t{i}"}) for i in range(7)]
    project = tenant.project
    project.refresh_from_db()
    secrets_before = project.signing_secrets
    assert secrets_before  # provisioning gave the project a signing secret, under key A

    settings.ENCRYPTION_KEYS = [KEY_B, KEY_A]
    assert pending()["jobs.Job"] == 14
    out = io.StringIO()
    call_command("rotate_encryption_keys", "--batch-size", "3", stdout=out)
    assert "done" in out.getvalue()
    assert pending() == {}

    settings.ENCRYPTION_KEYS = [KEY_B]  # key A removed
    for i, job in enumerate(jobs):
        job.refresh_from_db()
        assert job.auth == {"type": "basic", "username": f"u{i}", "password": f"p{i}"}
        assert job.secret_headers == {"Authorization": f"Bearer t{i}"}
    project.refresh_from_db()
    assert project.signing_secrets == secrets_before


@pytest.mark.django_db
def test_rotation_resumes_after_a_cursor(key_a, settings, tenant, make_job):
    jobs = sorted((make_job(tenant, auth={"type": "bearer", "token": f"t{i}"}) for i in range(4)),
                  key=lambda j: j.pk)
    settings.ENCRYPTION_KEYS = [KEY_B, KEY_A]
    call_command("rotate_encryption_keys", "--resume", f"jobs.Job:{jobs[1].pk}", stdout=io.StringIO())
    assert pending()["jobs.Job"] == 2  # jobs 0 and 1 were before the cursor
    call_command("rotate_encryption_keys", stdout=io.StringIO())  # a second run finishes the work
    assert pending() == {}
