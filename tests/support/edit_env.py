"""An $EDITOR for the deploy tests: `edit_env.py FILE` sets in FILE the KEY=value pairs
given as JSON in CRONSVC_TEST_ENV_EDITS, as the self-hoster would by hand. (It runs outside
pytest, so it imports nothing of the project.)"""

import json
import os
import sys
from pathlib import Path


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


if __name__ == "__main__":
    edit_env_file(sys.argv[1], json.loads(os.environ["CRONSVC_TEST_ENV_EDITS"]))
