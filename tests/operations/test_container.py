"""The container image built and run with Debian's podman (as root, with runc; its settings in
deploy/podman/containers.conf). No image registry is reachable here, so the Dockerfile is
built from a Debian bookworm base that debootstrap makes on this machine
(scripts/build-base-image.sh, kept between runs); elsewhere the same file builds from
python:3.11-slim-bookworm. The containers share this machine's network (--network host) and
so its PostgreSQL and Redis: the release step on an empty database, then web, scheduler and a
worker; an HTTP job and a script job created through the API and delivered; web and
scheduler run as the image's user, the script-running worker as root (each run then gets a
host user of its own); each stops cleanly on SIGTERM (`podman stop`). Then docker-compose.yml
itself, with podman-compose. docs/deploy.md."""

import json
import os
import secrets
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
import redis
import requests

from tests.support.deploy import ROOT, trigger_and_wait
from tests.support.edit_env import edit_env_file
from tests.support.processes import free_port, wait_for

from .conftest import SHARED_REDIS_GROUP

# One xdist worker builds the image once for all of them (and they take fresh_database).
pytestmark = [pytest.mark.slow, SHARED_REDIS_GROUP]

BASE_IMAGE = "localhost/cronsvc-base:bookworm"
IMAGE = "localhost/cronsvc:test"
CONTAINERS_CONF = ROOT / "deploy/podman/containers.conf"
IMAGE_UID = "10001"  # the Dockerfile's user cronsvc
READYZ_TOKEN = "readyz-test-token-5d27"
REDIS_INDEX = 9  # tests/operations/conftest.py's deploy tests use 8
# /proc unmasked, so that the script sandbox's bubblewrap may mount a proc of its own (with
# the seccomp profile of the sandbox_flags fixture).
SANDBOX_FLAGS = ["--security-opt", "unmask=/proc/*"]


def podman(*args, check=True, timeout=600):
    done = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)})
    if check:
        assert done.returncode == 0, f"podman {' '.join(args)}: {done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def image():
    """The image built from the Dockerfile on the local base (both cached by podman: a rebuild
    redoes only the layers whose files changed)."""
    if not shutil.which("podman") or not shutil.which("debootstrap"):
        pytest.fail("podman and debootstrap are missing: `make test` installs them (the Makefile's containers target)")
    base = subprocess.run([str(ROOT / "scripts/build-base-image.sh"), BASE_IMAGE], capture_output=True, text=True,
                          env={**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}, timeout=1800)
    assert base.returncode == 0, base.stdout[-2000:] + base.stderr[-3000:]
    args = ["build", "--network", "host", "--build-arg", f"BASE_IMAGE={BASE_IMAGE}", "--tag", IMAGE]
    if os.path.exists("/etc/ssl/certs/ca-certificates.crt"):  # pip trusts what this machine trusts
        args += ["--secret", "id=pip_ca,src=/etc/ssl/certs/ca-certificates.crt"]
    podman(*args, str(ROOT), timeout=1800)
    return IMAGE


@pytest.fixture
def env_file(tmp_path, fresh_database):
    """The production example with this machine's database, Redis and a local port filled in.
    A Redis database of these tests' own: the other deploy tests' workers, which may run at
    the same time, consume the same plan queues in theirs."""
    path = tmp_path / "container.env"
    path.write_text((ROOT / "deploy/production.env.example").read_text())
    port = free_port()
    redis_url = fresh_database["REDIS_URL"].rsplit("/", 1)[0] + f"/{REDIS_INDEX}"
    redis.Redis.from_url(redis_url).flushdb()
    edit_env_file(path, {**fresh_database, "REDIS_URL": redis_url, "SECRET_KEY": secrets.token_urlsafe(50),
                         "ALLOWED_HOSTS": "127.0.0.1", "SITE_URL": f"https://127.0.0.1:{port}", "CSRF_TRUSTED_ORIGINS": f"https://127.0.0.1:{port}",
                         "PORT": port, "OUTBOUND_ALLOWED_NETWORKS": "127.0.0.0/8", "METRICS_TOKEN": READYZ_TOKEN,
                         "WEB_CONCURRENCY": 1, "WORKER_CONCURRENCY": 2, "EMAIL_URL": "console://",
                         "LOG_FORMAT": "console"})
    return SimpleNamespace(path=path, port=port)


@pytest.fixture
def containers(image, env_file):
    """Starts named containers of the image as docker-compose.yml runs them (--init, a 60 s
    stop grace period; each its own host name, as compose gives it: on the host's network it
    would otherwise be the host's); removes them all afterwards."""
    prefix = f"cronsvc-test-{uuid.uuid4().hex[:8]}"
    started = []

    def start(process_type, *extra):
        name = f"{prefix}-{process_type}"
        podman("run", "--detach", "--name", name, "--hostname", process_type.replace("_", "-"), "--network", "host",
               "--init", "--stop-timeout", "60",
               "--env-file", str(env_file.path), *extra, image, process_type)
        started.append(name)
        return name

    yield start
    for name in started:
        podman("rm", "--force", "--time", "5", name, check=False)


