"""Where the client finds the server and the API key.

The environment wins over the config file, so a script can point one command elsewhere:
``CRONSVC_URL`` and ``CRONSVC_API_KEY``, then ``~/.config/cronsvc/config.toml`` (or
``$XDG_CONFIG_HOME/cronsvc/config.toml``; ``CRONSVC_CONFIG`` names another file), as written
by ``cronsvc login``.
"""

import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError, MissingApiKey


@dataclass(frozen=True)
class Settings:
    url: str
    api_key: str


def config_path():
    if os.environ.get("CRONSVC_CONFIG"):
        return Path(os.environ["CRONSVC_CONFIG"])
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "cronsvc" / "config.toml"


def read_config(path=None):
    path = Path(path or config_path())
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML ({exc}); fix it or run `cronsvc login` again.") from None


def write_config(url, api_key, path=None):
    """Write the file readable by its owner only (it holds a credential), whatever mode an
    earlier file had."""
    path = Path(path or config_path())
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # TOML basic strings take JSON's escapes, so json.dumps quotes any value safely.
    text = f"url = {json.dumps(url)}\napi_key = {json.dumps(api_key)}\n"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        os.fchmod(handle.fileno(), 0o600)
        handle.write(text)
    return path


def resolve(url=None, api_key=None):
    """The settings from the arguments, else the environment, else the config file."""
    stored = None

    def from_file(key):
        nonlocal stored
        if stored is None:
            stored = read_config()
        return stored.get(key)

    url = url or os.environ.get("CRONSVC_URL") or from_file("url")
    api_key = api_key or os.environ.get("CRONSVC_API_KEY") or from_file("api_key")
    if not url:
        raise ConfigError("No server URL: set CRONSVC_URL or run `cronsvc login --url URL --api-key KEY`.")
    if not api_key:
        raise MissingApiKey("No API key: set CRONSVC_API_KEY or run `cronsvc login --url URL --api-key KEY`.")
    return Settings(url=url.rstrip("/"), api_key=api_key)
