"""Global --url/--api-key/--profile and the config file's named profiles: each setting from
the flag, else the environment, else the profile (--profile, CRONSVC_PROFILE, else the
default one, which is the file's top level as `cronsvc login` always wrote it)."""

import stat
import tomllib

import pytest

from tests.client.conftest import Cli

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def project_ids(cli, *args, env=None):
    return [project["id"] for project in cli.ok(*args, "projects", "list", "-o", "json", env=env)]


def test_global_url_and_api_key_flags_need_no_config(web, client_tenant, cronsvc_home):
    anonymous = Cli(cronsvc_home)
    flags = ("--url", web.base_url, "--api-key", client_tenant.full_api_key)
    assert project_ids(anonymous, *flags) == [str(client_tenant.project.pk)]
    # The group's --url is the server; the job's --url after `jobs create` stays the job's.
    created = anonymous.ok(*flags, "jobs", "create", "--name", "hook", "--every", "3600",
                           "--url", "https://example.com/hook", "-o", "json")
    assert created["request"]["url"] == "https://example.com/hook"
    assert not anonymous.config_file.exists()


def test_the_flags_win_over_the_environment(web, client_tenant, other_tenant, cronsvc_home):
    cli = Cli(cronsvc_home, web.base_url, client_tenant.full_api_key)
    assert project_ids(cli, "--api-key", other_tenant.full_api_key) == [str(other_tenant.project.pk)]
    refused = cli("--api-key", "csk_live_notakey", "projects", "list")
    assert refused.code == 3 and "invalid_api_key" in refused.err


def test_login_writes_named_profiles_beside_the_default_one(web, client_tenant, other_tenant, cronsvc_home):
    anonymous = Cli(cronsvc_home)
    anonymous.config_file.parent.mkdir(parents=True)
    # Today's flat file: its url and api_key are the default profile.
    anonymous.config_file.write_text(f'url = "{web.base_url}"\napi_key = "{client_tenant.full_api_key}"\n')

    result = anonymous.ok("login", "--profile", "staging", "--url", web.base_url + "/",
                          "--api-key", other_tenant.full_api_key)
    assert "as profile staging" in result.out

    assert stat.S_IMODE(anonymous.config_file.stat().st_mode) == 0o600
    text = anonymous.config_file.read_text()
    assert "[profiles.staging]" in text
    assert tomllib.loads(text) == {"url": web.base_url, "api_key": client_tenant.full_api_key,
                                   "profiles": {"staging": {"url": web.base_url,
                                                            "api_key": other_tenant.full_api_key}}}
    # Logging in to the default profile again keeps the named ones.
    anonymous.ok("login", "--url", web.base_url, "--api-key", client_tenant.full_api_key)
    assert "staging" in tomllib.loads(anonymous.config_file.read_text())["profiles"]


def test_which_profile_and_which_setting_wins(web, client_tenant, other_tenant, cronsvc_home):
    anonymous = Cli(cronsvc_home)
    anonymous.ok("login", "--url", web.base_url, "--api-key", client_tenant.full_api_key)
    anonymous.ok("--profile", "staging", "login", "--url", web.base_url, "--api-key", other_tenant.full_api_key)
    mine, other = [str(client_tenant.project.pk)], [str(other_tenant.project.pk)]

    assert project_ids(anonymous) == mine  # the default profile
    assert project_ids(anonymous, "--profile", "staging") == other
    assert project_ids(anonymous, env={"CRONSVC_PROFILE": "staging"}) == other
    assert project_ids(anonymous, "--profile", "default", env={"CRONSVC_PROFILE": "staging"}) == mine
    # The environment's key wins over the profile's, a flag over both.
    assert project_ids(anonymous, "--profile", "staging", env={"CRONSVC_API_KEY": client_tenant.full_api_key}) == mine
    assert project_ids(anonymous, "--profile", "staging", "--api-key", client_tenant.full_api_key) == mine

    unknown = anonymous("--profile", "prod", "projects", "list")
    assert unknown.code == 2 and "No profile 'prod' in" in unknown.err and "cronsvc profiles" in unknown.err


def test_profiles_lists_them_without_their_keys(web, client_tenant, other_tenant, cronsvc_home):
    anonymous = Cli(cronsvc_home)
    assert anonymous.ok("profiles", "-o", "json") == []
    anonymous.ok("login", "--no-verify", "--url", "https://cron.example.com", "--api-key", client_tenant.full_api_key)
    anonymous.ok("login", "--profile", "staging", "--url", web.base_url, "--api-key", other_tenant.full_api_key)

    listed = anonymous.ok("profiles", "-o", "json", env={"CRONSVC_PROFILE": "staging"})
    assert listed == [
        {"name": "default", "url": "https://cron.example.com", "has_api_key": True, "active": False},
        {"name": "staging", "url": web.base_url, "has_api_key": True, "active": True}]
    table = anonymous.ok("profiles").out
    assert "staging" in table and web.base_url in table and "https://cron.example.com" in table
    for key in (client_tenant.full_api_key, other_tenant.full_api_key):
        assert key not in table and key not in str(listed)


def test_a_profile_name_is_a_plain_word(cronsvc_home):
    anonymous = Cli(cronsvc_home)
    result = anonymous("login", "--no-verify", "--profile", "a]b", "--url", "https://e.x", "--api-key", "k")
    assert result.code == 2 and "'a]b' is not a profile name" in result.err
    assert not anonymous.config_file.exists()
