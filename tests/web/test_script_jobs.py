"""Script jobs on the pages: the job form (kind, language, source, masked environment), its
errors, duplicate, the job and run pages, tenancy. docs/web-pages.md, docs/script-jobs.md"""

import re
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.html import escape

from apps.accounts.models import AuditEvent
from apps.executions.worker import scripts
from apps.executions.models import Attempt, Execution
from apps.executions.shared_redis import redis_client
from apps.jobs.models import Job
from cronsvc.delivery.masking import MASK
from cronsvc.sandbox import Reason, Result
from tests.web.conftest import job_form


def html(response):
    return response.content.decode()


def network_checked(page):
    """Whether the page's "Allow outbound HTTP(S)" checkbox is checked (it must be there)."""
    found = re.search(r'<input type="checkbox" id="id_script_allow_network" name="script_allow_network" (checked)?',
                      page)
    assert found, "no network checkbox on the page"
    return bool(found.group(1))


def script_form(tenant, **overrides):
    """The job form with the script kind chosen; the request fields are posted too (as the
    browser does without JavaScript), with a URL the API would refuse, so a script job that
    sent them would fail."""
    return job_form(tenant, **{
        "kind": "script", "script_language": "shell", "script_source": "echo hello\r\necho $REGION\r\n",
        "env_name": ["REGION", "TOKEN", ""], "env_value": ["eu", "s3cr3t-token", ""],
        "url": "http://10.1.2.3/internal", **overrides})


@pytest.fixture(autouse=True)
def _own_report_key(settings):
    """Each test its own key: a worker (or another test) reporting must not be seen here."""
    settings.SANDBOX_REPORT_KEY = f"test:sandbox:{uuid.uuid4()}"
    yield
    redis_client().delete(settings.SANDBOX_REPORT_KEY)


@pytest.fixture
def sandbox_reported(settings):
    """What a worker that can sandbox says (apps/executions/worker/scripts.report_availability)."""
    redis_client().set(settings.SANDBOX_REPORT_KEY, "v1", ex=scripts.AVAILABLE_TTL)


@pytest.fixture
def script_job(tenant, make_job):
    return make_job(tenant, name="nightly script", url="", kind="script", script_language="python",
                    script_source="print('<b>hi</b>')\n", script_env={"REGION": "eu", "TOKEN": "s3cr3t-token"})


# --- the form


def test_create_a_script_job_through_the_form(tenant, owner, sandbox_reported):
    response = owner.post("/jobs/new/", script_form(tenant))
    assert response.status_code == 302, html(response)
    job = Job.objects.get(name="Nightly report")
    assert response["Location"] == f"/jobs/{job.pk}/"
    assert job.kind == "script" and job.script_language == "shell"
    assert job.script_source == "echo hello\necho $REGION\n"  # the textarea's CRLF made LF
    assert job.script_env == {"REGION": "eu", "TOKEN": "s3cr3t-token"}
    assert job.url == ""  # the request fields were not sent
    assert AuditEvent.objects.filter(action="job.create", target_id=str(job.pk)).exists()


@pytest.mark.parametrize(("posted", "allowed"), [({"script_allow_network": "on"}, True), ({}, False)])
def test_create_a_script_job_with_or_without_the_network(tenant, owner, sandbox_reported, posted, allowed):
    """The checkbox is the API's script.allow_network; a browser sends nothing for it unchecked."""
    response = owner.post("/jobs/new/", script_form(tenant, **posted))
    assert response.status_code == 302, html(response)
    job = Job.objects.get(name="Nightly report")
    assert job.kind == "script" and job.script_allow_network is allowed


def test_the_network_checkbox_stays_checked_when_the_form_comes_back(tenant, owner):
    """No worker has reported: the form is shown again with the box as posted."""
    response = owner.post("/jobs/new/", script_form(tenant, script_allow_network="on"))
    assert response.status_code == 400
    assert network_checked(html(response))
    assert not network_checked(html(owner.post("/jobs/new/", script_form(tenant))))


def test_the_kind_decides_which_fields_are_saved(tenant, owner, sandbox_reported):
    """Both field sets are posted; an http job ignores the script's."""
    response = owner.post("/jobs/new/", script_form(tenant, kind="http", url="https://example.com/hook"))
    assert response.status_code == 302
    job = Job.objects.get()
    assert job.kind == "http" and job.url == "https://example.com/hook"
    assert job.script_source == "" and job.script_env is None


