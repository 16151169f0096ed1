"""A channel's config and an event subscription's URL: checked the same way for the API
and the pages, and masked the same way wherever they are shown after saving."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import validate_email

from cronsvc import secrets
from cronsvc.delivery.guard import ForbiddenTarget, check_url_at_save, outbound_policy
from cronsvc.delivery.signing import generate_secret

MAX_EMAIL_RECIPIENTS = 10
FIELDS = {
    "email": ("to",),
    "webhook": ("url", "secret"),
    "slack": ("url",),
    "discord": ("url",),
    "telegram": ("bot_token", "chat_id"),
}
# The config's secret fields: what the registry of secrets (cronsvc.secrets) does not show.
SECRET_FIELDS = ({name for names in FIELDS.values() for name in names}
                 - secrets.find("notifications.Channel", "config").shown)
_TELEGRAM_TOKEN = re.compile(r"^\d{3,20}:[A-Za-z0-9_-]{20,100}$")
_CHAT_ID = re.compile(r"^(-?\d{1,20}|@[A-Za-z0-9_]{5,64})$")


@dataclass
class ConfigError(Exception):
    field: str
    code: str
    message: str


def clean_config(kind, given, previous=None):
    """The config to store for a ``kind`` channel. Fields left out keep their
    ``previous`` value (secrets are not shown again, so an edit need not repeat them)."""
    if kind not in FIELDS:
        raise ConfigError("kind", "invalid_choice", f"kind must be one of {sorted(FIELDS)}.")
    if not isinstance(given, dict):
        raise ConfigError("config", "invalid", "config must be an object.")
    unknown = sorted(set(given) - set(FIELDS[kind]))
    if unknown:
        raise ConfigError(f"config.{unknown[0]}", "unknown_field",
                          f"A {kind} channel has no field {unknown[0]!r}; it takes {', '.join(FIELDS[kind])}.")
    config = {**(previous or {}), **{k: v for k, v in given.items() if v not in (None, "")}}
    return _CLEANERS[kind](config)


def _email(config):
    to = config.get("to")
    if isinstance(to, str):
        to = [part.strip() for part in re.split(r"[,\s]+", to) if part.strip()]
    if not to or not isinstance(to, list):
        raise ConfigError("config.to", "required", "Give at least one e-mail address.")
    if len(to) > MAX_EMAIL_RECIPIENTS:
        raise ConfigError("config.to", "too_many", f"At most {MAX_EMAIL_RECIPIENTS} addresses per channel.")
    for address in to:
        try:
            validate_email(address)
        except (DjangoValidationError, TypeError):
            raise ConfigError("config.to", "invalid_email", f"{address!r} is not an e-mail address.") from None
    return {"to": to}


def _url_only(config):
    return {"url": check_url(config.get("url"), "config.url")}


def _webhook(config):
    secret = config.get("secret") or generate_secret()
    if not isinstance(secret, str) or not secret.startswith("whsec_") or len(secret) < 30:
        raise ConfigError("config.secret", "invalid_secret", "secret must be a whsec_... value; "
                                                             "leave it out to have one made.")
    return {"url": check_url(config.get("url"), "config.url"), "secret": secret}


def _telegram(config):
    token, chat = str(config.get("bot_token") or ""), str(config.get("chat_id") or "")
    if not _TELEGRAM_TOKEN.match(token):
        raise ConfigError("config.bot_token", "invalid_token", "bot_token must look like 123456:ABC-... "
                                                               "(from @BotFather).")
    if not _CHAT_ID.match(chat):
        raise ConfigError("config.chat_id", "invalid_chat", "chat_id must be a number or an @channel name.")
    return {"bot_token": token, "chat_id": chat}


_CLEANERS = {"email": _email, "webhook": _webhook, "slack": _url_only, "discord": _url_only,
             "telegram": _telegram}


def check_url(url, field):
    """An http(s) URL the outbound address guard lets the platform reach (the one policy,
    guard.outbound_policy, as the jobs' and the workers')."""
    if not url or not isinstance(url, str):
        raise ConfigError(field, "required", "Give the URL to post to.")
    if len(url) > 2048 or not url.lower().startswith(("http://", "https://")):
        raise ConfigError(field, "invalid_url", "Give an http(s) URL of at most 2048 characters.")
    try:
        check_url_at_save(url, outbound_policy(settings))
    except ForbiddenTarget as exc:  # forbidden_target, or invalid_host
        advice = "" if exc.code == "invalid_host" else "; give a public http(s) address"
        raise ConfigError(field, exc.code, f"{exc.reason}{advice}.") from None
    return url


def mask(value):
    """A secret shown after saving: enough to recognise it, not to use it."""
    value = str(value or "")
    if value.lower().startswith(("http://", "https://")):
        scheme, _, rest = value.partition("://")
        host = rest.split("/", 1)[0].rsplit("@", 1)[-1]
        return f"{scheme}://{host}/…{value[-4:]}" if "/" in rest.strip("/") else f"{scheme}://{host}"
    return f"{value[:6]}…{value[-4:]}" if len(value) > 16 else "••••"


def masked_config(kind, config):
    config = config or {}
    return {name: (mask(config.get(name)) if name in SECRET_FIELDS else config.get(name))
            for name in FIELDS.get(kind, ()) if name in config}
