"""Settings helpers that refuse bad values loudly instead of guessing.

Every value can also be read from a file named by ``NAME_FILE`` (Docker/Kubernetes
secrets), which wins over ``NAME``.
"""

import os

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "on"}
_FALSE = {"0", "false", "off", ""}


def env_str(name, default=None):
    file_name = os.environ.get(f"{name}_FILE")
    if file_name:
        with open(file_name, encoding="utf-8") as handle:
            return handle.read().strip()
    return os.environ.get(name, default)


def env_bool(name, default=False):
    raw = env_str(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r}: use one of true/false, 1/0, on/off.")


def env_int(name, default):
    raw = env_str(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r}: expected a whole number.") from None


def env_float(name, default):
    raw = env_str(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r}: expected a number.") from None


def env_list(name, default=()):
    raw = env_str(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_int_map(name, default):
    """``a=1,b=2`` as {"a": 1, "b": 2}: each part a name, ``=`` and a whole number >= 0."""
    raw = env_str(name)
    if raw is None:
        return dict(default)
    mapping = {}
    for part in env_list(name):
        key, equals, number = (piece.strip() for piece in part.partition("="))
        if not (key and equals and number.isascii() and number.isdigit()):
            raise ImproperlyConfigured(f"{name}={raw!r}: {part!r} is not name=number (a whole number, 0 or more).")
        mapping[key] = int(number)
    return mapping
