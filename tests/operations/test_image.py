"""The container image and the compose file, checked without a container engine: the
Dockerfile's shape, the compose file's services against the Procfile and its schema
(Debian's docker-compose), and the image's entrypoint run as the containers run it (each
compose service's command and environment, the image's PATH and settings) against real
PostgreSQL and Redis: the release one-shot on an empty database, then every process type,
stopped by SIGTERM as `docker compose stop` does. The image itself is built and run with
podman in test_container.py."""

import os
import re
import secrets
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests
import yaml

from tests.support.deploy import ROOT
from tests.support.edit_env import edit_env_file
from tests.support.processes import Process, free_port, wait_for

from .conftest import SHARED_REDIS_GROUP

pytestmark = pytest.mark.slow

ENTRYPOINT = ROOT / "deploy/entrypoint.sh"
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
PROCESS_TYPES = [line.partition(":")[0] for line in (ROOT / "Procfile").read_text().splitlines() if ":" in line]


def dockerfile_stages():
    stages = []
    # An instruction continued over several lines (a trailing backslash) is one line here.
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    for line in text.splitlines():
        word, _, rest = line.partition(" ")
        if word == "FROM":
            stages.append([])
        if stages and word.isupper():
            stages[-1].append((word, rest.strip()))
    return stages


def test_the_dockerfile_builds_in_two_stages_and_runs_as_a_non_root_user():
    build, runtime = dockerfile_stages()
    assert ("COPY", "requirements/base.txt /tmp/requirements/base.txt") in build
    assert any(word == "RUN" and "pip install --requirement /tmp/requirements/base.txt" in rest for word, rest in build)
    words = [word for word, _ in runtime]
    assert ("COPY", "--from=build /opt/venv /opt/venv") in runtime
    user = dict(runtime)["USER"]
    assert user not in ("root", "0") and words.index("USER") < words.index("ENTRYPOINT")
    assert any(word == "RUN" and "collectstatic" in rest for word, rest in runtime)
    assert dict(runtime)["ENTRYPOINT"] == '["/app/deploy/entrypoint.sh"]'
    assert dict(runtime)["CMD"] == '["web"]'


def test_the_runtime_image_has_the_script_sandbox_tools():
    # Without bubblewrap and libseccomp a worker refuses script jobs (cronsvc/sandbox/).
    _, runtime = dockerfile_stages()
    installs = " ".join(rest for word, rest in runtime if word == "RUN" and "apt-get install" in rest)
    assert "bubblewrap" in installs.split() and "libseccomp2" in installs.split()


def test_the_dockerignore_keeps_local_state_and_secrets_out_of_the_image():
    ignored = (ROOT / ".dockerignore").read_text().split()
    for path in (".git", ".venv", "var", ".env", "staticfiles"):
        assert path in ignored


def app_services():
    return {name: service for name, service in COMPOSE["services"].items() if service.get("build")}


def test_the_compose_file_runs_every_procfile_process_from_the_one_image():
    services = app_services()
    commands = {name: service["command"] for name, service in services.items()}
    assert sorted(command for (command,) in commands.values()) == sorted(PROCESS_TYPES)
    assert {service["image"] for service in services.values()} == {"cronsvc:latest"}
    assert {"postgres", "redis"} <= set(COMPOSE["services"])


def test_the_release_runs_once_before_every_other_process():
    services = app_services()
    release = services.pop("release")
    assert release["restart"] == "no"
    assert set(release["depends_on"]) == {"postgres", "redis"}
    for name, service in services.items():
        assert service["depends_on"] == {"release": {"condition": "service_completed_successfully"}}, name


def test_the_compose_file_runs_two_schedulers_and_one_housekeeping():
    services = app_services()
    assert services["scheduler"]["deploy"]["replicas"] == 2
    assert "deploy" not in services["housekeeping"]
    assert services["web"]["ports"] == ["8000:8000"]


def test_the_compose_file_is_valid_for_docker_compose(tmp_path):
    # The Python docker-compose (Debian's package, installed by `make test`) checks the file
    # against the compose schema without an engine.
    compose = "/usr/bin/docker-compose"
    if not os.path.exists(compose):
        pytest.fail("docker-compose is missing: `make test` installs it (the Makefile's containers target)")
    (tmp_path / ".env").write_text((ROOT / "deploy/production.env.example").read_text())
    done = subprocess.run([compose, "--project-directory", str(tmp_path), "-f", str(ROOT / "docker-compose.yml"),
                           "config", "--quiet"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def container_environment(fresh_database, tmp_path, **extra):
    """What a compose service's container sees: the image's ENV, the .env file (the example
    with its values replaced), then the service's `environment`, whose host names point here."""
    env_file = tmp_path / ".env"
    env_file.write_text((ROOT / "deploy/production.env.example").read_text())
    edit_env_file(env_file, {"SECRET_KEY": secrets.token_urlsafe(50), "ALLOWED_HOSTS": "127.0.0.1"})
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "REDIS_", "CELERY_"))}
    environment.update(_image_env(tmp_path))
    environment.update(_parse_env_file(env_file))
    environment.update(COMPOSE["x-app"]["environment"])
    environment.update(fresh_database)  # postgres:5432 and redis:6379 are this machine's
    environment.update({k: str(v) for k, v in extra.items()})
    return environment


