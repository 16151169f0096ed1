"""Script jobs end to end: created through the API, refused where no worker can sandbox, run
by a real Celery worker in the sandbox, recorded like a response, retried like a 5xx.
docs/script-jobs.md"""

import json
import uuid

import pytest
from django.db import connection

from apps.executions.worker import scripts
from apps.executions.models import Execution
from apps.executions.shared_redis import redis_client
from apps.executions.scheduling.triggers import trigger_now
from apps.jobs.models import Job
from tests.api.conftest import error_of
from tests.support.processes import start_scheduler, start_worker, wait_for

FAST = dict(SWEEPER_INTERVAL=0.5, SWEEPER_REPUBLISH_AFTER=30, DELIVERY_LEASE_MARGIN=2)


def script_job(language="shell", source="echo hello\n", **extra):
    body = {"name": "script", "schedule": {"type": "cron", "expression": "0 0 1 1 *"}, "kind": "script",
            "script": {"language": language, "source": source}}
    body["script"].update(extra.pop("script", {}))
    body.update(extra)
    return body


@pytest.fixture(autouse=True)
def _own_report_key(settings):
    """Each test its own key: another test (or a worker) reporting must not be seen here."""
    settings.SANDBOX_REPORT_KEY = f"test:sandbox:{uuid.uuid4()}"


@pytest.fixture
def sandbox_reported(settings):
    client = redis_client()
    assert scripts.report_availability(client), "this host must be able to sandbox (make sandbox)"
    yield
    client.delete(settings.SANDBOX_REPORT_KEY)


