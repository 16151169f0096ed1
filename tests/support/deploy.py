"""Deploying cronsvc the way a self-hoster does: a fresh checkout of this repository and the
README's deploy steps, run as they are written."""

import re
import shutil
import subprocess
from pathlib import Path

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


def readme_deploy_steps(readme=ROOT / "README.md"):
    """The shell lines between the README's deploy markers, exactly as a reader copies them."""
    found = BLOCK.search(Path(readme).read_text())
    if not found:
        raise AssertionError("README.md has no <!-- deploy:begin --> ```sh ... ``` <!-- deploy:end --> block")
    return found.group(1)


def edit_env_file(path, values):
    """Set KEY=value lines of an env file, as a person does in an editor: an existing key's
    line is changed in place (its comment kept), a missing key is added at the end."""
    lines = Path(path).read_text().splitlines()
    pending = dict(values)
    for index, line in enumerate(lines):
        key = line.split("=", 1)[0].strip()
        if not line.lstrip().startswith("#") and "=" in line and key in pending:
            lines[index] = f"{key}={pending.pop(key)}"
    lines.extend(f"{key}={value}" for key, value in pending.items())
    Path(path).write_text("\n".join(lines) + "\n")