def _image_env(tmp_path):
    # The Dockerfile's ENV, with the image's paths moved under tmp_path and its virtualenv
    # standing for /opt/venv.
    return {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "PYTHONUNBUFFERED": "1",
            "STATIC_ROOT": str(tmp_path / "staticfiles"), "VAR_DIR": str(tmp_path / "var"), "PORT": "8000"}


def _parse_env_file(path):
    pairs = (line.split("=", 1) for line in Path(path).read_text().splitlines()
             if line.strip() and not line.lstrip().startswith("#"))
    return {key.strip(): value for key, value in pairs}


READYZ_TOKEN = "readyz-test-token-0c41"


def run_container(tmp_path, service_or_args, env, name):
    args = service_or_args if isinstance(service_or_args, list) else COMPOSE["services"][service_or_args]["command"]
    return Process([str(ENTRYPOINT), *args], env, tmp_path / f"{name}.log")


@SHARED_REDIS_GROUP
def test_the_entrypoint_runs_the_release_then_every_process_type(tmp_path, fresh_database):
    port = free_port()
    env = container_environment(fresh_database, tmp_path, PORT=port, WEB_CONCURRENCY=1, WORKER_CONCURRENCY=2,
                                METRICS_TOKEN=READYZ_TOKEN)  # /readyz shows the heartbeats to its bearer
    release = run_container(tmp_path, "release", env, "release")
    assert release.popen.wait(300) == 0, release.output()[-3000:]
    assert "release: migrations applied, static files collected" in release.output()
    assert (tmp_path / "staticfiles/staticfiles.json").exists()

    names = ["web", "scheduler", "worker_pro", "worker_default", "housekeeping"]
    containers = {name: run_container(tmp_path, name, env, name) for name in names}
    try:
        wait_for(lambda: _ready(port), timeout=120, message="the web container's /readyz")
        wait_for(lambda: _alive(port) == {"schedulers": 1, "workers": 2}, timeout=120,
                 message="the scheduler's and both workers' heartbeats in /readyz")
        wait_for(lambda: "beat: Starting" in containers["housekeeping"].output(), timeout=60, message="housekeeping")
        for name, process in containers.items():
            # The entrypoint's shell replaced itself: the container's SIGTERM reaches the process.
            command = Path(f"/proc/{process.popen.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            assert not command.startswith(("sh ", "/bin/sh ")), (name, command)
        page = requests.get(f"http://127.0.0.1:{port}/login/", timeout=10, headers={"X-Forwarded-Proto": "https"})
        assert page.status_code == 200
        assert re.search(r'/static/web/site\.[0-9a-f]{12}\.css', page.text), "the collected, hashed stylesheet"
        for process in containers.values():
            process.popen.send_signal(signal.SIGTERM)  # docker compose stop
        codes = {name: process.popen.wait(60) for name, process in containers.items()}
    finally:
        for process in containers.values():
            process.stop()
    outputs = {name: process.output() for name, process in containers.items()}
    assert codes["web"] == 0 and "Granian shutdown completed" in outputs["web"], outputs["web"][-2000:]
    assert "scheduler: stopped" in outputs["scheduler"], outputs["scheduler"][-2000:]
    for worker in ("worker_pro", "worker_default"):
        assert "Warm shutdown" in outputs[worker], outputs[worker][-2000:]


def _ready(port):
    try:
        return requests.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
    except requests.RequestException:
        return False


def _alive(port):
    processes = requests.get(f"http://127.0.0.1:{port}/readyz", headers={"Authorization": f"Bearer {READYZ_TOKEN}"},
                             timeout=2).json().get("processes", {})
    return {kind: sum(1 for p in processes.get(kind, []) if p["alive"]) for kind in ("schedulers", "workers")}


def test_the_entrypoint_runs_any_other_command(tmp_path):
    done = subprocess.run([str(ENTRYPOINT), "python", "-c", "import os; print(os.getcwd())"], capture_output=True,
                          text=True, env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(ROOT)
    assert subprocess.run([str(ENTRYPOINT), "false"]).returncode == 1
