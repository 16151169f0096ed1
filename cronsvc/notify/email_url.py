"""EMAIL_URL: e-mail settings in one URL.

``smtp://user:pass@host:587?tls=1`` (``smtps://`` for implicit TLS), ``console://``,
``locmem://``, ``file:///path``, ``dummy://``. Anything else is refused loudly.
"""

from __future__ import annotations

from urllib.parse import parse_qs, unquote, urlsplit

BACKENDS = {
    "smtp": "django.core.mail.backends.smtp.EmailBackend",
    "smtps": "django.core.mail.backends.smtp.EmailBackend",
    "console": "django.core.mail.backends.console.EmailBackend",
    "locmem": "django.core.mail.backends.locmem.EmailBackend",
    "file": "django.core.mail.backends.filebased.EmailBackend",
    "dummy": "django.core.mail.backends.dummy.EmailBackend",
}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def parse_email_url(url: str) -> dict:
    """Django settings (``EMAIL_BACKEND``, ``EMAIL_HOST``, ...) for ``url``."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in BACKENDS:
        raise ValueError(f"EMAIL_URL: unknown scheme {scheme!r}; use one of {sorted(BACKENDS)}")
    config = {"EMAIL_BACKEND": BACKENDS[scheme]}
    if scheme == "file":
        config["EMAIL_FILE_PATH"] = unquote(parts.path)
    if scheme not in ("smtp", "smtps"):
        return config
    query = {key: values[-1] for key, values in parse_qs(parts.query, keep_blank_values=True).items()}
    config.update(
        EMAIL_HOST=parts.hostname or "localhost",
        EMAIL_PORT=parts.port or (465 if scheme == "smtps" else 25),
        EMAIL_HOST_USER=unquote(parts.username or ""),
        EMAIL_HOST_PASSWORD=unquote(parts.password or ""),
        EMAIL_USE_TLS=_flag(query, "tls"),
        EMAIL_USE_SSL=scheme == "smtps" or _flag(query, "ssl"),
    )
    if config["EMAIL_USE_TLS"] and config["EMAIL_USE_SSL"]:
        raise ValueError("EMAIL_URL: tls (STARTTLS) and ssl cannot both be on")
    if "timeout" in query:
        config["EMAIL_TIMEOUT"] = int(query["timeout"])
    return config


def _flag(query: dict, name: str) -> bool:
    value = query.get(name, "").lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"EMAIL_URL: {name}={value!r} is not a boolean (use 1 or 0)")
