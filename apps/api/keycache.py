"""API keys this web process has already read, so that a request with a known key costs one
Redis call instead of a database query (a third of a job read's work).

An entry is trusted only while its *stamps* in Redis are unchanged: one stamp per key
lookup, bumped when the key, its organization (suspension, plan, deletion) or anything
else that decides whether it may authenticate changes, and one for every plan. Every web
process reads the same Redis, so a revocation made anywhere is seen by the next request
everywhere: there is no window in which a revoked key still works.

On a hit the stamps are read in the same Redis call that counts the request for the rate
limit (``throttling.count_and_read``), so the API pays no extra round trip for the cache.

Ordering rules that keep it exact:
- a miss reads the stamps *before* it reads the key row, so a change committed between
  the two leaves the entry with an old stamp and the next request reloads it;
- a change bumps the stamps when it is saved and again when its transaction commits, so a
  process that read the row before the commit (with the first bump's stamp) reloads too.

Without Redis (the embedded mode) or when Redis fails, every request reads the database, as
before. Entries are also dropped after ``MAX_AGE`` seconds, a bound on what a lost bump
(Redis down while a key was revoked, then back with its old data) could leave behind.
"""

import logging
import time
from dataclasses import dataclass, replace

from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from django.db import transaction
from django.db.models.base import ModelState

from apps.api.throttling import CACHE_ALIAS, count_and_read, redis_client

log = logging.getLogger(__name__)

MAX_AGE = 30.0  # seconds an entry lives at most, whatever its stamps say
MAX_ENTRIES = 10_000  # per process; past it the cache starts again empty
STAMP_TTL = 7 * 24 * 3600  # a stamp nobody bumps expires; entries then just reload
ALL_KEYS = "all"  # the stamp every entry also checks (plans)


@dataclass(frozen=True)
class _Entry:
    api_key: object  # an ApiKey with its organization and plan; only copies are handed out
    stamps: tuple
    loaded_at: float


_entries = {}  # lookup -> _Entry
_clock = time.monotonic  # entries' age (tests move it)


def enabled():
    return isinstance(caches[CACHE_ALIAS], RedisCache)


def _stamp_name(lookup=None):
    """The stamp of one key's lookup, or (None) the one every entry checks."""
    return f"authv:key:{lookup}" if lookup else f"authv:{ALL_KEYS}"


def _stamp_keys(lookup):
    cache = caches[CACHE_ALIAS]
    return [cache.make_and_validate_key(_stamp_name()), cache.make_and_validate_key(_stamp_name(lookup))]


def get_key(lookup, load, *, rate_limit_of, accept):
    """(the API key of ``lookup`` with its organization and plan, or None; the request's
    rate-limit Quota when counted here, else None).

    ``load(lookup)`` reads the key from the database; ``accept(api_key)`` checks the
    request's secret against it (None when it fails). ``rate_limit_of(api_key)`` gives
    (ident, limit, window, now) of its rate limit: on a hit the request is counted in the
    call that checks the stamps, and only once its secret was accepted (a caller who knows
    a key's visible prefix cannot spend its quota); on a miss the throttle counts it."""
    if not enabled():
        return _accepted(load(lookup), accept), None
    stamp_keys = _stamp_keys(lookup)
    entry = _entries.get(lookup)
    if entry is not None and _clock() - entry.loaded_at < MAX_AGE:
        if not accept(entry.api_key):  # a key's salt and hash never change
            return None, None
        ident, limit, window, now = rate_limit_of(entry.api_key)
        try:
            quota, stamps = count_and_read(ident, limit, stamp_keys, window=window, now=now)
        except Exception:  # noqa: BLE001 - Redis unreachable: the database decides
            return _without_cache(lookup, load, accept), None
        if tuple(stamps) == entry.stamps:
            return _detached(entry.api_key), quota
        _entries.pop(lookup, None)
        api_key = _accepted(_load(lookup, load, tuple(stamps)), accept)
        if api_key is not None:  # counted under the old entry: its plan's limit may have changed
            quota = replace(quota, limit=rate_limit_of(api_key)[1])
        return api_key, quota
    try:
        stamps = tuple(redis_client().mget(stamp_keys))  # before the row: see the module's doc
    except Exception:  # noqa: BLE001
        return _without_cache(lookup, load, accept), None
    return _accepted(_load(lookup, load, stamps), accept), None


