"""SECRET_KEY values refused at start-up, loudly (as Healthchecks' settings refuse bad values).

The published example's placeholder (deploy/production.env.example) is refused in every
mode: anyone can read it, and without ENCRYPTION_KEYS the key also encrypts the stored job
credentials. A production install (server mode served over https, not DEBUG) also refuses a
key that `manage.py check --deploy` calls weak (security.W009); plain-http server installs
(tests, benchmarks, a trial behind nothing) keep their short keys.
"""

from django.core.exceptions import ImproperlyConfigured

EXAMPLE_MARKER = "REPLACE-ME"
# Django's security.W009 thresholds (django/core/checks/security/base.py).
MIN_LENGTH = 50
MIN_UNIQUE_CHARACTERS = 5
INSECURE_PREFIX = "django-insecure-"
GENERATE = "python3 -c 'import secrets; print(secrets.token_urlsafe(50))'"


def check_secret_key(key, *, production):
    """Raise ImproperlyConfigured for the example's placeholder, and for a weak key in production."""
    if EXAMPLE_MARKER.lower() in key.lower():
        raise ImproperlyConfigured(
            "SECRET_KEY is still the placeholder of deploy/production.env.example, which anyone can read. "
            f"Replace it with a value of your own: {GENERATE}")
    if production and is_weak(key):
        raise ImproperlyConfigured(
            f"SECRET_KEY is too weak for an https install (SITE_URL https://...): it needs at least "
            f"{MIN_LENGTH} characters, {MIN_UNIQUE_CHARACTERS} of them different, and no "
            f"'{INSECURE_PREFIX}' prefix. Generate one: {GENERATE}")


def is_weak(key):
    return len(key) < MIN_LENGTH or len(set(key)) < MIN_UNIQUE_CHARACTERS or key.startswith(INSECURE_PREFIX)
