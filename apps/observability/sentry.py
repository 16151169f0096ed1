"""Sentry, only when SENTRY_DSN is set, with a scrubber that keeps customer secrets out.

``scrub`` (the ``before_send`` hook) walks the whole event — request, breadcrumbs, stack
frames' local variables, extra and contexts — and:
- drops request bodies and cookies outright (a job's body or a form may hold anything);
- replaces the value of every key named like a secret (authorization, cookie, token,
  secret, key, password, auth, signature, credential, session, csrf), and of every key named
  like a secret field of the registry of secrets (cronsvc.secrets: ``script_env``, ``config``);
- masks API keys (``csk_``) and signing secrets (``whsec_``) wherever they appear in text.
Imported by config/settings.py, so nothing here touches Django at import time.
"""

import re

from cronsvc.secrets import FIELD_NAMES

FILTERED = "[Filtered]"
SECRET_NAME = re.compile(r"auth|cookie|token|secret|key|passw|signature|credential|session|csrf", re.I)
SECRET_TEXT = re.compile(r"(csk_|whsec_)[A-Za-z0-9_+/=.-]*")
# Breadcrumbs and frames are arbitrarily deep; past this depth values are dropped.
MAX_DEPTH = 20


def scrub(event, hint=None):
    request = event.get("request")
    if isinstance(request, dict):
        for field in ("data", "cookies"):
            if field in request:
                request[field] = FILTERED
    return _clean(event, 0)


def _clean(value, depth):
    if depth > MAX_DEPTH:
        return FILTERED
    if isinstance(value, dict):
        return {key: (FILTERED if _secret_key(key) and value[key] not in (None, "") else _clean(value[key], depth + 1))
                for key in value}
    if isinstance(value, (list, tuple)):
        return [_clean(item, depth + 1) for item in value]
    if isinstance(value, str):
        return SECRET_TEXT.sub(FILTERED, value)
    return value


def _secret_key(key):
    # Sentry's own structure keys ("event_id", "keys" of a frame) are not secrets.
    return isinstance(key, str) and key not in _STRUCTURE_KEYS and (key in FIELD_NAMES or bool(SECRET_NAME.search(key)))


# A request's "url" is Sentry's own structure too (its query string is scrubbed as text).
_STRUCTURE_KEYS = frozenset({"event_id", "sdk", "type", "module", "url"})


def init(dsn, *, environment, traces_sample_rate, transport=None):
    """sentry_sdk.init with the Django, Celery and Redis integrations and the scrubber."""
    import sentry_sdk
    from sentry_sdk.integrations.celery import CeleryIntegration
    from sentry_sdk.integrations.django import DjangoIntegration
    from sentry_sdk.integrations.redis import RedisIntegration

    options = dict(
        dsn=dsn, environment=environment, traces_sample_rate=traces_sample_rate,
        # No user details, request bodies or SQL parameters are collected at all; the
        # scrubber then cleans what is left (headers, frames' variables, messages).
        data_collection={"user_info": False, "http_bodies": [], "database_query_data": False},
        max_request_body_size="never",
        integrations=[DjangoIntegration(), CeleryIntegration(), RedisIntegration()],
        before_send=scrub,
        before_send_transaction=scrub,
        before_breadcrumb=lambda crumb, hint: _clean(crumb, 0),
    )
    if transport is not None:
        options["transport"] = transport
    sentry_sdk.init(**options)