def test_the_new_job_form_offers_both_kinds(tenant, owner):
    page = html(owner.get("/jobs/new/"))
    assert 'name="kind" value="http" checked' in page and 'name="kind" value="script" >' in page
    assert 'data-job-kind="http"' in page and 'data-job-kind="script"' in page
    assert 'name="script_source"' in page and 'name="env_name"' in page
    assert '<option value="python" selected>Python</option>' in page
    assert "Allow outbound HTTP(S) (through the platform's address guard)" in page
    assert not network_checked(page)


def test_the_edit_form_shows_env_names_never_their_values(owner, script_job):
    page = html(owner.get(f"/jobs/{script_job.pk}/edit/"))
    assert 'name="kind" value="script" checked' in page
    assert escape("print('<b>hi</b>')") in page
    assert 'value="REGION"' in page and 'value="TOKEN"' in page
    assert page.count(f'name="env_value" value="{MASK}"') == 2
    assert "s3cr3t-token" not in page and 'value="eu"' not in page


def test_edit_keeps_an_env_value_left_masked(tenant, owner, script_job):
    """No worker has reported: a job that is already a script job may still be changed."""
    form = script_form(tenant, name="renamed", script_language="python", script_source="print(1)\n",
                       env_name=["REGION", "TOKEN", "NEW", ""], env_value=[MASK, "rotated", "x", ""])
    response = owner.post(f"/jobs/{script_job.pk}/edit/", form)
    assert response.status_code == 302, html(response)
    script_job.refresh_from_db()
    assert script_job.name == "renamed" and script_job.script_source == "print(1)\n"
    assert script_job.script_env == {"REGION": "eu", "TOKEN": "rotated", "NEW": "x"}
    # a row removed (or its name cleared) removes the variable
    form.update(env_name=["", "TOKEN"], env_value=[MASK, MASK])
    assert owner.post(f"/jobs/{script_job.pk}/edit/", form).status_code == 302
    script_job.refresh_from_db()
    assert script_job.script_env == {"TOKEN": "rotated"}


def test_edit_turns_the_network_on_and_off(tenant, owner, script_job):
    assert not network_checked(html(owner.get(f"/jobs/{script_job.pk}/edit/")))
    form = script_form(tenant, name="nightly script", env_name=["REGION", "TOKEN"], env_value=[MASK, MASK],
                       script_allow_network="on")
    assert owner.post(f"/jobs/{script_job.pk}/edit/", form).status_code == 302
    script_job.refresh_from_db()
    assert script_job.script_allow_network is True
    assert network_checked(html(owner.get(f"/jobs/{script_job.pk}/edit/")))
    # unchecked, the browser posts nothing for it: that turns it off (not "keep the stored value")
    del form["script_allow_network"]
    assert owner.post(f"/jobs/{script_job.pk}/edit/", form).status_code == 302
    script_job.refresh_from_db()
    assert script_job.script_allow_network is False
    assert script_job.script_env == {"REGION": "eu", "TOKEN": "s3cr3t-token"}
    assert not network_checked(html(owner.get(f"/jobs/{script_job.pk}/edit/")))


def test_an_http_job_can_become_a_script_job_and_back(tenant, owner, make_job, sandbox_reported):
    job = make_job(tenant, name="switching")
    assert owner.post(f"/jobs/{job.pk}/edit/", script_form(tenant, name="switching")).status_code == 302
    job.refresh_from_db()
    assert job.kind == "script" and job.script_env == {"REGION": "eu", "TOKEN": "s3cr3t-token"}
    form = script_form(tenant, name="switching", kind="http", url="https://example.com/back")
    assert owner.post(f"/jobs/{job.pk}/edit/", form).status_code == 302
    job.refresh_from_db()
    assert job.kind == "http" and job.url == "https://example.com/back"


def test_no_worker_can_sandbox_is_shown_on_the_form(tenant, owner):
    response = owner.post("/jobs/new/", script_form(tenant))
    assert response.status_code == 400
    page = html(response)
    assert 'id="id_kind-error"' in page and "No worker can run scripts in a sandbox right now" in page
    assert not Job.objects.exists()
    # the posted script comes back, the kind still chosen
    assert 'name="kind" value="script" checked' in page and "echo $REGION" in page


