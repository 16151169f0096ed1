"""API keys (``Authorization: Bearer csk_live_...``) and browser sessions."""

from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone
from rest_framework import authentication, exceptions

from apps.accounts.models import ApiKey, Organization
from apps.api import keycache, ratelimit
from apps.api.audit import client_ip
from apps.plans.models import Plan
from apps.sql import rows
from cronsvc.apikeys import secret_matches, split_key

from . import queries
from .actor import actor_for_api_key, key_principal
from .throttling import PlanRateThrottle

# last_used_at is written at most this often per key: a busy key would otherwise cost
# one UPDATE per request.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class InvalidApiKey(exceptions.AuthenticationFailed):
    default_detail = "The API key is malformed, unknown, revoked or expired, or its organization is suspended."
    default_code = "invalid_api_key"


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """Resolves the key to an Actor, returned as ``request.auth``; ``request.user`` stays
    anonymous, because a key acts for its organization, not for the person who made it."""

    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        keyword, _, token = header.partition(" ")
        if keyword.lower() != self.keyword.lower():
            return None  # no key: let the session try
        try:
            api_key, counted = self._usable_key(token.strip())
        except InvalidApiKey:
            refuse_failed_key(request)
            raise
        request.counted_rate_limit = counted  # PlanRateThrottle's count, when the key cache made it
        _touch(api_key)
        return AnonymousUser(), actor_for_api_key(api_key)

    def authenticate_header(self, request):
        # Makes DRF answer 401 (not 403) to unauthenticated requests.
        return f'{self.keyword} realm="api"'

    @staticmethod
    def _usable_key(token):
        """(the key, the request's rate-limit Quota when already counted, else None)."""
        parts = split_key(token)
        if parts is None:
            raise InvalidApiKey()
        lookup, secret = parts
        api_key, counted = keycache.get_key(
            lookup, _key_by_lookup, rate_limit_of=_rate_limit_of,
            accept=lambda key: secret_matches(secret, key.salt, key.secret_hash))
        if api_key is None or not api_key.is_usable():
            raise InvalidApiKey()
        return api_key, counted


FAILURES = "api-key-failures"  # the counter's name in apps.api.ratelimit


class TooManyFailedKeys(exceptions.Throttled):
    default_detail = "Too many requests with an invalid API key from this address."


def refuse_failed_key(request):
    """Count a failed key authentication of the client's address; past
    API_KEY_FAILURES_PER_IP in API_KEY_FAILURE_WINDOW seconds, answer 429 with Retry-After
    (code ``throttled``) instead of 401. Only failures are counted: a valid key costs nothing
    here, and a 429 never says whether the key was right."""
    window = settings.API_KEY_FAILURE_WINDOW
    ident = client_ip(request) or "unknown"
    if ratelimit.hit(FAILURES, ident, window=window) > settings.API_KEY_FAILURES_PER_IP:
        raise TooManyFailedKeys(wait=ratelimit.count(FAILURES, ident, window=window)[1])


def _rate_limit_of(api_key):
    """(ident, limit, window, now) of the plan's rate limit for requests made with ``api_key``."""
    throttle = PlanRateThrottle()
    ident, limit = throttle.ident_and_limit(api_key.organization, key_principal(api_key))
    return ident, limit, throttle.window, throttle.timer()


def _key_by_lookup(lookup):
    """The key with its organization and plan (one join, in hand-written SQL: every API
    request runs it, and compiling the ORM's select_related costs more than the query)."""
    found = rows.fetch_one(queries.key_by_lookup_sql(), [lookup], ApiKey, Organization, Plan)
    if found is None:
        return None
    api_key, organization, plan = found
    organization.plan = plan
    api_key.organization = organization
    return api_key


def _touch(api_key, now=None):
    now = now or timezone.now()
    if api_key.last_used_at is None or api_key.last_used_at < now - LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        api_key.last_used_at = now
        keycache.note_used(api_key.lookup, now)
