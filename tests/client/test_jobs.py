"""`cronsvc jobs ...` and `cronsvc next-runs` against the real web process: what each command
changes on the server, its table and JSON output, and pages followed to the end."""

import json
import re
import uuid

import pytest

from apps.jobs.models import Job, JobDependency

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def create(cli, *extra):
    return cli.ok("jobs", "create", "--name", "Nightly report", "--cron", "0 3 * * *", "--timezone", "Europe/Berlin",
                  "--url", "https://example.com/hooks/report", *extra, "-o", "json")


def test_create_show_and_list_a_job_as_json_and_as_a_table(cli, client_tenant):
    created = create(cli, "--method", "post", "--header", "X-Team: data", "--body", '{"a": 1}',
                     "--body-format", "json", "--tag", "nightly", "--max-attempts", "3")

    job = Job.objects.get(pk=created["id"])
    assert (job.project_id, job.name, job.cron_expression, job.timezone) == (
        client_tenant.project.pk, "Nightly report", "0 3 * * *", "Europe/Berlin")
    assert (job.method, job.headers, job.body, job.max_attempts, job.tags) == (
        "POST", {"X-Team": "data"}, '{"a": 1}', 3, ["nightly"])
    assert cli.ok("jobs", "show", job.pk, "-o", "json")["request"]["url"] == "https://example.com/hooks/report"

    table = cli.ok("jobs", "list").out.splitlines()
    assert re.split(r"\s{2,}", table[0]) == ["ID", "NAME", "SCHEDULE", "ENABLED", "NEXT RUN", "LAST STATUS"]
    assert table[1].startswith(str(job.pk)) and "0 3 * * * (Europe/Berlin)" in table[1] and " yes " in table[1]
    assert len(table) == 2
    shown = cli.ok("jobs", "show", job.pk).out  # one field a line
    assert re.search(r"^name\s+Nightly report$", shown, re.M)


def test_create_from_a_json_file_with_options_overriding_it(cli, tmp_path):
    body = tmp_path / "job.json"
    body.write_text(json.dumps({"name": "From the file", "schedule": {"type": "interval", "seconds": 600},
                                "request": {"url": "https://example.com/a", "method": "PUT"}}))
    created = cli.ok("jobs", "create", "--file", body, "--name", "Option wins", "-o", "json")
    job = Job.objects.get(pk=created["id"])
    assert (job.name, job.schedule_type, job.interval_seconds, job.method) == ("Option wins", "interval", 600, "PUT")


def test_update_changes_only_what_is_given(cli, tmp_path):
    job_id = create(cli)["id"]

    cli.ok("jobs", "update", job_id, "--every", "900", "--name", "Every quarter hour")
    job = Job.objects.get(pk=job_id)
    assert (job.schedule_type, job.interval_seconds, job.name, job.url) == (
        "interval", 900, "Every quarter hour", "https://example.com/hooks/report")

    cli.ok("jobs", "update", job_id, "--cron", "30 6 * * *")
    cli.ok("jobs", "update", job_id, "--timezone", "America/New_York")  # keeps the expression
    job.refresh_from_db()
    assert (job.cron_expression, job.timezone) == ("30 6 * * *", "America/New_York")

    patch = tmp_path / "patch.json"
    patch.write_text(json.dumps({"description": "from a file", "tags": ["a", "b"]}))
    updated = cli.ok("jobs", "update", job_id, "--file", patch, "-o", "json")
    assert (updated["description"], updated["tags"]) == ("from a file", ["a", "b"])

    nothing = cli("jobs", "update", job_id)
    assert nothing.code == 2 and "Nothing to change" in nothing.err


def test_pause_resume_and_trigger(cli):
    job_id = create(cli)["id"]

    paused = cli.ok("jobs", "pause", job_id, "-o", "json")
    assert paused["enabled"] is False and Job.objects.get(pk=job_id).enabled is False
    assert [j["id"] for j in cli.ok("jobs", "list", "--disabled", "-o", "json")] == [job_id]
    assert cli.ok("jobs", "list", "--enabled", "-o", "json") == []

    resumed = cli.ok("jobs", "resume", job_id, "-o", "json")
    assert resumed["enabled"] is True and resumed["next_run_at"]

    run = cli.ok("jobs", "trigger", job_id, "-o", "json")
    assert (run["job"], run["trigger"], run["status"]) == (job_id, "manual", "queued")
    listed = cli.ok("executions", "list", "--job", job_id, "-o", "json")
    assert [r["id"] for r in listed] == [run["id"]]


