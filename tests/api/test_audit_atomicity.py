"""A change and its audit event commit together, through the API and the pages alike: when
either cannot be written (here PostgreSQL itself refuses it, by a trigger this test adds)
neither is left behind."""

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from apps.accounts.apikeys import create_api_key
from apps.accounts.models import AuditEvent, DataExport, Invitation, Membership, OrganizationSSO, User
from apps.badges.models import Badge
from apps.executions.models import Execution
from apps.jobs.models import Job
from apps.jobs.services import pause_job
from apps.notifications.models import Channel, EventSubscription, NotificationRule
from apps.notifications.services import save_channel
from apps.projects.models import Project
from tests.web.conftest import job_form

pytestmark = [
    pytest.mark.django_db(transaction=True),  # the views' own transactions, as in production
    pytest.mark.off_contract,  # each test makes a write fail: the 500 it provokes is no operation's answer
]


@pytest.fixture
def refuse():
    """refuse(table, operation): PostgreSQL raises on every ``operation`` on ``table`` from now
    until the test ends."""
    made = []

    def make(table, operation):
        name = f"test_refuse_{operation.lower()}_{table}"
        with connection.cursor() as cursor:
            cursor.execute("CREATE OR REPLACE FUNCTION test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ "
                           "BEGIN RAISE EXCEPTION 'refused by the test'; END $$")
            cursor.execute(f'CREATE TRIGGER "{name}" BEFORE {operation} ON "{table}" '
                           "FOR EACH ROW EXECUTE FUNCTION test_refuse()")
        made.append((name, table))

    yield make
    with connection.cursor() as cursor:
        for name, table in made:
            cursor.execute(f'DROP TRIGGER IF EXISTS "{name}" ON "{table}"')


@pytest.fixture
def browser(tenant):
    client = Client(raise_request_exception=False)
    client.force_login(tenant.owner)
    return client


@pytest.fixture
def api_500(api):
    api.raise_request_exception = False
    return api


AUDIT = AuditEvent._meta.db_table


def _job(make_job, tenant, **fields):
    return make_job(tenant, name="before", **fields)


def _name(job):
    job.refresh_from_db()
    return job.name


def _state(job):
    job.refresh_from_db()
    return job.enabled


def _paused(make_job, tenant):
    job = _job(make_job, tenant)
    pause_job(job, reason="paused by the test")
    return job


# (name, ask(client, tenant, job_or_project), what must hold afterwards)
CHANGES_REFUSED_AT_THE_AUDIT = {
    "api job update": (lambda c, t, j: c.patch(f"/api/v1/jobs/{j.pk}/", {"name": "after"}, format="json"),
                       lambda j: _name(j) == "before"),
    "api job pause": (lambda c, t, j: c.post(f"/api/v1/jobs/{j.pk}/pause/"), lambda j: _state(j) is True),
    "api job resume": (lambda c, t, j: c.post(f"/api/v1/jobs/{j.pk}/resume/"), lambda j: _state(j) is False),
    "page job edit": (lambda c, t, j: c.post(f"/jobs/{j.pk}/edit/", job_form(t, name="after")),
                      lambda j: _name(j) == "before"),
    "page job pause": (lambda c, t, j: c.post(f"/jobs/{j.pk}/pause/"), lambda j: _state(j) is True),
    "page job resume": (lambda c, t, j: c.post(f"/jobs/{j.pk}/resume/"), lambda j: _state(j) is False),
}


@pytest.mark.parametrize("case", sorted(CHANGES_REFUSED_AT_THE_AUDIT))
def test_a_job_change_whose_audit_event_fails_is_rolled_back(case, tenant, make_job, api_500, browser, refuse):
    ask, holds = CHANGES_REFUSED_AT_THE_AUDIT[case]
    job = _paused(make_job, tenant) if "resume" in case else _job(make_job, tenant)
    refuse(AUDIT, "INSERT")
    response = ask(api_500 if case.startswith("api") else browser, tenant, job)
    assert response.status_code == 500
    assert holds(job)


PROJECT_CHANGES_REFUSED_AT_THE_AUDIT = {
    "api project update": lambda c, p: c.patch(f"/api/v1/projects/{p.pk}/", {"name": "after"}, format="json"),
    "page project edit": lambda c, p: c.post(f"/settings/projects/{p.pk}/", {"name": "after", "slug": p.slug,
                                                                             "timezone": "UTC"}),
}


