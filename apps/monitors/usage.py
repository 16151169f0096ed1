"""Pings counted in the month's usage (UsageMonth.pings), added up in the process first.

Every ping of an organization would otherwise update its one UsageMonth row, so at a few
hundred pings a second the pings would wait for each other's row lock. Each web process
counts its pings here and adds them to the database in one statement about once a second
(USAGE_FLUSH_SECONDS), from the request that finds the counts due, and when the process
exits. The monthly ping quota adds this process's pending count to the stored one.

A process killed without exiting (SIGKILL, a crash) loses at most its last second of counts:
usage is then under-counted, never over-counted; the pings themselves are stored.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from apps.accounts.models import Organization
from apps.executions.models import UsageMonth
from apps.sql.modes import on_postgresql

from . import queries

USAGE_FLUSH_SECONDS = 1.0
log = logging.getLogger(__name__)

_lock = threading.Lock()
_pending = Counter()  # (organization id, month) -> pings not yet stored
_quotas = {}  # organization id -> the plan's monthly runs quota (a new row's ``quota``)
_flushed_at = time.monotonic()


def count(organization_id, month, *, quota):
    """Count one ping; stores the counts when they are due."""
    global _flushed_at
    with _lock:
        _pending[organization_id, month] += 1
        _quotas[organization_id] = quota
        due = time.monotonic() - _flushed_at >= USAGE_FLUSH_SECONDS
        if due:
            _flushed_at = time.monotonic()
    if due and not connection.in_atomic_block:
        flush()


def pending(organization_id, month):
    return _pending.get((organization_id, month), 0)


def flush():
    """Store every pending count in one statement; on failure they stay pending."""
    with _lock:
        counts, quotas = dict(_pending), dict(_quotas)
        _pending.clear()
    if not counts:
        return 0
    try:
        with transaction.atomic():
            _store(counts, quotas)
    except Exception:
        with _lock:
            _pending.update(counts)
        log.exception("ping usage not stored; kept for the next try")
        return 0
    return sum(counts.values())


def _store(counts, quotas):
    keys, now = list(counts), timezone.now()
    if not on_postgresql():  # the embedded mode's SQLite: a few organizations
        for org, month in keys:
            if Organization.objects.filter(pk=org).exists():
                row, _ = UsageMonth.objects.get_or_create(organization_id=org, month=month,
                                                          defaults={"quota": quotas.get(org, 0)})
                UsageMonth.objects.filter(pk=row.pk).update(pings=F("pings") + counts[org, month], updated_at=now)
        return
    queries.add_pings(((org, month, counts[org, month], quotas.get(org, 0)) for org, month in keys), now)


def forget():
    """Drop the pending counts (a test starting afresh)."""
    with _lock:
        _pending.clear()
