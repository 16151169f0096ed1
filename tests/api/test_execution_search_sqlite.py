"""The embedded mode's history search: migrations run on SQLite (the search index is
PostgreSQL's only) and ?q= falls back to substrings of the error and the body, through the
API, in a process of its own on a fresh SQLite database."""

import json

import pytest

from tests.support.embedded import embedded_shell

SCRIPT = """
import json
from datetime import datetime, timezone
from rest_framework.test import APIClient
from apps.executions.models import Execution
from apps.jobs.models import Job
from apps.projects.provisioning import provision_tenant

tenant = provision_tenant(org_name="Embedded", email="embedded@example.com", plan_code="free")
other = provision_tenant(org_name="Other", email="other@example.com", plan_code="free")
def job(t):
    return Job.objects.create(project=t.project, organization=t.organization, name="j", cron_expression="* * * * *",
                              url="https://example.com/hook")
mine, theirs = job(tenant), job(other)
rows = [(mine, "Read timed out", "", None), (mine, "HTTP 503", "<h1>503 Service Unavailable</h1>", 503),
        (mine, "", '{"ok": true, "order": "ORD-98765"}', 200), (theirs, "Read timed out", "", None)]
names = {}
for minute, (j, error, body, code) in enumerate(rows):
    e = Execution.objects.create(job=j, organization=j.organization, status="failed",
                                 scheduled_for=datetime(2027, 1, 1, 0, minute, tzinfo=timezone.utc),
                                 error_message=error, response_body=body, response_status=code)
    names[str(e.pk)] = minute
client = APIClient(SERVER_NAME="127.0.0.1")
client.credentials(HTTP_AUTHORIZATION=f"Bearer {tenant.full_api_key}")
out = {}
for q in ["TIMED out", '"service unavailable"', "ord-98765 or timed", "timed -read", "503", "-x"]:
    r = client.get("/api/v1/executions/", {"q": q})
    body = r.json()
    out[q] = sorted(names[row["id"]] for row in body["results"]) if r.status_code == 200 else body["error"]["code"]
r = client.get("/api/v1/executions/", {"q": "unavailable", "status_code": "5xx"})
out["5xx"] = [names[row["id"]] for row in r.json()["results"]]
print("RESULT " + json.dumps(out))
"""


@pytest.mark.slow
def test_the_embedded_sqlite_search_finds_substrings(tmp_path):
    line = next(line for line in embedded_shell(tmp_path, SCRIPT).splitlines() if line.startswith("RESULT "))
    assert json.loads(line.removeprefix("RESULT ")) == {
        "TIMED out": [0], '"service unavailable"': [1], "ord-98765 or timed": [0, 2], "timed -read": [],
        "503": [1], "-x": "invalid_search", "5xx": [1]}
