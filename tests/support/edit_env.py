"""An $EDITOR for the deploy test: `edit_env.py FILE` sets in FILE the KEY=value pairs
given as JSON in CRONSVC_TEST_ENV_EDITS, as the self-hoster would by hand."""

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.deploy import edit_env_file  # noqa: E402

if __name__ == "__main__":
    edit_env_file(sys.argv[1], json.loads(os.environ["CRONSVC_TEST_ENV_EDITS"]))
