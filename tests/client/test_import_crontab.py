"""`cronsvc jobs import crontab FILE`: a dry run creates nothing, a real one creates a job per
HTTP line; refused lines are listed with their code and make the exit code 1."""

import pytest

from apps.jobs.models import Job

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

GOOD = """\
# nightly jobs
CRON_TZ=Europe/Berlin
0 3 * * * curl -fsS -X POST https://example.com/report -H 'X-Team: data'
*/15 * * * * wget -q -O- https://example.com/ping
"""
MIXED = GOOD + "0 4 * * * /usr/local/bin/backup.sh\n"


def test_a_dry_run_shows_the_jobs_and_creates_none(cli, tmp_path):
    crontab = tmp_path / "crontab"
    crontab.write_text(GOOD)

    table = cli.ok("jobs", "import", "crontab", crontab, "--dry-run").out.splitlines()

    assert table[0].split() == ["LINE", "RESULT", "JOB", "/", "TEXT", "SCHEDULE", "/", "REASON"]
    assert [row.split()[:2] for row in table[1:3]] == [["3", "would"], ["4", "would"]]
    assert table[-1] == "2 job(s) would create, 0 line(s) refused (dry run)"
    assert not Job.objects.exists()


def test_an_import_creates_a_job_for_each_http_line(cli, client_tenant, tmp_path):
    crontab = tmp_path / "crontab"
    crontab.write_text(GOOD)

    result = cli.ok("jobs", "import", "crontab", crontab, "-o", "json")

    assert result["dry_run"] is False and result["errors"] == []
    created = {job["id"]: job["line"] for job in result["jobs"]}
    jobs = Job.objects.filter(pk__in=created)
    assert len(created) == 2 and jobs.count() == 2
    assert {(job.project_id, job.timezone) for job in jobs} == {(client_tenant.project.pk, "Europe/Berlin")}
    assert {job.url for job in jobs} == {"https://example.com/report", "https://example.com/ping"}
    listed = cli.ok("jobs", "list", "-o", "json")
    assert {job["id"] for job in listed} == set(created)


def test_refused_lines_are_listed_with_their_code_and_exit_1(cli, tmp_path):
    crontab = tmp_path / "crontab"
    crontab.write_text(MIXED)

    result = cli("jobs", "import", "crontab", crontab)

    assert result.code == 1
    rows = result.out.splitlines()
    refused = next(row for row in rows if row.startswith("5 "))
    assert "not_http" in refused and "/usr/local/bin/backup.sh" in refused
    assert rows[-1] == "2 job(s) created, 1 line(s) refused"
    assert Job.objects.count() == 2  # the good lines are created all the same


def test_the_crontab_can_come_from_standard_input(cli):
    result = cli("jobs", "import", "crontab", "-", "--dry-run", "-o", "json", input=MIXED)
    assert result.code == 1
    report = result.json()
    assert [(job["line"], job["id"]) for job in report["jobs"]] == [(3, None), (4, None)]
    assert [(error["line"], error["code"]) for error in report["errors"]] == [(5, "not_http")]


def test_a_missing_file_is_a_usage_error(cli, tmp_path):
    result = cli("jobs", "import", "crontab", tmp_path / "nope")
    assert result.code == 2 and "nope" in result.err
