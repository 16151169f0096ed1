"""One registry of secrets (cronsvc/secrets.py), proven.

A unique marker is planted in every secret field of every model the registry declares
(driven by the registry itself: a field added there is planted here, or this test fails
until it is given a way to plant one), through the paths that copy secrets around (job
versions and their diffs, audit events, notifications, the organization export); then
every output surface is read and must carry none of the markers:

- every URL of the URL configuration (API incl. versions, diffs, exports and the audit
  log; every page; the Django admin's changelists, change pages and history pages), filled
  with the organization's own ids, as each role (owner, admin, developer, viewer), as an
  API key and as a staff operator;
- the export's archive, the stored audit payloads, the notification payloads each channel
  kind sends, and every log line written during the run (caplog).

A guard fails when a model of ours has an encrypted or secret-looking field that is neither
in the registry nor explained in cronsvc.secrets.NOT_SECRET.
"""

import gzip
import json
import logging
import re
import secrets as pysecrets

import pytest
from django.apps import apps
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts import gdpr
from apps.accounts.encryption import EncryptedField
from apps.accounts.models import AuditEvent, EncryptedTOTPDevice, Membership, OrganizationSSO, User
from apps.accounts.audit import record_audit
from apps.jobs import versions
from apps.jobs.models import JobVersion
from cronsvc import secrets as registry

from .test_isolation import PUBLIC_BY_DESIGN, fill, url_patterns
from .world import build_world

pytestmark = pytest.mark.django_db

SECRET_LOOKING = re.compile(r"secret|token|passw|key|credential|auth|cookie|signature|salt|private|env|dsn|webhook",
                            re.I)
# How a marker is planted where a field's value must have a shape of its own (the pages
# parse them); other fields get the marker itself (WHOLE) or {"X_MARKED": marker} (MAPPING).
PLANTS = {
    ("jobs.Job", "auth"): lambda m: {"type": "bearer", "token": m},
    ("jobs.Job", "secret_headers"): lambda m: {"X-Api-Key": m},
    ("jobs.Job", "script_env"): lambda m: {"API_TOKEN": m},
    ("jobs.JobVersion", "secrets"): lambda m: {"auth": {"type": "bearer", "token": m},
                                                "script_env": {"API_TOKEN": m}},
    ("projects.Project", "signing_secrets"): lambda m: [f"whsec_{m}"],
    ("notifications.Channel", "config"): lambda m: {"url": f"https://hooks.example.invalid/{m}",
                                                     "secret": f"whsec_{m}"},
    ("notifications.EventSubscription", "url"): lambda m: f"https://events.example.invalid/{m}",
    ("notifications.EventSubscription", "secret"): lambda m: f"whsec_{m}",
}
SKIPPED_URLS = ("logout",)  # a GET would end the session the sweep reads with
ROLES = ("owner", "admin", "developer", "viewer")


def new_marker():
    return pysecrets.token_hex(16)  # hex: a TOTP seed must be, and it is unique


def plant_value(secret, marker):
    plant = PLANTS.get((secret.model, secret.field))
    if plant:
        return plant(marker)
    return {"X_MARKED": marker} if secret.shape == registry.MAPPING else marker


# --- the registry and the models agree


def _our_models():
    return [m for m in apps.get_models() if m.__module__.startswith("apps.")]


def test_every_declared_secret_is_a_field_encrypted_at_rest():
    for secret in registry.SECRETS:
        field = apps.get_model(secret.model)._meta.get_field(secret.field)
        assert isinstance(field, EncryptedField), f"{secret.model}.{secret.field} is declared secret but kept in clear"


def test_every_encrypted_or_secret_looking_field_is_declared():
    missing = []
    for model in _our_models():
        label = model._meta.label
        for field in model._meta.concrete_fields:
            if field.is_relation:
                continue
            looks = isinstance(field, EncryptedField) or SECRET_LOOKING.search(field.name)
            if looks and not registry.find(label, field.name) and (label, field.name) not in registry.NOT_SECRET:
                missing.append(f"{label}.{field.name}")
    assert not missing, (
        "Fields that look secret but are not in the registry of secrets: declare them in cronsvc/secrets.py "
        "(SECRETS, or NOT_SECRET with the reason they hold no secret):\n" + "\n".join(missing))
    for label, name in registry.NOT_SECRET:
        apps.get_model(label)._meta.get_field(name)  # no stale explanation


