"""Each role's allowed and denied actions (owner > admin > developer > viewer; read keys are viewers)."""

import pytest

from apps.accounts.models import AuditEvent, Membership, User
from apps.executions.models import Execution
from apps.projects.models import Project
from apps.accounts.apikeys import create_api_key
from apps.api.accounts import invitations
from tests.api.conftest import error_of, job_body, key_client
from tests.conftest import utc

V, D, A = "viewer", "developer", "admin"
RANK = {"viewer": 0, "developer": 1, "admin": 2, "owner": 3}
CALLERS = {"owner": "owner", "admin": "admin", "developer": "developer", "viewer": "viewer",
           "read_key": "viewer", "write_key": "admin"}


@pytest.fixture
def world(tenant, make_job):
    job = make_job(tenant)
    dead = Execution.objects.create(job=job, organization=tenant.organization, status="dead",
                                    scheduled_for=utc(2027, 1, 1))
    empty = Project.objects.create(organization=tenant.organization, name="Empty", slug="empty")
    key, _ = create_api_key(tenant.organization, "victim")
    user = User.objects.create_user(email="target@example.com")
    Membership.objects.create(user=user, organization=tenant.organization, role="developer")
    event = AuditEvent.objects.create(organization=tenant.organization, action="x")
    invitation = invitations.invite(tenant.organization, email="invited@example.com", role="viewer", project_ids=None)
    return {"project": tenant.project.pk, "empty": empty.pk, "job": job.pk, "execution": dead.pk,
            "key": key.pk, "member": user.pk, "event": event.pk, "invitation": invitation.pk, "tenant": tenant}


def job_put_body(world):
    return job_body(world["tenant"], name="replaced")


ACTIONS = [
    # (name, method, path, body, least role, success status)
    ("list projects", "get", "/api/v1/projects/", None, V, 200),
    ("read project", "get", "/api/v1/projects/{project}/", None, V, 200),
    ("create project", "post", "/api/v1/projects/", {"name": "New"}, A, 201),
    ("update project", "patch", "/api/v1/projects/{project}/", {"name": "Renamed"}, A, 200),
    ("delete project", "delete", "/api/v1/projects/{empty}/", None, A, 204),
    ("list jobs", "get", "/api/v1/jobs/", None, V, 200),
    ("read job", "get", "/api/v1/jobs/{job}/", None, V, 200),
    ("create job", "post", "/api/v1/jobs/", job_body, D, 201),
    ("update job", "patch", "/api/v1/jobs/{job}/", {"name": "Renamed"}, D, 200),
    ("replace job", "put", "/api/v1/jobs/{job}/", job_put_body, D, 200),
    ("delete job", "delete", "/api/v1/jobs/{job}/", None, D, 204),
    ("pause job", "post", "/api/v1/jobs/{job}/pause/", None, D, 200),
    ("resume job", "post", "/api/v1/jobs/{job}/resume/", None, D, 200),
    ("trigger job", "post", "/api/v1/jobs/{job}/trigger/", None, D, 202),
    ("next runs", "get", "/api/v1/jobs/{job}/next-runs/", None, V, 200),
    ("job executions", "get", "/api/v1/jobs/{job}/executions/", None, V, 200),
    ("import crontab", "post", "/api/v1/jobs/import-crontab/",
     {"crontab": "0 3 * * * curl https://example.com/", "project": "{project}"}, D, 200),
    ("preview schedule", "post", "/api/v1/schedules/preview/",
     {"schedule": {"type": "interval", "seconds": 60}}, V, 200),
    ("list executions", "get", "/api/v1/executions/", None, V, 200),
    ("read execution", "get", "/api/v1/executions/{execution}/", None, V, 200),
    ("replay execution", "post", "/api/v1/executions/{execution}/replay/", None, D, 202),
    ("list dead letter", "get", "/api/v1/dead-letter/", None, V, 200),
    ("read dead letter", "get", "/api/v1/dead-letter/{execution}/", None, V, 200),
    ("bulk replay", "post", "/api/v1/dead-letter/replay/", {"ids": ["{execution}"]}, D, 202),
    ("list api keys", "get", "/api/v1/api-keys/", None, A, 200),
    ("read api key", "get", "/api/v1/api-keys/{key}/", None, A, 200),
    ("create api key", "post", "/api/v1/api-keys/", {"name": "new"}, A, 201),
    ("revoke api key", "post", "/api/v1/api-keys/{key}/revoke/", None, A, 200),
    ("list members", "get", "/api/v1/members/", None, A, 200),
    ("read member", "get", "/api/v1/members/{member}/", None, A, 200),
    ("invite member", "post", "/api/v1/members/", {"email": "new@example.com"}, A, 202),
    ("list invitations", "get", "/api/v1/invitations/", None, A, 200),
    ("read invitation", "get", "/api/v1/invitations/{invitation}/", None, A, 200),
    ("invite", "post", "/api/v1/invitations/", {"email": "new2@example.com"}, A, 201),
    ("resend invitation", "post", "/api/v1/invitations/{invitation}/resend/", None, A, 200),
    ("revoke invitation", "post", "/api/v1/invitations/{invitation}/revoke/", None, A, 200),
    ("change member", "patch", "/api/v1/members/{member}/", {"role": "viewer"}, A, 200),
    ("remove member", "delete", "/api/v1/members/{member}/", None, A, 204),
    ("list audit events", "get", "/api/v1/audit-events/", None, A, 200),
    ("read audit event", "get", "/api/v1/audit-events/{event}/", None, A, 200),
]


def client_for(caller, tenant, member_client):
    if caller == "read_key":
        return key_client(create_api_key(tenant.organization, "ro", scopes=["read"])[1])
    if caller == "write_key":
        return key_client(tenant.full_api_key)
    return member_client(tenant, caller)


def fill(value, world):
    if callable(value):
        return value(world["tenant"]) if value is job_body else value(world)
    if isinstance(value, str):
        return value.format(**world)
    if isinstance(value, dict):
        return {k: fill(v, world) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, world) for v in value]
    return value


@pytest.mark.parametrize("caller", list(CALLERS))
@pytest.mark.parametrize("name, method, path, body, least, success", ACTIONS, ids=[a[0] for a in ACTIONS])
def test_role_matrix(world, member_client, caller, name, method, path, body, least, success):
    client = client_for(caller, world["tenant"], member_client)
    response = getattr(client, method)(fill(path, world), fill(body, world))
    if RANK[CALLERS[caller]] >= RANK[least]:
        assert response.status_code == success, (response.status_code, response.content)
    else:
        assert response.status_code == 403, (response.status_code, response.content)
        assert error_of(response)["code"] == "permission_denied"
