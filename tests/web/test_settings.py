"""Settings: projects, members and roles, API keys, signing secrets, plan and usage, switcher."""

from django.utils import timezone

from apps.accounts.models import ApiKey, AuditEvent, Invitation, Membership, User
from apps.api.accounts import invitations
from apps.projects.models import Project


def html(response):
    return response.content.decode()


def test_settings_page_lists_projects(tenant, web_client):
    viewer = web_client(tenant, "viewer")
    page = html(viewer.get("/settings/"))
    assert "Default" in page and "Create project" not in page  # viewers read only


def test_create_edit_and_delete_projects(tenant, owner, make_job):
    response = owner.post("/settings/projects/new/", {"name": "Data Pipelines", "timezone": "Asia/Kolkata"})
    assert response.status_code == 302
    project = Project.objects.get(organization=tenant.organization, slug="data-pipelines")
    assert project.timezone == "Asia/Kolkata"
    refused = owner.post("/settings/projects/new/", {"name": "Data Pipelines", "timezone": "Nowhere/City"})
    assert refused.status_code == 400
    page = html(refused)
    assert "not a known IANA timezone" in page
    owner.post(f"/settings/projects/{project.pk}/", {"name": "Pipelines", "slug": "pipelines", "timezone": "UTC"})
    project.refresh_from_db()
    assert (project.name, project.slug, project.timezone) == ("Pipelines", "pipelines", "UTC")
    make_job(tenant, project=project)
    owner.post(f"/settings/projects/{project.pk}/delete/")
    assert Project.objects.filter(pk=project.pk).exists()  # has a job: needs the tick
    owner.post(f"/settings/projects/{project.pk}/delete/", {"force": "true"})
    assert not Project.objects.filter(pk=project.pk).exists()
    assert AuditEvent.objects.filter(action="project.delete").exists()


def test_projects_of_another_organization_are_404(tenant, other_tenant, owner):
    for url in (f"/settings/projects/{other_tenant.project.pk}/",
                f"/settings/projects/{other_tenant.project.pk}/signing-secrets/"):
        assert owner.get(url).status_code == 404
    assert owner.post(f"/settings/projects/{other_tenant.project.pk}/delete/", {"force": "true"}).status_code == 404


def test_developers_cannot_manage_projects(tenant, web_client):
    developer = web_client(tenant, "developer")
    assert developer.post("/settings/projects/new/", {"name": "x"}).status_code == 403
    assert developer.get(f"/settings/projects/{tenant.project.pk}/").status_code == 403


def test_signing_secret_reveal_rotate_and_end_rotation(tenant, owner):
    project = tenant.project
    (original,) = project.signing_secrets
    page = html(owner.get(f"/settings/projects/{project.pk}/signing-secrets/"))
    assert original not in page and original[:10] in page
    assert original in html(owner.post(f"/settings/projects/{project.pk}/signing-secrets/", {"action": "reveal"}))
    page = html(owner.post(f"/settings/projects/{project.pk}/signing-secrets/", {"action": "rotate"}))
    project.refresh_from_db()
    new, old = project.signing_secrets
    assert old == original and new != original and new in page and original not in page
    owner.post(f"/settings/projects/{project.pk}/signing-secrets/", {"action": "end_rotation"})
    project.refresh_from_db()
    assert project.signing_secrets == [new]
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"project.signing_secret.reveal", "project.signing_secret.rotate",
            "project.signing_secret.end_rotation"} <= actions


def test_members_invite_change_and_remove(tenant, owner):
    owner.post("/settings/members/invite/", {"email": "dev@example.com", "role": "developer"})
    assert not Membership.objects.filter(user__email="dev@example.com").exists()  # until they accept
    page = html(owner.get("/settings/members/"))
    assert "dev@example.com" in page and "pending" in page
    again = owner.post("/settings/members/invite/", {"email": "dev@example.com", "role": "viewer"})
    assert again.status_code == 409 and "pending invitation already" in html(again)
    user = User.objects.create_user(email="dev@example.com")
    invitations.accept(Invitation.objects.get(email="dev@example.com"), user)
    membership = Membership.objects.get(user=user, organization=tenant.organization)
    assert membership.role == "developer"
    again = owner.post("/settings/members/invite/", {"email": "dev@example.com", "role": "viewer"})
    assert again.status_code == 409 and "already a member" in html(again)
    owner.post(f"/settings/members/{user.pk}/role/", {"role": "viewer"})
    membership.refresh_from_db()
    assert membership.role == "viewer"
    owner.post(f"/settings/members/{user.pk}/remove/")
    assert not Membership.objects.filter(pk=membership.pk).exists()


