"""Where the client finds the server and the API key.

Each setting is taken from the first of: the argument (the command's global ``--url`` /
``--api-key``), the environment (``CRONSVC_URL`` / ``CRONSVC_API_KEY``), the config file's
profile. The profile is the one named (``--profile`` or ``CRONSVC_PROFILE``), else the default
one. The file is ``~/.config/cronsvc/config.toml`` (or ``$XDG_CONFIG_HOME/cronsvc/config.toml``;
``CRONSVC_CONFIG`` names another), as written by ``cronsvc login``::

    url = "https://cron.example.com"          # the default profile, at the top level
    api_key = "csk_live_..."

    [profiles.staging]                         # `cronsvc login --profile staging ...`
    url = "https://cron.staging.example.com"
    api_key = "csk_live_..."
"""

import json
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError, MissingApiKey

DEFAULT_PROFILE = "default"
PROFILE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True)
class Settings:
    url: str
    api_key: str


@dataclass(frozen=True)
class Profile:
    name: str
    url: str | None
    api_key: str | None


def config_path():
    if os.environ.get("CRONSVC_CONFIG"):
        return Path(os.environ["CRONSVC_CONFIG"])
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "cronsvc" / "config.toml"


def check_url(url):
    """``url`` if it is an http(s) URL, else a usage error."""
    if not re.match(r"https?://[^/?#\s]+", url or "", re.IGNORECASE):
        raise ConfigError(f"{url!r} is not a server URL: give one like https://cron.example.com")
    return url


def check_profile_name(name):
    if not PROFILE_NAME.fullmatch(name or ""):
        raise ConfigError(f"{name!r} is not a profile name: use letters, digits, '-' and '_' (at most 64).")
    return name


def read_config(path=None):
    path = Path(path or config_path())
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML ({exc}); fix it or run `cronsvc login` again.") from None


def profiles(config=None):
    """The file's profiles by name, the default one (the top level) first."""
    config = read_config() if config is None else config
    found = {DEFAULT_PROFILE: Profile(DEFAULT_PROFILE, config.get("url"), config.get("api_key"))}
    named = config.get("profiles")
    for name, table in (named if isinstance(named, dict) else {}).items():
        if isinstance(table, dict) and name != DEFAULT_PROFILE:
            found[name] = Profile(name, table.get("url"), table.get("api_key"))
    return found


def selected_profile(profile=None):
    """The profile's name: the argument, else CRONSVC_PROFILE, else the default one."""
    return profile or os.environ.get("CRONSVC_PROFILE") or DEFAULT_PROFILE


def _toml_string(value):
    # TOML basic strings take JSON's escapes, so json.dumps quotes any value safely.
    return json.dumps(value)


def write_config(url, api_key, path=None, *, profile=DEFAULT_PROFILE):
    """Save ``profile``'s URL and key, keeping the file's other profiles. The file is readable
    by its owner only (it holds credentials), whatever mode an earlier file had."""
    path = Path(path or config_path())
    stored = profiles(read_config(path))
    stored[check_profile_name(profile)] = Profile(profile, url, api_key)
    lines = []
    for item in stored.values():
        if item.name != DEFAULT_PROFILE:
            key = item.name if PROFILE_NAME.fullmatch(item.name) else _toml_string(item.name)
            lines.append(f"\n[profiles.{key}]")
        lines += [f"{key} = {_toml_string(value)}" for key, value in (("url", item.url), ("api_key", item.api_key))
                  if value is not None]
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        os.fchmod(handle.fileno(), 0o600)
        handle.write("\n".join(lines).lstrip("\n") + "\n")
    return path


def resolve(url=None, api_key=None, *, profile=None):
    """The settings: each from the argument, else the environment, else the profile in the
    config file (the one named by ``profile`` or CRONSVC_PROFILE, else the default one)."""
    name = selected_profile(profile)
    stored = None

    def from_file(key):
        nonlocal stored
        if stored is None:
            found = profiles()
            if name not in found:
                raise ConfigError(f"No profile {name!r} in {config_path()}: `cronsvc profiles` lists them, "
                                  f"`cronsvc login --profile {name} ...` makes it.")
            stored = found[name]
        return getattr(stored, key)

    login = "cronsvc login" + ("" if name == DEFAULT_PROFILE else f" --profile {name}") + " --url URL --api-key KEY"
    url = url or os.environ.get("CRONSVC_URL") or from_file("url")
    if not url:
        raise ConfigError(f"No server URL: give --url, set CRONSVC_URL or run `{login}`.")
    api_key = api_key or os.environ.get("CRONSVC_API_KEY") or from_file("api_key")
    if not api_key:
        raise MissingApiKey(f"No API key: give --api-key, set CRONSVC_API_KEY or run `{login}`.")
    return Settings(url=check_url(url).rstrip("/"), api_key=api_key)