@pytest.mark.parametrize(("overrides", "field", "message"), [
    ({"script_source": "é" * 40000}, "script_source", "a script may be at most 65536 bytes, this one is 80000"),
    ({"script_source": "x" * 65537}, "script_source", "no more than 65536 characters"),
    ({"script_source": ""}, "script_source", "This field may not be blank."),
    ({"script_language": "ruby"}, "script_language", "&quot;ruby&quot; is not a valid choice."),
    ({"env_name": ["BAD-NAME"], "env_value": ["1"]}, "script_env", "invalid environment variable &#x27;BAD-NAME&#x27;"),
    ({"env_name": ["TOKEN"], "env_value": [MASK]}, "script_env", f"Give the value of TOKEN; &#x27;{MASK}&#x27; only"),
    ({"env_name": [""], "env_value": ["orphan value"]}, "script_env", "invalid environment variable &#x27;&#x27;"),
])
def test_invalid_scripts_are_shown_beside_their_fields(tenant, owner, sandbox_reported, overrides, field, message):
    response = owner.post("/jobs/new/", script_form(tenant, **overrides))
    assert response.status_code == 400
    page = html(response)
    assert f'id="id_{field}-error"' in page, page[page.find("error-summary"):][:600]
    assert message in page
    assert not Job.objects.exists()


def test_the_test_run_is_for_http_jobs_only(tenant, owner, sandbox_reported):
    page = html(owner.post("/jobs/test-run/", script_form(tenant)))
    assert "a script runs only on a worker" in page and "Run now" in page
    assert not Job.objects.exists()


# --- duplicate


def test_duplicate_a_script_job_keeps_its_env(owner, script_job, sandbox_reported):
    response = owner.post(f"/jobs/{script_job.pk}/duplicate/")
    copy = Job.objects.get(name="nightly script (copy)")
    assert response["Location"] == f"/jobs/{copy.pk}/edit/"
    assert copy.kind == "script" and not copy.enabled and copy.script_language == "python"
    assert copy.script_source == script_job.script_source
    assert copy.script_env == {"REGION": "eu", "TOKEN": "s3cr3t-token"}


@pytest.mark.parametrize("allowed", [True, False])
def test_duplicate_copies_the_network_setting(owner, script_job, sandbox_reported, allowed):
    Job.objects.filter(pk=script_job.pk).update(script_allow_network=allowed)
    owner.post(f"/jobs/{script_job.pk}/duplicate/")
    copy = Job.objects.get(name="nightly script (copy)")
    assert copy.script_allow_network is allowed
    assert network_checked(html(owner.get(f"/jobs/{copy.pk}/edit/"))) is allowed


def test_duplicate_says_why_it_could_not(owner, script_job):
    response = owner.post(f"/jobs/{script_job.pk}/duplicate/", follow=True)
    assert "Could not duplicate: No worker can run scripts" in html(response)
    assert Job.objects.count() == 1


# --- job, run and dashboard pages


def test_the_job_page_shows_the_script_not_a_request(owner, script_job):
    page = html(owner.get(f"/jobs/{script_job.pk}/"))
    assert "Script, Python" in page and escape("print('<b>hi</b>')") in page
    assert f"REGION={MASK}" in page and f"TOKEN={MASK}" in page and "s3cr3t-token" not in page
    assert "exit code 0" in page
    assert "<dt>Request</dt>" not in page and "<dt>Authentication</dt>" not in page
    assert "<dt>Network</dt><dd>none</dd>" in page


def test_the_job_page_shows_the_network(owner, script_job):
    Job.objects.filter(pk=script_job.pk).update(script_allow_network=True)
    page = html(owner.get(f"/jobs/{script_job.pk}/"))
    assert "<dt>Network</dt><dd>outbound HTTP through the guard</dd>" in page


def test_an_http_job_page_has_no_network_line(tenant, owner, make_job):
    page = html(owner.get(f"/jobs/{make_job(tenant, name='webhook').pk}/"))
    assert "<dt>Network</dt>" not in page


def test_the_dashboard_shows_the_kind(tenant, owner, make_job, script_job):
    make_job(tenant, name="webhook", method="POST", url="https://example.com/hook")
    page = html(owner.get("/"))
    assert "Python script" in page and "POST https://example.com/hook" in page