def test_delete_asks_for_yes_and_then_the_job_is_gone(cli):
    job_id = create(cli)["id"]

    unconfirmed = cli("jobs", "delete", job_id)  # standard input is not a terminal
    assert unconfirmed.code == 2 and "--yes" in unconfirmed.err
    assert Job.objects.filter(pk=job_id).exists()

    assert cli.ok("jobs", "delete", job_id, "--yes").out.strip() == f"Deleted job {job_id}"
    assert not Job.objects.filter(pk=job_id).exists()
    gone = cli("jobs", "show", job_id)
    assert gone.code == 4
    assert gone.err.startswith("Error: not_found (HTTP 404)")


def test_deleting_a_job_others_depend_on_shows_the_code_and_the_dependents(cli, client_tenant, make_job):
    upstream = make_job(client_tenant, name="extract")
    downstream = make_job(client_tenant, name="load")
    JobDependency.objects.create(upstream=upstream, downstream=downstream)

    refused = cli("jobs", "delete", upstream.pk, "--yes")

    assert refused.code == 1
    lines = refused.err.splitlines()
    assert lines[0].startswith("Error: has_dependents (HTTP 409): Jobs depend on this one: load.")
    assert f'"job": "{downstream.pk}"' in refused.err and "dependents:" in refused.err
    assert Job.objects.filter(pk=upstream.pk).exists()
    cli.ok("jobs", "delete", upstream.pk, "--yes", "--force")
    assert not Job.objects.filter(pk=upstream.pk).exists()


def test_a_refused_job_shows_the_api_code_and_each_field_and_exits_1(cli):
    refused = cli("jobs", "create", "--name", "Bad", "--cron", "61 * * * *", "--url", "https://example.com/")

    assert refused.code == 1
    first, *fields = refused.err.splitlines()
    assert re.match(r"Error: invalid_cron \(HTTP 400\): .+", first), refused.err
    assert fields and fields[0].startswith("  schedule.expression: ")
    assert refused.out == ""
    assert not Job.objects.exists()


def test_another_tenants_job_is_not_found(cli, other_tenant, make_job):
    theirs = make_job(other_tenant)
    for command in (["jobs", "show"], ["jobs", "pause"], ["jobs", "trigger"], ["next-runs"]):
        result = cli(*command, theirs.pk)
        assert result.code == 4, (command, result.err)
        assert "not_found" in result.err
    assert cli("jobs", "delete", theirs.pk, "--yes").code == 4
    assert Job.objects.get(pk=theirs.pk).enabled


def test_a_read_only_key_may_list_but_not_change(cli, client_tenant, make_job):
    from apps.accounts.apikeys import create_api_key

    job = make_job(client_tenant)
    _, read_only = create_api_key(client_tenant.organization, "read only", scopes=("read",))
    env = {"CRONSVC_API_KEY": read_only}
    assert [j["id"] for j in cli.ok("jobs", "list", "-o", "json", env=env)] == [str(job.pk)]
    refused = cli("jobs", "pause", job.pk, env=env)
    assert refused.code == 3 and "(HTTP 403)" in refused.err


def test_next_runs_in_utc_and_in_the_jobs_timezone(cli):
    job_id = create(cli)["id"]

    runs = cli.ok("next-runs", job_id, "--count", "3", "--after", "2026-01-01T00:00:00Z", "-o", "json")
    assert [run["at"] for run in runs["runs"]] == ["2026-01-01T02:00:00Z", "2026-01-02T02:00:00Z",
                                                   "2026-01-03T02:00:00Z"]
    table = cli.ok("next-runs", job_id, "--count", "2", "--after", "2026-07-01T00:00:00Z").out.splitlines()
    assert table[0] == runs["description"]
    assert re.split(r"\s{2,}", table[1]) == ["AT (UTC)", "LOCAL"]
    assert table[2].split() == ["2026-07-01T01:00:00Z", "2026-07-01T03:00:00+02:00"]


def test_lists_follow_every_page_with_a_small_page_size(cli, client_tenant, make_job, web):
    token = uuid.uuid4().hex[:12]
    names = [f"{token} {n:02d}" for n in range(7)]
    for name in names:
        make_job(client_tenant, name=name)

    listed = []
    requests = web.requests_during(
        lambda: listed.extend(cli.ok("jobs", "list", "--page-size", "2", "--search", token, "-o", "json")),
        "/api/v1/jobs/")
    assert [job["name"] for job in listed] == names  # in the API's order, none missing or doubled
    assert requests == 4  # 2 + 2 + 2 + 1

    limited = cli.ok("jobs", "list", "--page-size", "2", "--limit", "3", "--search", token, "-o", "json")
    assert [job["name"] for job in limited] == names[:3]
    too_big = cli("jobs", "list", "--page-size", "500")
    assert too_big.code == 2 and "--page-size" in too_big.err