def test_the_guard_sees_a_new_secret_field(monkeypatch):
    """A field the registry forgets is reported (the guard above can fail)."""
    monkeypatch.setattr(registry, "_BY_MODEL", {k: v for k, v in registry._BY_MODEL.items() if k != "jobs.Job"})
    with pytest.raises(AssertionError, match="jobs.Job.script_env"):
        test_every_encrypted_or_secret_looking_field_is_declared()


# --- a world with a marker in every secret field


class Planted:
    def __init__(self, world):
        self.world = world
        self.markers = []

    def marker(self):
        value = new_marker()
        self.markers.append(value)
        return value

    def leaks(self, text):
        return [m for m in self.markers if m in text]


def _rows_needing_a_marker(world):
    """A row of each model the registry names, so every secret field has one to hold a marker."""
    org, owner = world.a.organization, world.a.owner
    OrganizationSSO.objects.create(organization=org, issuer="https://idp.example.com", client_id="cronsvc",
                                   client_secret="replaced", allowed_domains="example.com")
    EncryptedTOTPDevice.objects.create(user=owner, name="phone", confirmed=True)
    job = world.objects["job"]
    before = versions.definition(job, [])
    job.name = f"{job.name} v2"
    versions.record(job, before, [], author=versions.Author(user=owner), source=JobVersion.Source.PAGE)
    job.save()


def plant(world, planted):
    for secret in registry.SECRETS:
        model = apps.get_model(secret.model)
        rows = list(model._base_manager.values_list("pk", flat=True))
        assert rows, f"no {secret.model} row to plant a marker in {secret.field}: add one to _rows_needing_a_marker"
        for pk in rows:
            model._base_manager.filter(pk=pk).update(**{secret.field: plant_value(secret, planted.marker())})
    # Each field really holds its marker (read back through the field, decrypted).
    for secret in registry.SECRETS:
        stored = json.dumps(list(apps.get_model(secret.model)._base_manager.values_list(secret.field, flat=True)))
        assert planted.leaks(stored), f"{secret.model}.{secret.field} holds no marker"


def copy_secrets_around(world, planted):
    """The paths that copy secrets: a change (a version, its diff), an audit event naming
    secret fields, a notification to each channel kind, an export."""
    from apps.jobs.models import Job

    job = Job.objects.get(pk=world.objects["job"].pk)
    owner = world.a.owner
    before = versions.definition(job, [])
    job.auth = plant_value(registry.find("jobs.Job", "auth"), planted.marker())
    job.script_env = plant_value(registry.find("jobs.Job", "script_env"), planted.marker())
    job.secret_headers = plant_value(registry.find("jobs.Job", "secret_headers"), planted.marker())
    versions.record(job, before, [], author=versions.Author(user=owner), source=JobVersion.Source.PAGE)
    job.save()
    record_audit(world.a.organization, "job.update", target=job, actor_user=owner,
                 data={"auth": job.auth, "script_env": job.script_env, "secret_headers": job.secret_headers,
                       "signing_secrets": job.project.signing_secrets})
    world.objects["job"] = job
    notifications = _notify(world, job)
    export = world.objects["export"]
    gdpr.run_export(export, now=timezone.now())
    return notifications


def _notify(world, job):
    """The alert rows for every channel, each sent once (a refused address: the error kept
    on the row, shown on the notification log), and what each channel kind would post."""
    from apps.notifications import sending
    from apps.notifications.alerts import alert_rows
    from apps.notifications.models import Channel, Notification
    from cronsvc.notify import formats

    channels = list(Channel.objects.filter(project=job.project))
    rows = Notification.objects.bulk_create(alert_rows("failure", job, world.objects["execution"], channels))
    for row in rows:
        sending.deliver_notification(row.pk)
    payloads = []
    for row in Notification.objects.filter(pk__in=[r.pk for r in rows]):
        payloads += [row.subject, row.text, row.data, row.last_error,
                     formats.slack_payload(row.subject, row.text), formats.discord_payload(row.subject, row.text),
                     formats.telegram_payload("@channel", row.text),
                     formats.webhook_payload(row.event, row.subject, row.text, row.data, "now")]
    return json.dumps(payloads, default=str)


@pytest.fixture
def planted_world(make_tenant, settings, caplog):
    settings.OPERATOR_2FA = False
    settings.OUTBOUND_ALLOW_PRIVATE = False
    caplog.set_level(logging.DEBUG)
    world = build_world(make_tenant)
    _rows_needing_a_marker(world)
    planted = Planted(world)
    plant(world, planted)
    planted.notifications = copy_secrets_around(world, planted)
    return planted


# --- the surfaces


