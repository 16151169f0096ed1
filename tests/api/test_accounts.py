"""API keys, members (with per-project limits) and the audit log."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.accounts.models import ApiKey, AuditEvent, Membership, User
from apps.projects.models import Project
from tests.api.conftest import error_of, job_body, key_client

# --- API keys


def test_create_shows_the_key_once_and_it_works(api, tenant):
    response = api.post("/api/v1/api-keys/", {"name": "ci", "scopes": ["read"]})
    assert response.status_code == 201, response.json()
    created = response.json()
    assert created["key"].startswith(created["prefix"]) and created["prefix"].startswith("csk_live_")
    assert created["scopes"] == ["read"] and created["projects"] is None
    listed = api.get("/api/v1/api-keys/").json()["results"]
    assert all("key" not in k for k in listed)
    assert created["id"] in [k["id"] for k in listed]
    assert key_client(created["key"]).get("/api/v1/jobs/").status_code == 200


def test_write_scope_implies_read(api):
    assert api.post("/api/v1/api-keys/", {"name": "w", "scopes": ["write"]}).json()["scopes"] == ["read", "write"]


def test_key_validation(api):
    past = (timezone.now() - timedelta(days=1)).isoformat()
    assert error_of(api.post("/api/v1/api-keys/", {"name": "x", "expires_at": past}))["code"] == "in_the_past"
    assert error_of(api.post("/api/v1/api-keys/", {"name": "x", "scopes": ["admin"]}))["code"] == "invalid_choice"
    assert error_of(api.post("/api/v1/api-keys/", {"name": "x", "scopes": []}))["code"] == "min_length"


def test_revoke_stops_the_key(api, tenant, make_key):
    key, client = make_key(tenant)
    response = api.post(f"/api/v1/api-keys/{key.pk}/revoke/")
    assert response.status_code == 200 and response.json()["revoked_at"]
    assert error_of(client.get("/api/v1/jobs/"))["code"] == "invalid_api_key"
    assert AuditEvent.objects.filter(action="api_key.revoke", target_id=str(key.pk)).count() == 1


def test_read_key_cannot_write(tenant, make_key, make_job):
    job = make_job(tenant)
    _, client = make_key(tenant, scopes=["read"])
    assert client.get(f"/api/v1/jobs/{job.pk}/").status_code == 200
    for response in (client.post("/api/v1/jobs/", job_body(tenant)),
                     client.patch(f"/api/v1/jobs/{job.pk}/", {"name": "x"}),
                     client.post(f"/api/v1/jobs/{job.pk}/pause/"),
                     client.delete(f"/api/v1/jobs/{job.pk}/")):
        assert response.status_code == 403
        assert error_of(response)["code"] == "permission_denied"


def test_key_limited_to_projects(api, tenant, make_job):
    other_project = Project.objects.create(organization=tenant.organization, name="Other", slug="other")
    visible, hidden = make_job(tenant), make_job(tenant, project=other_project)
    created = api.post("/api/v1/api-keys/", {"name": "limited", "projects": [str(tenant.project.pk)]}).json()
    assert created["projects"] == [str(tenant.project.pk)]
    client = key_client(created["key"])
    assert [j["id"] for j in client.get("/api/v1/jobs/").json()["results"]] == [str(visible.pk)]
    assert client.get(f"/api/v1/jobs/{hidden.pk}/").status_code == 404
    assert client.post("/api/v1/jobs/", job_body(tenant, project=str(other_project.pk))).status_code == 400
    assert client.post("/api/v1/jobs/", job_body(tenant)).status_code == 201
    # a limited key manages jobs, never the organization
    assert client.post("/api/v1/projects/", {"name": "New"}).status_code == 403
    assert client.post("/api/v1/api-keys/", {"name": "escalate"}).status_code == 403


def test_key_limited_to_a_deleted_project_reaches_nothing(api, tenant):
    project = Project.objects.create(organization=tenant.organization, name="Temp", slug="temp")
    created = api.post("/api/v1/api-keys/", {"name": "l", "projects": [str(project.pk)]}).json()
    project.delete()
    assert key_client(created["key"]).get("/api/v1/projects/").json()["results"] == []


def test_key_creation_is_throttled_per_ip(api, settings):
    settings.API_KEY_CREATE_PER_IP_PER_HOUR = 2  # counted in a window of this test's own (conftest)
    ip = "198.51.100.7"
    codes = [api.post("/api/v1/api-keys/", {"name": f"k{i}"}, REMOTE_ADDR=ip).status_code for i in range(3)]
    assert codes == [201, 201, 429]


# --- members


def join(tenant, email, role="developer"):
    """A person who accepted an invitation to the tenant (the only way to become a member)."""
    from apps.api.accounts import invitations

    user = User.objects.filter(email=email).first() or User.objects.create_user(email=email, password="pw-12345-x")
    invitation = invitations.invite(tenant.organization, email=email, role=role, project_ids=None)
    return invitations.accept(invitation, user)[0]


def test_invite_change_and_remove(api, tenant):
    response = api.post("/api/v1/members/", {"email": "new@example.com", "role": "developer"})
    assert response.status_code == 202, response.json()
    invitation = response.json()
    assert (invitation["email"], invitation["role"], invitation["projects"], invitation["status"]) == (
        "new@example.com", "developer", None, "pending")
    assert not Membership.objects.filter(organization=tenant.organization, user__email="new@example.com").exists()
    user = join(tenant, "changed@example.com").user
    changed = api.patch(f"/api/v1/members/{user.pk}/", {"role": "viewer"}).json()
    assert changed["role"] == "viewer"
    assert api.delete(f"/api/v1/members/{user.pk}/").status_code == 204
    assert not Membership.objects.filter(user=user).exists()
    actions = set(AuditEvent.objects.filter(organization=tenant.organization).values_list("action", flat=True))
    assert {"invitation.create", "member.update", "member.remove"} <= actions


def test_inviting_twice_is_a_conflict(api, tenant):
    api.post("/api/v1/members/", {"email": "dup@example.com"})
    response = api.post("/api/v1/members/", {"email": "DUP@example.com"})
    assert response.status_code == 409
    assert error_of(response)["code"] == "already_invited"
    join(tenant, "member@example.com")
    response = api.post("/api/v1/members/", {"email": "Member@example.com"})
    assert response.status_code == 409
    assert error_of(response)["code"] == "already_member"


def test_member_limited_to_projects(api, tenant, make_job, member_client):
    other_project = Project.objects.create(organization=tenant.organization, name="Other", slug="other")
    visible, hidden = make_job(tenant), make_job(tenant, project=other_project)
    client = member_client(tenant, "developer")
    response = api.patch(f"/api/v1/members/{client.user.pk}/", {"projects": [str(tenant.project.pk)]})
    assert response.json()["projects"] == [str(tenant.project.pk)]
    assert [j["id"] for j in client.get("/api/v1/jobs/").json()["results"]] == [str(visible.pk)]
    assert client.post(f"/api/v1/jobs/{hidden.pk}/trigger/").status_code == 404
    assert [p["id"] for p in client.get("/api/v1/projects/").json()["results"]] == [str(tenant.project.pk)]
    api.patch(f"/api/v1/members/{client.user.pk}/", {"projects": None})
    assert len(client.get("/api/v1/jobs/").json()["results"]) == 2


def test_admins_cannot_be_limited(api, tenant, member_client):
    client = member_client(tenant, "admin")
    response = api.patch(f"/api/v1/members/{client.user.pk}/", {"projects": [str(tenant.project.pk)]})
    assert response.status_code == 400


def test_only_owners_touch_owners(tenant, member_client):
    admin = member_client(tenant, "admin")
    assert admin.post("/api/v1/members/", {"email": "o@example.com", "role": "owner"}).status_code == 403
    assert admin.patch(f"/api/v1/members/{tenant.owner.pk}/", {"role": "viewer"}).status_code == 403
    assert admin.delete(f"/api/v1/members/{tenant.owner.pk}/").status_code == 403
    assert admin.post("/api/v1/members/", {"email": "d@example.com", "role": "developer"}).status_code == 202


def test_the_last_owner_stays(tenant, member_client):
    owner = member_client(tenant, "owner")
    response = owner.patch(f"/api/v1/members/{tenant.owner.pk}/", {"role": "admin"})
    assert response.status_code == 409
    assert error_of(response)["code"] == "last_owner"
    assert owner.delete(f"/api/v1/members/{tenant.owner.pk}/").status_code == 409
    join(tenant, "second@example.com", role="owner")
    assert owner.patch(f"/api/v1/members/{tenant.owner.pk}/", {"role": "admin"}).status_code == 200


# --- audit events


def test_mutations_write_audit_events(api, tenant):
    job = api.post("/api/v1/jobs/", job_body(tenant)).json()
    api.patch(f"/api/v1/jobs/{job['id']}/", {"name": "renamed"})
    api.post(f"/api/v1/jobs/{job['id']}/pause/")
    api.post(f"/api/v1/jobs/{job['id']}/resume/")
    api.post(f"/api/v1/jobs/{job['id']}/trigger/")
    api.delete(f"/api/v1/jobs/{job['id']}/")
    events = api.get("/api/v1/audit-events/?target_id=" + job["id"]).json()["results"]
    assert [e["action"] for e in events] == [
        "job.delete", "job.trigger", "job.resume", "job.pause", "job.update", "job.create"]
    newest = events[0]
    assert newest["actor"] == {"type": "api_key", "id": str(tenant.api_key.pk),
                               "name": f"{tenant.api_key.name} ({tenant.api_key.prefix}…)"}
    assert newest["ip"] == "127.0.0.1"
    assert events[4]["data"] == {"fields": ["name"]}


def test_audit_records_session_users(tenant, member_client):
    client = member_client(tenant, "owner")
    client.post("/api/v1/projects/", {"name": "Audited"})
    event = AuditEvent.objects.get(action="project.create")
    assert event.actor_user == tenant.owner and event.actor_api_key is None


@pytest.mark.parametrize("role, allowed", [("owner", True), ("admin", True), ("developer", False), ("viewer", False)])
def test_audit_log_is_for_owners_and_admins(tenant, member_client, role, allowed):
    response = member_client(tenant, role).get("/api/v1/audit-events/")
    assert response.status_code == (200 if allowed else 403)


def test_audit_filters(api, tenant):
    api.post("/api/v1/projects/", {"name": "P1"})
    api.post("/api/v1/api-keys/", {"name": "k"})
    assert [e["action"] for e in api.get("/api/v1/audit-events/?action=api_key.create").json()["results"]] == [
        "api_key.create"]
    assert api.get("/api/v1/audit-events/?created_at_after=2999-01-01T00:00:00Z").json()["results"] == []
    assert ApiKey.objects.for_organization(tenant.organization).count() == 2
