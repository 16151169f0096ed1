"""Another organization's ids are 404 on every endpoint and action, and change nothing."""

import pytest

from apps.accounts.models import AuditEvent, Invitation, Membership, User
from apps.api.accounts import invitations
from apps.executions.models import Execution
from apps.jobs.models import Job
from apps.projects.models import Project
from apps.accounts.apikeys import create_api_key
from tests.api.conftest import error_of, job_body
from tests.conftest import utc


@pytest.fixture
def theirs(other_tenant, make_job):
    """One of everything, owned by the other organization."""
    job = make_job(other_tenant)
    dead = Execution.objects.create(job=job, organization=other_tenant.organization, status="dead",
                                    scheduled_for=utc(2027, 1, 1))
    key, _ = create_api_key(other_tenant.organization, "theirs")
    user = User.objects.create_user(email="their-dev@example.com")
    Membership.objects.create(user=user, organization=other_tenant.organization, role="developer")
    event = AuditEvent.objects.create(organization=other_tenant.organization, action="x")
    invitation = invitations.invite(other_tenant.organization, email="their-invitee@example.com", role="viewer",
                                    project_ids=None)
    return {"project": other_tenant.project.pk, "job": job.pk, "execution": dead.pk, "key": key.pk,
            "member": user.pk, "event": event.pk, "invitation": invitation.pk}


DETAIL_REQUESTS = [
    ("get", "/api/v1/projects/{project}/"),
    ("patch", "/api/v1/projects/{project}/"),
    ("put", "/api/v1/projects/{project}/"),
    ("delete", "/api/v1/projects/{project}/?force=true"),
    ("get", "/api/v1/jobs/{job}/"),
    ("patch", "/api/v1/jobs/{job}/"),
    ("put", "/api/v1/jobs/{job}/"),
    ("delete", "/api/v1/jobs/{job}/"),
    ("post", "/api/v1/jobs/{job}/pause/"),
    ("post", "/api/v1/jobs/{job}/resume/"),
    ("post", "/api/v1/jobs/{job}/trigger/"),
    ("get", "/api/v1/jobs/{job}/next-runs/"),
    ("get", "/api/v1/jobs/{job}/executions/"),
    ("get", "/api/v1/executions/{execution}/"),
    ("post", "/api/v1/executions/{execution}/replay/"),
    ("post", "/api/v1/executions/{execution}/cancel/"),
    ("get", "/api/v1/jobs/{job}/versions/"),
    ("get", "/api/v1/jobs/{job}/versions/1/"),
    ("post", "/api/v1/jobs/{job}/versions/1/rollback/"),
    ("get", "/api/v1/dead-letter/{execution}/"),
    ("get", "/api/v1/api-keys/{key}/"),
    ("post", "/api/v1/api-keys/{key}/revoke/"),
    ("get", "/api/v1/members/{member}/"),
    ("patch", "/api/v1/members/{member}/"),
    ("put", "/api/v1/members/{member}/"),
    ("delete", "/api/v1/members/{member}/"),
    ("get", "/api/v1/audit-events/{event}/"),
    ("get", "/api/v1/invitations/{invitation}/"),
    ("post", "/api/v1/invitations/{invitation}/resend/"),
    ("post", "/api/v1/invitations/{invitation}/revoke/"),
]


def snapshot(organization):
    return (
        sorted(Job.objects.for_organization(organization).values_list("pk", "name", "enabled")),
        sorted(Project.objects.for_organization(organization).values_list("pk", "name")),
        Execution.objects.for_organization(organization).count(),
        sorted(Membership.objects.for_organization(organization).values_list("user_id", "role")),
        sorted(str(k) for k in organization.api_keys.filter(revoked_at__isnull=True).values_list("pk", flat=True)),
        sorted(Invitation.objects.for_organization(organization).values_list(
            "pk", "token_hash", "expires_at", "revoked_at", "accepted_at")),
    )


@pytest.mark.parametrize("method, path", DETAIL_REQUESTS)
@pytest.mark.parametrize("caller", ["owner_session", "admin_key"])
def test_their_ids_are_404(tenant, other_tenant, theirs, member_client, api, method, path, caller):
    client = member_client(tenant, "owner") if caller == "owner_session" else api
    before = snapshot(other_tenant.organization)
    response = getattr(client, method)(path.format(**theirs), {"name": "hijacked"} if method != "get" else None)
    assert response.status_code == 404, (response.status_code, response.content)
    assert error_of(response)["code"] == "not_found"
    assert snapshot(other_tenant.organization) == before


def test_their_ids_in_bodies_are_unknown(tenant, theirs, api, member_client):
    assert api.post("/api/v1/jobs/", job_body(tenant, project=str(theirs["project"]))).status_code == 400
    assert api.post("/api/v1/jobs/import-crontab/", {
        "crontab": "0 3 * * * curl https://example.com/", "project": str(theirs["project"])}).status_code == 400
    assert api.post("/api/v1/api-keys/", {"name": "x", "projects": [str(theirs["project"])]}).status_code == 400
    owner = member_client(tenant, "owner")
    assert owner.post("/api/v1/members/", {"email": "a@example.com", "projects": [str(theirs["project"])]}) \
        .status_code == 400
    assert owner.post("/api/v1/invitations/", {"email": "b@example.com", "projects": [str(theirs["project"])]}) \
        .status_code == 400
    response = api.post("/api/v1/dead-letter/replay/", {"ids": [str(theirs["execution"])]})
    assert response.status_code == 404
    assert not Execution.objects.filter(replay_of=theirs["execution"]).exists()


@pytest.mark.parametrize("path", [
    "/api/v1/projects/", "/api/v1/jobs/", "/api/v1/executions/", "/api/v1/dead-letter/", "/api/v1/api-keys/",
    "/api/v1/members/", "/api/v1/audit-events/", "/api/v1/invitations/",
])
def test_lists_hold_only_our_rows(tenant, theirs, api, path):
    response = api.get(path)
    assert response.status_code == 200
    assert not {str(v) for v in theirs.values()} & {row.get("id") for row in response.json()["results"]}


@pytest.mark.parametrize("query", ["job={job}", "project={project}"])
def test_filtering_by_their_ids_finds_nothing(theirs, api, query):
    for path in ("/api/v1/executions/", "/api/v1/dead-letter/"):
        response = api.get(f"{path}?{query.format(**theirs)}")
        assert response.status_code == 200 and response.json()["results"] == []
    assert api.get(f"/api/v1/jobs/?project={theirs['project']}").json()["results"] == []