@pytest.mark.parametrize("case", sorted(PROJECT_CHANGES_REFUSED_AT_THE_AUDIT))
def test_a_project_change_whose_audit_event_fails_is_rolled_back(case, tenant, api_500, browser, refuse):
    project = tenant.project
    before = project.name
    refuse(AUDIT, "INSERT")
    response = PROJECT_CHANGES_REFUSED_AT_THE_AUDIT[case](api_500 if case.startswith("api") else browser, project)
    assert response.status_code == 500
    project.refresh_from_db()
    assert project.name == before


CREATES_REFUSED_AT_THE_AUDIT = {
    "api project create": (lambda c, t: c.post("/api/v1/projects/", {"name": "New one"}, format="json"),
                           lambda t: not Project.objects.filter(name="New one").exists()),
    "page project create": (lambda c, t: c.post("/settings/projects/new/", {"name": "New one", "timezone": "UTC"}),
                            lambda t: not Project.objects.filter(name="New one").exists()),
    "page job create": (lambda c, t: c.post("/jobs/new/", job_form(t, name="New one")),
                        lambda t: not Job.objects.filter(name="New one").exists()),
    "api invitation create": (lambda c, t: c.post("/api/v1/invitations/", {"email": "new-one@example.com"},
                                                  format="json"),
                              lambda t: not Invitation.objects.filter(email="new-one@example.com").exists()),
    "page invitation create": (lambda c, t: c.post("/settings/members/invite/", {"email": "new-one@example.com"}),
                               lambda t: not Invitation.objects.filter(email="new-one@example.com").exists()),
    "api event subscription create": (
        lambda c, t: c.post("/api/v1/event-subscriptions/", {"project": str(t.project.pk),
                                                             "url": "https://hooks.example.com/events"}, format="json"),
        lambda t: not EventSubscription.objects.filter(url="https://hooks.example.com/events").exists()),
}


@pytest.mark.parametrize("case", sorted(CREATES_REFUSED_AT_THE_AUDIT))
def test_a_create_whose_audit_event_fails_leaves_nothing(case, tenant, api_500, browser, refuse):
    ask, holds = CREATES_REFUSED_AT_THE_AUDIT[case]
    refuse(AUDIT, "INSERT")
    assert ask(api_500 if case.startswith("api") else browser, tenant).status_code == 500
    assert holds(tenant)


def test_a_duplicate_whose_audit_event_fails_leaves_no_copy(tenant, make_job, browser, refuse):
    job = _job(make_job, tenant)
    refuse(AUDIT, "INSERT")
    assert browser.post(f"/jobs/{job.pk}/duplicate/").status_code == 500
    assert not Job.objects.filter(name="before (copy)").exists()


# The delete's audit event is written first (it names what goes): here the delete fails.
DELETES = {
    "api job delete": (Job, lambda t, j: f"/api/v1/jobs/{j.pk}/", "delete"),
    "page job delete": (Job, lambda t, j: f"/jobs/{j.pk}/delete/", "post"),
    "api project delete": (Project, lambda t, j: f"/api/v1/projects/{t.project.pk}/?force=true", "delete"),
    "page project delete": (Project, lambda t, j: f"/settings/projects/{t.project.pk}/delete/", "post"),
}


@pytest.mark.parametrize("case", sorted(DELETES))
def test_a_delete_that_fails_leaves_no_audit_event(case, tenant, make_job, api_500, browser, refuse):
    model, url, method = DELETES[case]
    job = _job(make_job, tenant)
    refuse(model._meta.db_table, "DELETE")
    client = api_500 if case.startswith("api") else browser
    data = {"force": "true"} if case == "page project delete" else {}
    assert getattr(client, method)(url(tenant, job), data).status_code == 500
    assert model.objects.count() >= 1
    assert not AuditEvent.objects.filter(action__endswith=".delete").exists()


def _other_member(tenant):
    user = User.objects.create_user(email="other-member@example.com")
    Membership.objects.create(user=user, organization=tenant.organization, role="developer")
    return user


def _finished_run(tenant, make_job):
    return Execution.objects.create(job=_job(make_job, tenant), organization=tenant.organization,
                                    status="succeeded", scheduled_for=timezone.now())


def _not_revoked(key):
    key.refresh_from_db()
    return key.revoked_at is None