def recorded_run(job, result, monkeypatch):
    """An execution of ``job`` recorded from a sandbox ``result`` the way a worker records it:
    scripts.execute's response columns (the sandbox itself is not run here)."""
    monkeypatch.setattr(scripts, "run_script", lambda script, limits, egress=None: result)
    run = scripts.execute(job, job.organization.plan)
    now = timezone.now()
    outcome = scripts.outcome(run)
    status = "succeeded" if outcome.succeeded else "failed"
    execution = Execution.objects.create(
        job=job, organization=job.organization, scheduled_for=now - timedelta(minutes=1), status=status,
        started_at=now, finished_at=now, duration_ms=round(run.duration_ms), attempt=1,
        response_headers=run.headers, response_body=run.body_excerpt, error_kind=run.error_kind or "",
        error_message=run.error_message or "")
    Attempt.objects.create(
        execution=execution, number=1, started_at=now, duration_ms=round(run.duration_ms), request_method="",
        request_url="", response_status=None, response_headers=run.headers, response_body=run.body_excerpt,
        outcome=status, error_kind=run.error_kind or "", error_message=run.error_message or "")
    return execution


def test_the_run_page_shows_exit_code_stdout_and_stderr(owner, script_job, monkeypatch):
    execution = recorded_run(script_job, Result(
        exit_code=3, signal=None, stdout=b"counted <42> rows\n", stderr=b"Traceback: boom\n",
        stdout_truncated=False, stderr_truncated=False, duration=0.25, cpu_seconds=0.125, reason=None), monkeypatch)
    page = html(owner.get(f"/executions/{execution.pk}/"))
    assert "<dt>Exit code</dt><dd><code>3</code>" in page
    assert "counted &lt;42&gt; rows" in page and "Traceback: boom" in page
    assert "<dt>Limit hit</dt><dd>none" in page and "0.125 s" in page
    assert "HTTP" not in page.split('class="execution-detail"')[1] and "Request as sent" not in page
    history = html(owner.get(f"/jobs/{script_job.pk}/history/"))
    assert "exit 3" in history and "counted &lt;42&gt; rows" in history


def test_the_run_page_shows_the_limit_hit(owner, script_job, monkeypatch):
    execution = recorded_run(script_job, Result(
        exit_code=None, signal=9, stdout=b"x" * 10, stderr=b"", stdout_truncated=True, stderr_truncated=False,
        duration=3.0, cpu_seconds=0.0, reason=Reason.TIMEOUT), monkeypatch)
    page = html(owner.get(f"/executions/{execution.pk}/", HTTP_HX_REQUEST="true"))
    assert "none (killed before it exited), signal 9" in page
    assert ">timeout</span> wall-clock time limit" in page
    assert "Output (stdout), cut at the plan's output limit" in page and "(nothing)" in page
    assert "timeout" in html(owner.get(f"/jobs/{script_job.pk}/history/"))


def test_a_script_that_never_started_says_so(owner, script_job, monkeypatch):
    from cronsvc.sandbox import SandboxUnavailable

    def unavailable(script, limits, egress=None):
        raise SandboxUnavailable("bubblewrap not found")

    monkeypatch.setattr(scripts, "run_script", unavailable)
    run = scripts.execute(script_job, script_job.organization.plan)
    execution = Execution.objects.create(job=script_job, organization=script_job.organization,
                                         scheduled_for=timezone.now(), status="failed",
                                         error_kind=run.error_kind, error_message=run.error_message)
    Attempt.objects.create(execution=execution, number=1, started_at=timezone.now(), request_method="",
                           request_url="", outcome="failed", error_kind=run.error_kind,
                           error_message=run.error_message)
    page = html(owner.get(f"/executions/{execution.pk}/"))
    assert "The script did not start." in page and "sandbox unavailable" in page
    assert "Request as sent" not in page


# --- tenancy


def test_another_organizations_script_job_is_404(tenant, other_tenant, owner, make_job, sandbox_reported):
    theirs = make_job(other_tenant, name="their script", url="", kind="script", script_language="shell",
                      script_source="echo theirs\n", script_env={"THEIR_TOKEN": "not-yours"})
    execution = Execution.objects.create(job=theirs, organization=other_tenant.organization,
                                         scheduled_for=timezone.now(), response_body="their output",
                                         response_headers={"exit-code": "0", "stderr": ""})
    for url in ("/jobs/{}/", "/jobs/{}/edit/", "/jobs/{}/history/"):
        assert owner.get(url.format(theirs.pk)).status_code == 404, url
    assert owner.post(f"/jobs/{theirs.pk}/duplicate/").status_code == 404
    assert owner.post(f"/jobs/{theirs.pk}/edit/", script_form(tenant)).status_code == 404
    assert owner.get(f"/executions/{execution.pk}/").status_code == 404
    assert "their script" not in html(owner.get("/"))
    theirs.refresh_from_db()
    assert theirs.script_env == {"THEIR_TOKEN": "not-yours"} and Job.objects.count() == 1