def _body(response):
    body = b"".join(response.streaming_content) if response.streaming else response.content
    if response.get("Content-Type", "").startswith("application/gzip") or body[:2] == b"\x1f\x8b":
        body = gzip.decompress(body)
    return body.decode("utf-8", errors="replace")


def _client_as(world, who):
    client = APIClient(raise_request_exception=False)
    if who == "api_key":
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {world.a.full_api_key}")
        return client
    if who == "operator":
        user = User.objects.create_superuser(email=f"ops-{new_marker()[:8]}@example.com", password=new_marker())
    elif who == "owner":
        user = world.a.owner
    else:
        user = User.objects.create_user(email=f"{who}-{new_marker()[:8]}@example.com")
        Membership.objects.create(user=user, organization=world.a.organization, role=who)
    client.force_login(user)
    return client


def sweep(world, client, leaks):
    """GET every URL of the configuration with the organization's ids: [(url, status)] read,
    and the problems (markers shown, server errors)."""
    read, problems = [], []
    for template, name, _ in url_patterns():
        if name in PUBLIC_BY_DESIGN or any(skip in name for skip in SKIPPED_URLS):
            continue
        try:
            url = fill(world, template)
        except KeyError:
            continue  # tests/security/test_isolation.py reports a URL it cannot fill
        response = client.get(url)
        text = _body(response)
        read.append((url, response.status_code))
        if response.status_code == 500:  # a 503 (no archive storage configured) is an answer
            problems.append(f"GET {url} -> {response.status_code}")
        shown = leaks(text)
        if shown:
            problems.append(f"GET {url} -> {response.status_code} shows planted secrets {shown[:2]}")
    return read, problems


@pytest.mark.parametrize("who", [*ROLES, "api_key", "operator"])
def test_no_surface_shows_a_planted_secret(planted_world, who, caplog):
    world = planted_world.world
    read, problems = sweep(world, _client_as(world, who), planted_world.leaks)
    assert not problems, "\n".join(problems)
    answered = [url for url, status in read if status == 200]
    if who == "operator":
        assert sum(url.startswith("/admin/") for url in answered) > 50  # changelists, change and history pages
        for path in ("/admin/jobs/job/", "/admin/jobs/jobversion/", "/admin/projects/project/",
                     "/admin/notifications/channel/", "/admin/accounts/organizationsso/"):
            assert path in answered
    else:
        assert len(answered) > 40, answered
        if who != "api_key":
            job = world.objects["job"].pk
            read_by_all = (f"/jobs/{job}/", f"/jobs/{job}/versions/", f"/api/v1/jobs/{job}/versions/1/",
                           f"/api/v1/jobs/{job}/versions/", "/api/v1/notifications/", "/api/v1/channels/")
            for path in (*read_by_all, *(("/api/v1/audit-events/",) if who in ("owner", "admin") else ())):
                assert path in answered, path
    logged = [*caplog.get_records("setup"), *caplog.records]  # planting and copying, then the sweep
    assert logged and not planted_world.leaks("\n".join(r.getMessage() for r in logged)), "a log line"


def test_stored_copies_and_payloads_hold_no_planted_secret(planted_world):
    world = planted_world.world
    assert not planted_world.leaks(json.dumps(list(AuditEvent.objects.values_list("data", flat=True))))
    event = AuditEvent.objects.filter(organization=world.a.organization, action="job.update").latest("created_at")
    assert event.data["auth"] == {"type": "bearer", "token": registry.MASK}
    assert event.data["script_env"] == {"API_TOKEN": registry.MASK}
    assert event.data["signing_secrets"] == registry.MASK
    versions_text = json.dumps(list(JobVersion.objects.values_list("snapshot", "changes")))
    assert not planted_world.leaks(versions_text)
    assert "script_env" in JobVersion.objects.filter(job=world.objects["job"]).latest("number").changes
    assert not planted_world.leaks(planted_world.notifications), "a notification payload"
    world.objects["export"].refresh_from_db()
    exported = gzip.decompress(world.objects["export"].archive).decode()
    assert "jobs.JobVersion" in exported and not planted_world.leaks(exported)


def test_the_sweep_finds_a_marker_where_one_shows(planted_world):
    """A marker in a field that is not secret (a plain header) is found: the sweep can fail."""
    world = planted_world.world
    job = world.objects["job"]
    shown = planted_world.marker()
    job.headers = {"X-Plain": shown}
    job.save(update_fields=["headers"])
    _, problems = sweep(world, _client_as(world, "viewer"), planted_world.leaks)
    assert any(f"/jobs/{job.pk}/" in problem and "shows planted secrets" in problem for problem in problems)
