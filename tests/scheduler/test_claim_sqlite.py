"""The embedded mode's claim (`make run`, SQLite: no row locks, the ORM's queries), in a
process of its own on a fresh SQLite database: a batch smaller than the due jobs takes the
oldest due first, a due job gets its run and advances, a job due later and a paused one get
none, a claim again at the same instant takes nothing, and disabling a job clears its due time
(SQLite's trigger, as PostgreSQL's)."""

import json

import pytest

from tests.support.embedded import embedded_shell

SCRIPT = """
import json
from datetime import datetime, timedelta, timezone
from apps.executions.models import Execution
from apps.executions.scheduling.tick import claim_due
from apps.jobs.models import Job
from apps.projects.provisioning import provision_tenant

T0 = datetime(2027, 3, 1, 12, 0, tzinfo=timezone.utc)
tenant = provision_tenant(org_name="Embedded", email="embedded@example.com", plan_code="free")
def job(name, due, **fields):
    return Job.objects.create(project=tenant.project, organization=tenant.organization, name=name,
                              cron_expression="*/5 * * * *", url="https://example.com/hook", next_run_at=due, **fields)
older, due, later = job("older", T0 - timedelta(minutes=5)), job("due", T0), job("later", T0 + timedelta(minutes=1))
paused = job("paused", T0 - timedelta(minutes=5), enabled=False)
out = {"first": claim_due(T0, batch_size=1).claimed}
out["first_runs"] = sorted(e.job.name for e in Execution.objects.select_related("job"))
out["then"] = claim_due(T0, batch_size=10).claimed
out["again"] = claim_due(T0, batch_size=10).claimed
out["runs"] = sorted((e.job.name, e.scheduled_for.isoformat(), e.status)
                     for e in Execution.objects.select_related("job"))
due.refresh_from_db()
out["due_next"] = due.next_run_at.isoformat()
Job.objects.filter(pk=later.pk).update(enabled=False)  # SQLite's trigger clears its due time
later.refresh_from_db()
out["later_paused_due"] = later.next_run_at
print("RESULT " + json.dumps(out))
"""


@pytest.mark.slow
def test_the_embedded_sqlite_claim(tmp_path):
    line = next(line for line in embedded_shell(tmp_path, SCRIPT).splitlines() if line.startswith("RESULT "))
    assert json.loads(line.removeprefix("RESULT ")) == {
        # the oldest due first; its missed 11:55 is skipped (run_once, the default), 12:00 runs
        "first": 1, "first_runs": ["older", "older"], "then": 1, "again": 0,
        "runs": [["due", "2027-03-01T12:00:00+00:00", "queued"], ["older", "2027-03-01T11:55:00+00:00", "skipped"],
                 ["older", "2027-03-01T12:00:00+00:00", "queued"]],
        "due_next": "2027-03-01T12:05:00+00:00", "later_paused_due": None,
    }