def test_the_last_owner_stays_and_only_owners_grant_owner(tenant, owner, web_client):
    response = owner.post(f"/settings/members/{tenant.owner.pk}/role/", {"role": "admin"}, follow=True)
    assert "at least one owner" in html(response)
    assert Membership.objects.get(user=tenant.owner).role == "owner"
    admin = web_client(tenant, "admin")
    assert admin.post("/settings/members/invite/", {"email": "boss@example.com", "role": "owner"}).status_code == 403
    assert admin.post(f"/settings/members/{tenant.owner.pk}/remove/").status_code == 403
    assert web_client(tenant, "developer").get("/settings/members/").status_code == 403


def test_members_of_another_organization_are_404(tenant, other_tenant, owner):
    assert owner.post(f"/settings/members/{other_tenant.owner.pk}/remove/").status_code == 404
    assert Membership.objects.filter(user=other_tenant.owner).exists()


def test_api_key_created_shown_once_then_revoked(tenant, owner):
    response = owner.post("/settings/api-keys/new/", {"name": "deploy pipeline", "access": "read"})
    page = html(response)
    key = ApiKey.objects.get(name="deploy pipeline")
    full = page.split('id="new-key-value">')[1].split("<")[0]
    assert full.startswith(key.prefix) and key.scopes == ["read"] and key.created_by == tenant.owner
    listing = html(owner.get("/settings/api-keys/"))
    assert full not in listing and key.prefix in listing and "never" in listing
    from rest_framework.test import APIClient

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {full}")
    assert api.get("/api/v1/jobs/").status_code == 200
    owner.post(f"/settings/api-keys/{key.pk}/revoke/")
    key.refresh_from_db()
    assert key.revoked_at is not None and key.last_used_at is not None
    assert api.get("/api/v1/jobs/").status_code == 401
    assert AuditEvent.objects.filter(action="api_key.revoke", target_id=str(key.pk)).exists()


def test_api_key_validation_and_tenancy(tenant, other_tenant, owner):
    response = owner.post("/settings/api-keys/new/", {"name": "", "access": "write"})
    assert response.status_code == 400 and "This field may not be blank." in html(response)
    response = owner.post("/settings/api-keys/new/", {"name": "x", "expires_at": "2001-01-01T00:00"})
    assert "Give an expiry in the future" in html(response)
    assert owner.post(f"/settings/api-keys/{other_tenant.api_key.pk}/revoke/").status_code == 404
    other_tenant.api_key.refresh_from_db()
    assert other_tenant.api_key.revoked_at is None


def test_plan_and_usage(tenant, owner, make_job):
    from apps.executions.models import UsageMonth

    make_job(tenant)
    # usage is the meter (apps.executions.usage), counted as attempts are recorded
    UsageMonth.objects.create(organization=tenant.organization, month=timezone.now().date().replace(day=1), runs=3)
    page = html(owner.get("/settings/plan/"))
    assert "<strong>3</strong> of 500000" in page and "<strong>1</strong> of 100" in page
    assert "once every 1 minute" in page


def test_organization_switcher(tenant, other_tenant, make_tenant, owner, make_job):
    Membership.objects.create(user=tenant.owner, organization=other_tenant.organization, role="viewer")
    make_job(other_tenant, name="in the other org")
    assert "in the other org" not in html(owner.get("/"))
    assert 'id="org-switch"' in html(owner.get("/"))
    owner.post("/organization/switch/", {"organization": str(other_tenant.organization.pk)})
    assert "in the other org" in html(owner.get("/"))
    # A viewer there: no job creation.
    assert owner.get("/jobs/new/").status_code == 403
    # An organization they do not belong to is refused; the session stays where it was.
    stranger = make_tenant()
    make_job(stranger, name="stranger job")
    response = owner.post("/organization/switch/", {"organization": str(stranger.organization.pk)}, follow=True)
    page = html(response)
    assert "not a member of that organization" in page and "stranger job" not in page


def test_organization_rename_by_admins_only(tenant, owner, web_client):
    owner.post("/settings/organization/rename/", {"name": "Renamed Inc"})
    tenant.organization.refresh_from_db()
    assert tenant.organization.name == "Renamed Inc"
    assert web_client(tenant, "developer").post("/settings/organization/rename/", {"name": "x"}).status_code == 403
