"""Where the command finds the server and the key: `cronsvc login` and its mode-600 config
file, or CRONSVC_URL / CRONSVC_API_KEY, which win over the file."""

import stat

import pytest

from tests.client.conftest import Cli

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_login_checks_the_key_and_writes_a_file_only_its_owner_reads(web, client_tenant, cronsvc_home):
    anonymous = Cli(cronsvc_home)  # no CRONSVC_* in its environment
    anonymous.config_file.parent.mkdir(parents=True)
    anonymous.config_file.write_text('url = "http://old.example"\n')
    anonymous.config_file.chmod(0o644)  # an earlier file anyone could read

    result = anonymous.ok("login", "--url", web.base_url + "/", "--api-key", client_tenant.full_api_key)

    assert str(anonymous.config_file) in result.out
    assert stat.S_IMODE(anonymous.config_file.stat().st_mode) == 0o600
    text = anonymous.config_file.read_text()
    assert f'url = "{web.base_url}"' in text and client_tenant.full_api_key in text
    assert anonymous.ok("config-path").out.strip() == str(anonymous.config_file)
    projects = anonymous.ok("projects", "list", "-o", "json")  # the file alone is enough now
    assert [project["id"] for project in projects] == [str(client_tenant.project.pk)]


def test_login_asks_for_the_key_on_standard_input_when_left_out(web, client_tenant, cronsvc_home):
    anonymous = Cli(cronsvc_home)
    anonymous.ok("login", "--url", web.base_url, input=client_tenant.full_api_key + "\n")
    assert client_tenant.full_api_key in anonymous.config_file.read_text()


def test_a_refused_key_writes_nothing_and_exits_3(web, cronsvc_home):
    anonymous = Cli(cronsvc_home)
    result = anonymous("login", "--url", web.base_url, "--api-key", "csk_live_notakey")
    assert result.code == 3
    assert "Error: invalid_api_key (HTTP 401)" in result.err
    assert not anonymous.config_file.exists()


def test_the_environment_wins_over_the_file(web, client_tenant, other_tenant, cronsvc_home):
    anonymous = Cli(cronsvc_home)
    anonymous.ok("login", "--url", web.base_url, "--api-key", client_tenant.full_api_key)

    other = anonymous.ok("projects", "list", "-o", "json", env={"CRONSVC_API_KEY": other_tenant.full_api_key})
    assert [project["id"] for project in other] == [str(other_tenant.project.pk)]
    refused = anonymous("projects", "list", env={"CRONSVC_API_KEY": "csk_live_notakey"})
    assert refused.code == 3 and "invalid_api_key" in refused.err


def test_without_a_url_or_a_key_the_command_says_what_to_set(web, client_tenant, cronsvc_home):
    no_url = Cli(cronsvc_home, api_key=client_tenant.full_api_key)("jobs", "list")
    assert no_url.code == 2 and "CRONSVC_URL" in no_url.err
    no_key = Cli(cronsvc_home, url=web.base_url)("jobs", "list")
    assert no_key.code == 3 and "CRONSVC_API_KEY" in no_key.err
