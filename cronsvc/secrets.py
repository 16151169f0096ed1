"""The one registry of secrets: every field that holds a customer's or the platform's
secret is declared here, once, and every surface that shows, keeps or sends data masks
from it (job versions and their diffs, the organization export, audit payloads, the
Django admin, API responses, pages, Sentry events). docs/security.md, "One registry of
secrets", says how to add one.

A field is named by its model's label (``app_label.ModelName``) so this engine module
needs no Django. Its ``shape`` says what of its value is secret:

- ``WHOLE``: the whole value is one secret (a token, a list of signing secrets, a URL
  that carries its own token); it is shown as MASK.
- ``MAPPING``: a JSON object whose names are not secret but whose values are (request
  headers, a script's environment); the values of the keys in ``shown`` are not secret
  (an auth's ``type`` and ``username``, an e-mail channel's ``to``).

Header names that carry credentials are declared here too (SECRET_HEADER_NAMES): a job's
request headers of those names are kept encrypted in ``secret_headers``, and response
headers of those names are kept masked in a run's history (cronsvc.delivery.masking).

tests/security/test_secret_registry.py plants a marker in every field below and reads
every surface; it also fails when a model has an encrypted or secret-looking field that
is not declared here.
"""

from dataclasses import dataclass

MASK = "••••"

#: Request and response headers that carry credentials, lower-case.
SECRET_HEADER_NAMES = frozenset({
    "authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key",
})

WHOLE = "whole"
MAPPING = "mapping"


@dataclass(frozen=True)
class Secret:
    model: str  # "app_label.ModelName"
    field: str
    shape: str = WHOLE
    shown: frozenset = frozenset()  # MAPPING: keys whose values are not secret
    what: str = ""

    def masked(self, value):
        """The value as any surface may show it: which secret, never its value."""
        if value in (None, "", {}, []):
            return value
        if self.shape == MAPPING and isinstance(value, dict):
            return {key: (item if key in self.shown else MASK) for key, item in value.items()}
        return MASK

    def secret_keys(self, value):
        """MAPPING: the keys of ``value`` that hold a secret."""
        return [key for key in (value or {}) if key not in self.shown]


SECRETS = (
    Secret("jobs.Job", "auth", MAPPING, frozenset({"type", "username"}),
           "basic password or bearer token of the job's request"),
    Secret("jobs.Job", "secret_headers", MAPPING, what="credential headers of the job's request"),
    Secret("jobs.Job", "script_env", MAPPING, what="a script job's environment variables"),
    Secret("jobs.JobVersion", "secrets", WHOLE, what="the secret fields of a job version, for a rollback"),
    Secret("projects.Project", "signing_secrets", WHOLE, what="the project's webhook signing secrets"),
    Secret("notifications.Channel", "config", MAPPING, frozenset({"to", "chat_id"}),
           "a channel's URL (Slack/Discord/webhook URLs carry their token), bot token, signing secret"),
    Secret("notifications.EventSubscription", "url", WHOLE, what="an event subscription's endpoint URL"),
    Secret("notifications.EventSubscription", "secret", WHOLE, what="an event subscription's signing secret"),
    Secret("accounts.OrganizationSSO", "client_secret", WHOLE, what="the OpenID Connect client secret"),
    Secret("accounts.EncryptedTOTPDevice", "key", WHOLE, what="a TOTP device's seed"),
)

#: Fields whose names look secret but that hold no secret a surface could leak (a hash
#: is not the secret; an API key's lookup prefix is shown by design). The registry test
#: fails on any other secret-looking field that is not in SECRETS.
NOT_SECRET = {
    ("accounts.ApiKey", "secret_hash"): "a salted SHA-256 hash of the key, never the key",
    ("accounts.ApiKey", "salt"): "the hash's salt",
    ("accounts.User", "password"): "Django's salted password hash",
    ("accounts.IdempotencyKey", "key"): "the client's own Idempotency-Key header, a request id",
    ("badges.Badge", "token"): "the public badge URL's id, made to be embedded in a README",
    ("monitors.Monitor", "badge_token"): "the public monitor badge URL's id, made to be embedded",
    ("observability.Heartbeat", "key"): "a process's name (kind:host:pid)",
    ("archives.Archive", "key"): "the archive object's key in the bucket",
    ("accounts.Invitation", "token_hash"): "a SHA-256 of the invitation link's token, never the token",
    ("executions.Execution", "lease_token"): "a fencing counter of the run's claims, not a credential",
    ("executions.Attempt", "superseded_token"): "the fencing counter a superseded worker held",
}

_BY_MODEL = {}
for _secret in SECRETS:
    _BY_MODEL.setdefault(_secret.model, {})[_secret.field] = _secret

#: Every secret field's name, whatever its model (for scrubbers that see only names).
FIELD_NAMES = frozenset(secret.field for secret in SECRETS)


def secrets_of(label):
    """{field name: Secret} of the model ``label`` ("jobs.Job")."""
    return _BY_MODEL.get(label, {})


def find(label, field):
    return _BY_MODEL.get(label, {}).get(field)


def masked_fields(label, values):
    """``values`` ({field: value}) with the model's secret fields masked."""
    secrets = secrets_of(label)
    if not secrets or not isinstance(values, dict):
        return values
    return {name: (secrets[name].masked(value) if name in secrets else value) for name, value in values.items()}


def masked_payload(label, data):
    """An event's payload about an object of model ``label`` (an audit event's data): its
    secret fields masked as the model declares them, and any other key named like a secret
    field of any model masked whole."""
    if not isinstance(data, dict):
        return data
    own = secrets_of(label)
    return {key: (own[key].masked(value) if key in own else MASK if key in FIELD_NAMES and value else value)
            for key, value in data.items()}