def run_once(image, env_file, *command):
    return podman("run", "--rm", "--network", "host", "--env-file", str(env_file.path), image, *command, timeout=300)


def test_the_image_runs_the_release_then_delivers_jobs_and_stops_cleanly(image, env_file, containers, target,
                                                                        sandbox_flags):
    release = run_once(image, env_file, "release")
    assert "release: migrations applied, static files collected" in _output(release)
    base = f"http://127.0.0.1:{env_file.port}"
    names = {"web": containers("web"), "scheduler": containers("scheduler"),
             "worker_free": containers("worker_free", "--user", "0", *sandbox_flags)}
    try:
        wait_for(lambda: _alive(base) == {"schedulers": 1, "workers": 1}, timeout=180,
                 message="the web container's /readyz with the scheduler's and the worker's heartbeats")
    except AssertionError as error:
        raise AssertionError(f"{error}; the containers' logs end: {_logs(names)}") from None

    # The processes themselves (not only what `podman exec` starts) run as the image's user;
    # the worker that runs script jobs runs as root, so that each run gets a host user of its
    # own (docs/deploy.md, docs/script-jobs.md).
    assert _users(names["web"]) == _users(names["scheduler"]) == {("cronsvc", IMAGE_UID)}
    assert _users(names["worker_free"]) == {("root", "root")}

    tenant = json.loads(run_once(image, env_file, "python", "manage.py", "createtenant", "--org", "Container",
                                 "--email", "owner@example.com").stdout)
    api = requests.Session()
    api.headers.update({"Authorization": f"Bearer {tenant['api_key']}", "X-Forwarded-Proto": "https"})
    try:
        trigger_and_wait(base, api, target, "/from-the-image")
        _a_script_job_runs_in_the_sandbox(base, api)
    except AssertionError as error:
        raise AssertionError(f"{error}; the containers' logs end: {_logs(names)}") from None

    stopped = {kind: _stop(name) for kind, name in names.items()}
    assert stopped["web"][0] == 0 and "Granian shutdown completed" in stopped["web"][1], stopped["web"]
    assert stopped["scheduler"][0] == 0 and "scheduler: stopped" in stopped["scheduler"][1], stopped["scheduler"]
    assert stopped["worker_free"][0] == 0 and "Warm shutdown" in stopped["worker_free"][1], stopped["worker_free"]


@pytest.fixture(scope="module")
def sandbox_flags(tmp_path_factory):
    """podman's default seccomp profile less its refusal of sethostname, and /proc unmasked."""
    profile = tmp_path_factory.mktemp("seccomp") / "seccomp-for-bwrap.json"
    made = subprocess.run([str(ROOT / "deploy/podman/seccomp-for-bwrap.py")], capture_output=True, text=True, check=True)
    profile.write_text(made.stdout)
    return ["--security-opt", f"seccomp={profile}", *SANDBOX_FLAGS]


def _a_script_job_runs_in_the_sandbox(base, api):
    created = api.post(f"{base}/api/v1/jobs/", json={
        "name": "script in the image", "schedule": {"type": "cron", "expression": "0 3 * * *"}, "kind": "script",
        "script": {"language": "shell", "source": "echo sandboxed as $(id -u) on $(hostname)\n"}})
    assert created.status_code == 201, created.text  # a worker reported that it can sandbox
    job_id = created.json()["id"]
    assert api.post(f"{base}/api/v1/jobs/{job_id}/trigger/").status_code == 202

    def finished():
        runs = api.get(f"{base}/api/v1/jobs/{job_id}/executions/").json()["results"]
        return runs and runs[0]["status"] in ("succeeded", "failed")

    wait_for(finished, timeout=90, interval=0.5, message="the script run to finish")
    run = api.get(f"{base}/api/v1/jobs/{job_id}/executions/").json()["results"][0]
    detail = api.get(f"{base}/api/v1/executions/{run['id']}/").json()
    assert run["status"] == "succeeded", detail
    assert "sandboxed as 1000 on sandbox" in detail["response"]["body"], detail  # the sandbox's user and host name


def _users(name):
    """(user, host user) of every process in the container."""
    words = podman("top", name, "user", "huser").stdout.split()[2:]
    return set(zip(words[::2], words[1::2]))


