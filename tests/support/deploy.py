"""Deploying cronsvc the way a self-hoster does: a fresh checkout of this repository and the
deploy steps of docs/deploy.md, run as they are written."""

import re
import shutil
import subprocess
from pathlib import Path

from tests.support.processes import wait_for

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"<!-- deploy:begin -->\s*```sh\n(.*?)```\s*<!-- deploy:end -->", re.S)


def fresh_checkout(dest):
    """A clone of this repository plus the work tree's uncommitted edits and new files that
    git does not ignore: what a clean clone of the next commit holds. (On CI's clean clone
    there are none.)"""
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(dest)], check=True)
    diff = subprocess.run(["git", "-C", str(ROOT), "diff", "HEAD", "--binary"], check=True,
                          capture_output=True).stdout
    if diff.strip():
        subprocess.run(["git", "-C", str(dest), "apply", "--binary", "-"], input=diff, check=True)
    untracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--others", "--exclude-standard", "-z"],
                               check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, untracked):
        (Path(dest) / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, Path(dest) / name)
    return Path(dest)


def deploy_steps(page=ROOT / "docs" / "deploy.md"):
    """The shell lines between docs/deploy.md's deploy markers (the README links there),
    exactly as a reader copies them."""
    found = BLOCK.search(Path(page).read_text())
    if not found:
        raise AssertionError(f"{page} has no <!-- deploy:begin --> ```sh ... ``` <!-- deploy:end --> block")
    return found.group(1)


def trigger_and_wait(base, api, target, path, **job):
    """Create a job calling ``target``'s ``path`` through the API session ``api``, trigger
    it, and wait until the real scheduler and worker have delivered it once. Its id."""
    created = api.post(f"{base}/api/v1/jobs/", json={
        "name": f"fires {path}", "schedule": {"type": "cron", "expression": "0 3 * * *"},
        "request": {"url": target.url(path)}, **job})
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]
    assert api.post(f"{base}/api/v1/jobs/{job_id}/trigger/").status_code == 202

    def succeeded():
        runs = api.get(f"{base}/api/v1/jobs/{job_id}/executions/").json()["results"]
        return bool(runs) and runs[0]["status"] == "succeeded"

    wait_for(succeeded, timeout=90, interval=0.5, message="the triggered run to succeed")
    assert len(target.requests_to(path)) == 1
    return job_id
