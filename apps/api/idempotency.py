"""Idempotency-Key: a retried POST returns the first result instead of creating twice.

The key row is inserted in the same transaction as the object it guards: a concurrent
retry blocks on the unique index until the first request commits, then replays its
result; if the first request fails (rolls back), the retry simply runs.
"""

import hashlib
import json
from datetime import timedelta

from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework.exceptions import APIException
from rest_framework.response import Response

from apps.accounts.models import IdempotencyKey

from .errors import Conflict

HEADER = "Idempotency-Key"
LIFETIME = timedelta(hours=24)
MAX_KEY_LENGTH = 255
REPLAY_HEADER = "Idempotent-Replayed"


class IdempotencyKeyReused(Conflict):
    default_detail = "This Idempotency-Key was used with a different request body; use a new key."
    default_code = "idempotency_key_reused"


class InvalidIdempotencyKey(APIException):
    status_code = 400
    default_detail = f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} printable characters."
    default_code = "invalid_idempotency_key"


def run_once(request, scope, handler):
    """Run ``handler()`` (which returns a Response) at most once per Idempotency-Key."""
    key = request.headers.get(HEADER)
    if key is None:
        return handler()
    if not 0 < len(key) <= MAX_KEY_LENGTH or not key.isprintable():
        raise InvalidIdempotencyKey()
    actor, now = request.actor, timezone.now()
    fingerprint = _fingerprint(request.data)
    lookup = {"organization": actor.organization, "principal": actor.principal, "scope": scope, "key": key}
    with transaction.atomic():
        IdempotencyKey.objects.filter(**lookup, created_at__lte=now - LIFETIME).delete()
        try:
            with transaction.atomic():
                record = IdempotencyKey.objects.create(
                    **lookup, request_hash=fingerprint, response_status=0, response_body={}, created_at=now,
                )
        except IntegrityError:
            return _replay(IdempotencyKey.objects.get(**lookup), fingerprint)
        response = handler()  # an exception rolls the key back with everything else
        record.response_status = response.status_code
        record.response_body = json.loads(json.dumps(response.data, cls=DjangoJSONEncoder))
        record.save(update_fields=["response_status", "response_body"])
        return response


def purge_expired(now=None):
    """Delete keys past their 24 h (for a housekeeping task); returns how many."""
    cutoff = (now or timezone.now()) - LIFETIME
    return IdempotencyKey.objects.filter(created_at__lte=cutoff).delete()[0]


def _replay(record, fingerprint):
    if record.request_hash != fingerprint:
        raise IdempotencyKeyReused()
    return Response(record.response_body, status=record.response_status, headers={REPLAY_HEADER: "true"})


def _fingerprint(data):
    text = json.dumps(data, sort_keys=True, cls=DjangoJSONEncoder, default=str)
    return hashlib.sha256(text.encode()).hexdigest()
