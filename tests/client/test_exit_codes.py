"""The exit codes docs/cli.md promises for what is not an API answer: usage errors (2), and a
server that cannot be reached or is not the API (5). (1, 3 and 4 come with the API's answers:
tests/client/test_jobs.py.)"""

import pytest

from tests.client.conftest import Cli
from tests.support.processes import free_port

pytestmark = pytest.mark.slow


@pytest.mark.django_db(transaction=True)
def test_usage_errors_exit_2(cli):
    unknown = cli("jobs", "list", "--colour", "red")
    assert unknown.code == 2 and "No such option" in unknown.err
    incomplete = cli("jobs", "create", "--name", "x", "--cron", "* * * * *")
    assert incomplete.code == 2 and "Missing --url" in incomplete.err
    two_schedules = cli("jobs", "create", "--name", "x", "--cron", "* * * * *", "--every", "60", "--url", "https://e.x")
    assert two_schedules.code == 2 and "Give one of --cron, --every" in two_schedules.err
    assert cli("--help").code == 0 and cli("--version").out.startswith("cronsvc, version ")


def test_an_unreachable_server_exits_5(cronsvc_home):
    result = Cli(cronsvc_home, f"http://127.0.0.1:{free_port()}", "csk_live_whatever")("jobs", "list")
    assert result.code == 5 and result.err.startswith("Error: Could not reach http://127.0.0.1:")
    assert result.err.strip().endswith(": the connection was refused (is the server running?).")


def test_a_server_error_or_an_answer_that_is_not_the_api_exits_5(cronsvc_home, target):
    # tests/support/target.py's /flaky answers 503 "not yet" once, then 200 "finally".
    not_the_api = Cli(cronsvc_home, target.url("/flaky"), "csk_live_whatever")
    unavailable = not_the_api("jobs", "list")
    assert unavailable.code == 5 and unavailable.err.strip() == "Error: http_503 (HTTP 503): not yet"
    not_json = not_the_api("jobs", "list")
    assert not_json.code == 5 and not_json.err.startswith(f"Error: {target.url('/flaky')} does not look like a "
                                                          "cronsvc API: GET /api/v1/jobs/ answered HTTP 200 with ")