def _stop(name):
    """`podman stop`: SIGTERM, then SIGKILL after the grace period. Exit code and logs."""
    podman("stop", "--time", "60", name, timeout=120)
    code = int(podman("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip())
    return code, _output(podman("logs", name))


def _alive(base):
    try:
        processes = requests.get(f"{base}/readyz", headers={"Authorization": f"Bearer {READYZ_TOKEN}"},
                                 timeout=2).json().get("processes", {})
    except (requests.RequestException, ValueError):
        return None
    return {kind: sum(1 for p in processes.get(kind, []) if p["alive"]) for kind in ("schedulers", "workers")}


def _logs(names):
    return {kind: _output(podman("logs", name, check=False))[-3000:] for kind, name in names.items()}


def _output(done):
    return done.stdout + done.stderr


def test_the_image_holds_the_platform_not_its_tests_or_benchmarks(image):
    listing = podman("run", "--rm", image, "python", "-c", "import os; print(' '.join(sorted(os.listdir('/app'))))")
    files = set(listing.stdout.split())
    assert {"apps", "config", "cronsvc", "manage.py", "Procfile", "static"} <= files, files
    assert not files & {"tests", "bench", "soak", ".git", ".venv"}, files


def test_without_the_sandbox_flags_the_image_says_why_script_jobs_cannot_run(image, sandbox_flags):
    # podman's default seccomp profile refuses bubblewrap's sethostname: a worker started so
    # refuses script jobs (and logs this reason) rather than running them unsandboxed. With
    # the settings of docs/deploy.md (root: each run a host user of its own) the check passes.
    check = "from cronsvc.sandbox import sandbox_available as a; s = a(); print(s.ok, s.reason)"
    plain = podman("run", "--rm", image, "python", "-c", check).stdout
    assert plain.startswith("False bubblewrap cannot start a sandbox here"), plain
    flagged = podman("run", "--rm", "--user", "0", *sandbox_flags, image, "python", "-c", check).stdout
    assert flagged.strip() == "True", flagged
    # As the image's user, the run's process limit counts every process of uid 10001 on the
    # host: here a dozen of the worker's own. The reason says so and what to do.
    busy = "import subprocess; [subprocess.Popen(['sleep', '20']) for _ in range(12)]; " + check
    non_root = podman("run", "--rm", *sandbox_flags, image, "python", "-c", busy).stdout
    assert non_root.startswith("False bubblewrap cannot start a sandbox here"), non_root
    assert f"counts every process of uid {IMAGE_UID} on the host: run the worker as root" in non_root, non_root


def test_podman_compose_brings_up_the_compose_file_on_this_machine(image, tmp_path, env_file):
    """docker-compose.yml with deploy/podman/compose.local.yml over it: the host's PostgreSQL
    and Redis instead of the registry's postgres and redis images (left out with --no-deps),
    so the release is started first by hand, as compose's service_completed_successfully would."""
    compose = Path(sys.executable).parent / "podman-compose"
    for name in ("docker-compose.yml", "deploy/podman/compose.local.yml"):
        shutil.copy(ROOT / name, tmp_path / Path(name).name)
    shutil.copy(env_file.path, tmp_path / ".env")
    podman("tag", image, "cronsvc:latest")
    project = f"cronsvc-test-{uuid.uuid4().hex[:8]}"
    fresh = dict(line.split("=", 1) for line in env_file.path.read_text().splitlines()
                 if line.startswith(("DATABASE_URL=", "REDIS_URL=")))
    environment = {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF),
                   "LOCAL_DATABASE_URL": fresh["DATABASE_URL"], "LOCAL_REDIS_URL": fresh["REDIS_URL"]}

    def podman_compose(*args):
        done = subprocess.run([str(compose), "--project-name", project, "-f", "docker-compose.yml",
                               "-f", "compose.local.yml", *args], cwd=tmp_path, env=environment,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"podman-compose {' '.join(args)}: {_output(done)[-3000:]}"
        return done

    services = ["web", "scheduler", "worker_free", "worker_default", "housekeeping"]
    try:
        podman_compose("up", "-d", "--no-build", "--no-deps", "release")
        assert podman("wait", f"{project}_release_1", timeout=300).stdout.strip() == "0", \
            _output(podman("logs", f"{project}_release_1"))[-3000:]
        podman_compose("up", "-d", "--no-build", "--no-deps", *services)
        names = {service: f"{project}_{service}_1" for service in services}
        base = f"http://127.0.0.1:{env_file.port}"
        try:
            wait_for(lambda: _alive(base) == {"schedulers": 1, "workers": 2}, timeout=180,
                     message="the compose web service's /readyz with the scheduler's and both workers' heartbeats")
        except AssertionError as error:
            raise AssertionError(f"{error}: {_alive(base)}; podman ps: {podman('ps', '-a').stdout}; "
                                 f"the containers' logs end: {_logs(names)}") from None
        for name in names.values():
            assert _users(name) == {("cronsvc", IMAGE_UID)}, name
        podman_compose("stop")  # SIGTERM to each, then the grace period
        codes = {service: podman("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip()
                 for service, name in names.items()}
        assert set(codes.values()) == {"0"}, (codes, _logs(names))
    finally:
        podman_compose("down")
