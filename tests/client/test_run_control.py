"""`cronsvc executions cancel`, `executions list --search/--status-code`, and `jobs versions`
/ `jobs rollback` against the real web process."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.accounts.models import AuditEvent
from apps.executions.models import Execution
from apps.jobs.models import Job

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def run_of(job, status="queued", minutes_ago=0, **fields):
    return Execution.objects.create(job=job, organization=job.organization, status=status,
                                    scheduled_for=timezone.now().replace(microsecond=0) - timedelta(minutes=minutes_ago),
                                    **fields)


def test_cancel_a_queued_run_once_and_refuse_a_finished_one(cli, client_tenant, make_job, other_tenant):
    job = make_job(client_tenant)
    queued, finished = run_of(job), run_of(job, status="succeeded", minutes_ago=1)

    cancelled = cli.ok("executions", "cancel", queued.pk, "-o", "json")
    assert cancelled["status"] == "cancelled" and cancelled["cancelled_at"]
    key = client_tenant.api_key
    assert cancelled["cancelled_by"] == {"kind": "api_key", "id": str(key.pk), "name": key.name}
    assert Execution.objects.get(pk=queued.pk).status == "cancelled"

    again = cli.ok("executions", "cancel", queued.pk)  # idempotent; one field a line
    assert re.search(r"^status\s+cancelled$", again.out, re.M)
    assert re.search(rf"^cancelled_at\s+{re.escape(cancelled['cancelled_at'])}$", again.out, re.M)
    assert AuditEvent.objects.filter(action="execution.cancel", target_id=str(queued.pk)).count() == 1

    refused = cli("executions", "cancel", finished.pk)
    assert refused.code == 1, refused.err
    assert refused.err.startswith("Error: execution_finished (HTTP 409): The execution already finished")
    assert '  status: "succeeded"' in refused.err
    assert Execution.objects.get(pk=finished.pk).status == "succeeded"

    theirs = run_of(make_job(other_tenant))
    assert cli("executions", "cancel", theirs.pk).code == 4
    assert Execution.objects.get(pk=theirs.pk).status == "queued"


def test_list_searches_the_history_by_words_status_code_and_time(cli, client_tenant, make_job):
    job = make_job(client_tenant)
    timed_out = run_of(job, status="failed", minutes_ago=30, error_message="read timed out after 30s")
    unavailable = run_of(job, status="failed", minutes_ago=20, response_status=503,
                         response_body="<h1>upstream unavailable</h1>")
    not_found = run_of(job, status="failed", minutes_ago=10, response_status=404, response_body="no such order")
    run_of(job, status="succeeded", minutes_ago=5, response_status=200, response_body="ok")

    def ids(*args):
        return [run["id"] for run in cli.ok("executions", "list", "--job", job.pk, *args, "-o", "json")]

    assert ids("--search", '"read timed out"') == [str(timed_out.pk)]
    assert ids("--search", "unavailable or order") == [str(not_found.pk), str(unavailable.pk)]
    assert ids("--status-code", "503") == [str(unavailable.pk)]
    assert ids("--status-code", "4xx") == [str(not_found.pk)]
    since = (unavailable.scheduled_for - timedelta(seconds=1)).isoformat()
    until = (not_found.scheduled_for - timedelta(seconds=1)).isoformat()
    assert ids("--status-code", "5xx", "--since", since, "--until", until) == [str(unavailable.pk)]
    assert ids("--search", "order", "--since", until) == [str(not_found.pk)]
    assert ids("--search", "order", "--until", until) == []

    table = cli.ok("executions", "list", "--job", job.pk, "--status-code", "5xx").out.splitlines()
    assert len(table) == 2 and table[1].split()[0] == str(unavailable.pk) and " 503 " in table[1]

    refused = cli("executions", "list", "--status-code", "abc")
    assert refused.code == 1 and refused.err.startswith("Error: invalid_status_code (HTTP 400)")


def test_versions_list_show_and_rollback(cli, client_tenant, other_tenant, make_job):
    created = cli.ok("jobs", "create", "--name", "First name", "--cron", "0 3 * * *", "--url",
                     "https://example.com/hooks/a", "-o", "json")
    job_id = created["id"]
    cli.ok("jobs", "update", job_id, "--name", "Second name", "--every", "900")

    listed = cli.ok("jobs", "versions", job_id, "-o", "json")
    assert [(v["number"], v["source"]) for v in listed] == [(2, "api"), (1, "api")]
    assert listed[0]["author"]["kind"] == "api_key"
    assert listed[0]["changes"]["name"] == {"from": "First name", "to": "Second name"}
    assert cli.ok("jobs", "versions", "-o", "json", job_id) == listed  # options before the job too

    table = cli.ok("jobs", "versions", job_id).out.splitlines()
    assert re.split(r"\s{2,}", table[0]) == ["VERSION", "CREATED", "SOURCE", "BY", "ROLLBACK OF", "CHANGED"]
    assert table[1].startswith("2 ") and "name" in table[1] and len(table) == 3

    first = cli.ok("jobs", "versions", "show", job_id, "1", "-o", "json")
    assert first["number"] == 1 and first["snapshot"]["name"] == "First name"
    assert re.search(r"^number\s+1$", cli.ok("jobs", "versions", "show", job_id, "1").out, re.M)

    rolled = cli.ok("jobs", "rollback", job_id, "1", "-o", "json")
    assert (rolled["number"], rolled["source"], rolled["rollback_of"]) == (3, "rollback", 1)
    job = Job.objects.get(pk=job_id)
    assert (job.name, job.schedule_type, job.version) == ("First name", "cron", 3)
    assert AuditEvent.objects.filter(action="job.rollback", target_id=job_id).count() == 1

    missing = cli("jobs", "versions", "show", job_id, "9")
    assert missing.code == 4 and missing.err.startswith("Error: not_found (HTTP 404)")
    assert cli("jobs", "rollback", job_id, "9").code == 4
    assert cli("jobs", "rollback", job_id, "0").code == 2  # a usage error, no request
    theirs = make_job(other_tenant)
    assert cli("jobs", "versions", theirs.pk).code == 4
    assert cli("jobs", "rollback", theirs.pk, "1").code == 4