def _channel(tenant):
    return save_channel(Channel(project=tenant.project), kind="email", name="before",
                        config={"to": ["ops@example.com"]})


def _channel_named_before(channel):
    return Channel.objects.filter(pk=channel.pk, name="before").exists()


def _named(organization, name):
    organization.refresh_from_db()
    return organization.name == name


def _secrets_kept(project, secrets):
    project.refresh_from_db()
    return project.signing_secrets == secrets


def _sso(tenant):
    return OrganizationSSO.objects.create(organization=tenant.organization, issuer="https://idp.example.com",
                                          client_id="cronsvc", client_secret="s3cret-at-rest",
                                          allowed_domains="example.com", default_role="viewer")


# Changes whose event was written after their own transaction until they went through
# apps.accounts.audit.audited: (name, make(tenant, make_job), ask(client, made), what must hold afterwards)
SERVICE_CHANGES_REFUSED_AT_THE_AUDIT = {
    "api key revoke": (lambda t, m: create_api_key(t.organization, "victim")[0],
                       lambda c, key: c.post(f"/api/v1/api-keys/{key.pk}/revoke/"), _not_revoked),
    "page key revoke": (lambda t, m: create_api_key(t.organization, "victim")[0],
                        lambda c, key: c.post(f"/settings/api-keys/{key.pk}/revoke/"), _not_revoked),
    "api member remove": (lambda t, m: _other_member(t), lambda c, user: c.delete(f"/api/v1/members/{user.pk}/"),
                          lambda user: Membership.objects.filter(user=user).exists()),
    "page member remove": (lambda t, m: _other_member(t),
                           lambda c, user: c.post(f"/settings/members/{user.pk}/remove/"),
                           lambda user: Membership.objects.filter(user=user).exists()),
    "api execution replay": (_finished_run, lambda c, run: c.post(f"/api/v1/executions/{run.pk}/replay/"),
                             lambda run: not Execution.objects.filter(replay_of=run).exists()),
    "api job badge": (lambda t, m: _job(m, t), lambda c, job: c.post(f"/api/v1/jobs/{job.pk}/badge/"),
                      lambda job: not Badge.objects.filter(job=job).exists()),
    "api channel update": (lambda t, m: _channel(t),
                           lambda c, channel: c.patch(f"/api/v1/channels/{channel.pk}/", {"name": "after"},
                                                      format="json"), _channel_named_before),
    "page channel edit": (lambda t, m: _channel(t),
                          lambda c, channel: c.post(f"/notifications/channels/{channel.pk}/",
                                                    {"name": "after", "config_to": "ops@example.com"}),
                          _channel_named_before),
    "api project rule update": (lambda t, m: t.project,
                                lambda c, project: c.put(f"/api/v1/projects/{project.pk}/notification-rule/",
                                                         {"failure_threshold": 3}, format="json"),
                                lambda project: not NotificationRule.objects.filter(project=project).exists()),
    "page organization rename": (lambda t, m: (t.organization, t.organization.name),
                                 lambda c, made: c.post("/settings/organization/rename/", {"name": "After"}),
                                 lambda made: _named(*made)),
    "page signing secret rotate": (lambda t, m: (t.project, list(t.project.signing_secrets)),
                                   lambda c, made: c.post(f"/settings/projects/{made[0].pk}/signing-secrets/",
                                                          {"action": "rotate"}),
                                   lambda made: _secrets_kept(*made)),
    "page sso configuration delete": (lambda t, m: _sso(t),
                                      lambda c, config: c.post("/settings/sso/", {"action": "delete"}),
                                      lambda config: OrganizationSSO.objects.filter(pk=config.pk).exists()),
    "page data export request": (lambda t, m: t.organization,
                                 lambda c, organization: c.post("/settings/data/export/"),
                                 lambda organization: not DataExport.objects.filter(
                                     organization=organization).exists()),
}


@pytest.mark.parametrize("case", sorted(SERVICE_CHANGES_REFUSED_AT_THE_AUDIT))
def test_a_service_change_whose_audit_event_fails_is_rolled_back(case, tenant, make_job, api_500, browser, refuse):
    make, ask, holds = SERVICE_CHANGES_REFUSED_AT_THE_AUDIT[case]
    made = make(tenant, make_job)
    refuse(AUDIT, "INSERT")
    assert ask(api_500 if case.startswith("api") else browser, made).status_code == 500
    assert holds(made)