@pytest.mark.django_db
def test_script_jobs_are_refused_where_no_worker_can_sandbox(api, settings):
    redis_client().delete(settings.SANDBOX_REPORT_KEY)
    response = api.post("/api/v1/jobs/", script_job(), format="json")
    assert response.status_code == 400, response.json()
    assert error_of(response)["code"] == "sandbox_unavailable"
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_a_script_job_is_created_with_its_env_encrypted_and_masked(api, sandbox_reported):
    response = api.post("/api/v1/jobs/", script_job(script={"env": {"TOKEN": "s3cr3t-value"}}), format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["kind"] == "script"
    assert body["script"] == {"language": "shell", "source": "echo hello\n", "env": {"TOKEN": "••••"},
                              "allow_network": False}
    job = Job.objects.get(pk=body["id"])
    assert job.script_env == {"TOKEN": "s3cr3t-value"}
    with connection.cursor() as cursor:
        cursor.execute("SELECT script_env::text FROM jobs_job WHERE id = %s", [job.pk])
        assert "s3cr3t-value" not in cursor.fetchone()[0]
    # '••••' keeps the stored value; a new value replaces it
    response = api.patch(f"/api/v1/jobs/{job.pk}/", {"script": {"language": "shell", "source": "true\n",
                                                               "env": {"TOKEN": "••••", "B": "2"}}}, format="json")
    assert response.status_code == 200, response.json()
    job.refresh_from_db()
    assert job.script_env == {"TOKEN": "s3cr3t-value", "B": "2"}


@pytest.mark.django_db
@pytest.mark.parametrize(("extra", "code"), [
    ({"script": {"source": "x" * (64 * 1024 + 1)}}, "max_length"),
    ({"script": {"env": {"BAD=NAME": "1"}}}, "script_env"),
    ({"script": {"language": "ruby"}}, "invalid_choice"),
])
def test_invalid_scripts_are_refused_with_a_code(api, sandbox_reported, extra, code):
    response = api.post("/api/v1/jobs/", script_job(**extra), format="json")
    assert response.status_code == 400, response.json()
    assert error_of(response)["code"] == code, response.json()


@pytest.mark.django_db
def test_allow_network_is_stored_and_shown(api, sandbox_reported):
    response = api.post("/api/v1/jobs/", script_job(script={"allow_network": True}), format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["script"]["allow_network"] is True
    job = Job.objects.get(pk=response.json()["id"])
    assert job.script_allow_network is True
    # a PATCH of the script without it keeps it; false turns it off
    response = api.patch(f"/api/v1/jobs/{job.pk}/", {"script": {"language": "shell", "source": "true\n"}},
                         format="json")
    assert response.status_code == 200 and response.json()["script"]["allow_network"] is True, response.json()
    response = api.patch(f"/api/v1/jobs/{job.pk}/", {"script": {"language": "shell", "source": "true\n",
                                                               "allow_network": False}}, format="json")
    assert response.status_code == 200 and response.json()["script"]["allow_network"] is False, response.json()
    job.refresh_from_db()
    assert job.script_allow_network is False


@pytest.mark.django_db
def test_an_http_job_still_needs_a_url(api):
    response = api.post("/api/v1/jobs/", {"name": "h", "schedule": {"type": "none"}}, format="json")
    assert response.status_code == 400
    assert error_of(response)["code"] == "required"


# -- the sandbox through the job path (no worker: scripts.execute with the job and its plan)

@pytest.mark.django_db
@pytest.mark.parametrize(("language", "source", "kind"), [
    # filling memory: dash dies of SIGSEGV at the address-space limit; recorded as oom
    ("shell", 'x=aaaaaaaaaaaaaaaa; while true; do x="$x$x"; done\n', "oom"),
    ("python", "b = bytearray(1 << 34)\n", "oom"),
    # reaching the network
    ("python", "import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=2)\n", "script_exit"),
    # reading the host's files: the worker's tree is not there
    ("shell", "cat /work/main/manage.py || ls /root\n", "script_exit"),
    # a fork bomb
    ("python", "import os\nwhile True:\n    os.fork()\n", "process_limit"),
    # outliving the timeout
    ("shell", "sleep 60\n", "timeout"),
])
def test_escapes_fail_through_the_job_path(make_tenant, make_job, language, source, kind):
    tenant = make_tenant(plan="free")
    plan = tenant.organization.plan
    plan.script_wall_seconds, plan.script_memory_mb = 3, 64
    job = make_job(tenant, url="", kind="script", script_language=language, script_source=source)
    result = scripts.execute(job, plan)
    assert result.error_kind == kind, (result.error_message, result.headers)
    assert "manage.py" not in result.body_excerpt


@pytest.mark.django_db
def test_a_script_writing_nul_and_bytes_that_are_not_text_is_recorded(make_tenant, make_job):
    """Its stdout and stderr are kept as PostgreSQL can keep them (cronsvc.delivery.outcome.
    storable_text): a NUL failed the run's recording, and the run was sent again after every
    lease (tests/delivery/test_runs.py has the HTTP answer's case)."""
    from django.utils import timezone

    from apps.executions.worker.batch import run_batch

    tenant = make_tenant(plan="free")
    job = make_job(tenant, url="", kind="script", script_language="shell",
                   script_source="printf 'a\\000b\\377 end'; printf 'e\\000r' >&2\n")
    result = scripts.execute(job, tenant.organization.plan)
    assert result.error_kind is None, (result.error_message, result.headers)
    assert result.body_excerpt == "a\ufffdb\ufffd end" and result.headers["stderr"] == "e\ufffdr"
    execution = Execution.objects.create(job=job, organization=tenant.organization, scheduled_for=timezone.now(),
                                         queue="q")
    run_batch([execution.id])
    execution.refresh_from_db()
    assert execution.status == "succeeded" and execution.response_body == "a\ufffdb\ufffd end"
    assert execution.response_headers["stderr"] == "e\ufffdr"


# What a script fetches through HTTP_PROXY: status, X-Egress-Error and body, or the error.
FETCH = """
import json, urllib.error, urllib.request
seen = {}
for url in URLS:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            seen[url] = [answer.status, None, answer.read().decode()]
    except urllib.error.HTTPError as e:
        seen[url] = [e.code, e.headers.get("X-Egress-Error"), e.read().decode()]
    except OSError as e:
        seen[url] = ["error", None, repr(e)]
print(json.dumps(seen))
"""


def fetching(*urls):
    """A Python script that fetches `urls` and prints what came back (FETCH)."""
    return f"URLS = {list(urls)!r}\n" + FETCH


def fetch_through_the_job(make_tenant, make_job, urls, allow_network=True):
    tenant = make_tenant(plan="free")
    job = make_job(tenant, url="", kind="script", script_language="python", script_allow_network=allow_network,
                   script_source=fetching(*urls))
    result = scripts.execute(job, tenant.organization.plan)
    assert result.error_kind is None, (result.error_message, result.headers)
    return json.loads(result.body_excerpt)


@pytest.fixture
def only_the_target(settings, target):
    """The worker's policy as an operator would set it for a test endpoint on loopback."""
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    settings.OUTBOUND_ALLOWED_PORTS = str(target.server.server_address[1])
    return target


@pytest.mark.django_db
def test_a_script_with_network_reaches_an_allowed_target_and_nothing_else(make_tenant, make_job, only_the_target):
    target, port = only_the_target, only_the_target.server.server_address[1]
    allowed = target.url("/from-a-script")
    refused = {f"http://169.254.169.254:{port}/latest/meta-data/": "link-local",
               f"http://10.20.30.40:{port}/": "private",
               f"http://[::1]:{port}/": "loopback",
               "http://127.0.0.1:5432/": "port 5432 is not allowed",
               "http://127.0.0.1:6379/": "port 6379 is not allowed"}
    seen = fetch_through_the_job(make_tenant, make_job, [allowed, *refused])
    assert seen[allowed][0] == 200, seen
    assert len(target.requests_to("/from-a-script")) == 1
    for url, reason in refused.items():
        status, code, body = seen[url]
        assert (status, code) == (403, "egress_forbidden") and reason in body, (url, seen[url])
    assert len(target.received) == 1


@pytest.mark.django_db
def test_the_worker_policy_decides_loopback_and_names_are_checked_after_resolving(make_tenant, make_job, settings,
                                                                                   target):
    settings.OUTBOUND_ALLOWED_NETWORKS = []  # the default: loopback refused
    port = target.server.server_address[1]
    urls = [target.url("/"), f"http://localhost:{port}/"]
    seen = fetch_through_the_job(make_tenant, make_job, urls)
    assert [seen[url][:2] for url in urls] == [[403, "egress_forbidden"]] * 2, seen
    assert "localhost (" in seen[urls[1]][2] and "loopback" in seen[urls[1]][2]
    assert target.received == []


@pytest.mark.django_db
def test_without_allow_network_a_script_has_no_proxy_and_no_way_out(make_tenant, make_job, only_the_target):
    seen = fetch_through_the_job(make_tenant, make_job, [only_the_target.url("/nope")], allow_network=False)
    assert seen[only_the_target.url("/nope")][0] == "error"
    assert only_the_target.received == []


@pytest.mark.django_db
def test_a_script_does_not_see_another_jobs_environment(make_tenant, make_job):
    tenant = make_tenant()
    make_job(tenant, url="", kind="script", script_language="shell", script_source="sleep 1\n",
             script_env={"OTHER_SECRET": "theirs"})
    mine = make_job(tenant, url="", kind="script", script_language="shell", script_source="env; cat /proc/*/environ\n",
                    script_env={"MINE": "1"})
    result = scripts.execute(mine, tenant.organization.plan)
    output = result.body_excerpt + result.headers["stderr"]
    assert "MINE=1" in output and "theirs" not in output and "OTHER_SECRET" not in output


# -- a real worker

@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_script_job_runs_in_a_real_worker_and_a_failing_one_retries(tmp_path, make_tenant, api, tenant,
                                                                       live_broker, settings, target):
    scheduler = start_scheduler(tmp_path, **FAST, **live_broker.env)  # it hands retries back when due
    worker = start_worker(tmp_path, [live_broker.private_queue(tenant)], SANDBOX_REPORT_KEY=settings.SANDBOX_REPORT_KEY,
                          OUTBOUND_ALLOWED_NETWORKS="127.0.0.1/32",
                          OUTBOUND_ALLOWED_PORTS=str(target.server.server_address[1]), **FAST, **live_broker.env)
    try:
        # the worker reports that it can sandbox; until then script jobs are refused
        wait_for(lambda: redis_client().exists(settings.SANDBOX_REPORT_KEY), timeout=30,
                 message="the worker to report the sandbox")
        ok = api.post("/api/v1/jobs/", script_job("python", "import os\nprint('6x7 =', 6 * 7, os.environ['N'])\n",
                                                  script={"env": {"N": "n1"}}), format="json")
        assert ok.status_code == 201, ok.json()
        failing = api.post("/api/v1/jobs/", script_job(
            "shell", "echo doomed >&2\nexit 3\n",
            retry={"max_attempts": 2, "initial_delay_seconds": 1, "max_delay_seconds": 1}), format="json")
        assert failing.status_code == 201, failing.json()
        online = api.post("/api/v1/jobs/", script_job("python", fetching(target.url("/from-a-worker")),
                                                      script={"allow_network": True}), format="json")
        assert online.status_code == 201, online.json()
        good = trigger_now(Job.objects.get(pk=ok.json()["id"]))
        bad = trigger_now(Job.objects.get(pk=failing.json()["id"]))
        fetched = trigger_now(Job.objects.get(pk=online.json()["id"]))
        wait_for(lambda: Execution.objects.get(pk=good.pk).status == "succeeded", timeout=60,
                 message="the script to succeed")
        wait_for(lambda: Execution.objects.get(pk=fetched.pk).status == "succeeded", timeout=60,
                 message="the script with network to succeed")
        wait_for(lambda: Execution.objects.get(pk=bad.pk).status in ("dead", "failed"), timeout=60,
                 message="the failing script to give up")
    finally:
        scheduler.stop()
        worker.stop()
        redis_client().delete(settings.SANDBOX_REPORT_KEY)
    (attempt,) = Execution.objects.get(pk=fetched.pk).attempts.all()
    assert json.loads(attempt.response_body)[target.url("/from-a-worker")][0] == 200, attempt.response_body
    assert len(target.requests_to("/from-a-worker")) == 1
    (attempt,) = Execution.objects.get(pk=good.pk).attempts.all()
    assert attempt.response_body == "6x7 = 42 n1\n"
    assert attempt.response_headers["exit-code"] == "0" and attempt.outcome == "succeeded"
    assert attempt.response_status is None
    bad.refresh_from_db()
    assert bad.status == "dead" and bad.attempt == 2
    attempts = list(bad.attempts.order_by("number"))
    assert [(a.outcome, a.error_kind, a.response_headers["exit-code"]) for a in attempts] == [
        ("failed", "script_exit", "3")] * 2
    assert attempts[0].response_headers["stderr"] == "doomed\n"