def _without_cache(lookup, load, accept):
    log.warning("API key cache: Redis unavailable, reading the key from the database", exc_info=True)
    return _accepted(load(lookup), accept)


def _accepted(api_key, accept):
    return api_key if api_key is not None and accept(api_key) else None


def _load(lookup, load, stamps):
    api_key = load(lookup)
    if api_key is None:
        return None  # unknown lookups are not remembered: a flood of them must not fill memory
    if len(_entries) >= MAX_ENTRIES:
        _entries.clear()
    _entries[lookup] = _Entry(api_key, stamps, _clock())
    return _detached(api_key)


def _detached(api_key):
    """A copy of the cached key, organization and plan: a request may change its objects
    (a plan change assigns ``organization.plan``) without touching the cache's."""
    organization = _copy(api_key.organization)
    organization.plan = _copy(api_key.organization.plan)
    clone = _copy(api_key)
    clone.organization = organization
    return clone


def _copy(instance):
    """A shallow copy of a model instance, as ``copy.copy`` makes it (its own field values
    and its own cache of related objects) without Django's pickling path, which costs far
    more (bench/README.md, "Figures behind the code")."""
    clone = instance.__class__.__new__(instance.__class__)
    clone.__dict__.update(instance.__dict__)
    state = clone._state = ModelState()
    state.db, state.adding = instance._state.db, instance._state.adding
    state.fields_cache = dict(instance._state.fields_cache)
    return clone


def note_used(lookup, when):
    """The key's last_used_at was written: remember it, so the next requests do not write it again."""
    entry = _entries.get(lookup)
    if entry is not None:
        entry.api_key.last_used_at = when


# --- what changes a key's right to authenticate


def changed(lookups=(), *, every_key=False):
    """Bump the stamps of ``lookups`` (or of every key) now and again when the current
    transaction commits."""
    names = [_stamp_name(lookup) for lookup in lookups]
    if every_key:
        names.append(_stamp_name())
    if not names or not enabled():
        return
    for lookup in lookups:
        _entries.pop(lookup, None)
    if every_key:
        _entries.clear()
    _bump(names)
    transaction.on_commit(lambda: _bump(names))


def key_saved(sender, instance, **kwargs):
    """post_save and post_delete of ApiKey (revoked, expiry or scopes changed, deleted, or
    deleted with its organization)."""
    changed([instance.lookup])


def organization_saved(sender, instance, **kwargs):
    """post_save of Organization (suspended, plan changed, deletion requested, ...): its
    keys' entries hold the old organization."""
    from apps.accounts.models import ApiKey

    changed(list(ApiKey.objects.filter(organization_id=instance.pk).values_list("lookup", flat=True)))


def plan_saved(sender, instance, **kwargs):
    """post_save and post_delete of Plan: entries hold their organization's plan."""
    changed(every_key=True)


def _bump(names):
    cache = caches[CACHE_ALIAS]
    try:
        pipe = redis_client().pipeline(transaction=False)
        for name in names:
            key = cache.make_and_validate_key(name)
            pipe.incr(key)
            pipe.expire(key, STAMP_TTL)
        pipe.execute()
    except Exception:  # noqa: BLE001 - the change itself must not fail; entries expire after MAX_AGE
        log.error("API key cache: could not bump %s; other web processes may trust the old state for up to "
                  "%s s", names, MAX_AGE, exc_info=True)


def clear():
    """Forget every entry of this process (tests)."""
    _entries.clear()
