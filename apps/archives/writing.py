"""Archive before purge: the retention purge hands each batch of expired executions here
when an archive bucket is configured (ARCHIVE_S3_BUCKET).

For each UTC day in the batch: the day's runs (with their attempts) become one gzip JSON
Lines part, the part is written to the bucket and confirmed there, and only then, in one
transaction, the Archive row is recorded and exactly those runs are deleted. A write that
fails raises ArchiveWriteFailed before anything is deleted or recorded: the runs stay for
the next purge to try again.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import timezone as tz

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction

from apps.executions.models import Attempt, Execution
from apps.executions.purging import delete_executions
from cronsvc.archives import ObjectStore, StoreConfig, encode_jsonl_gz
from cronsvc.delivery.masking import masked

from .models import Archive

_json_default = DjangoJSONEncoder().default
HEADER_FIELDS = ("request_headers", "response_headers")


def archive_store():
    """The configured bucket, or None when archiving is off (no ARCHIVE_S3_BUCKET)."""
    if not settings.ARCHIVE_S3_BUCKET:
        return None
    return ObjectStore(StoreConfig(
        bucket=settings.ARCHIVE_S3_BUCKET, prefix=settings.ARCHIVE_S3_PREFIX,
        endpoint_url=settings.ARCHIVE_S3_ENDPOINT_URL or None, region=settings.ARCHIVE_S3_REGION,
        access_key_id=settings.ARCHIVE_S3_ACCESS_KEY_ID or None,
        secret_access_key=settings.ARCHIVE_S3_SECRET_ACCESS_KEY or None,
        addressing_style=settings.ARCHIVE_S3_ADDRESSING_STYLE, timeout_seconds=settings.ARCHIVE_S3_TIMEOUT_SECONDS))


def archive_and_delete(organization, ids, *, store, now):
    """Archive the executions ``ids`` of ``organization`` day by day, deleting each day's
    runs once its part is confirmed. Returns how many runs were deleted; raises
    ArchiveWriteFailed (the failed day's runs, and the later days', are kept)."""
    deleted = 0
    for day, rows in archive_lines(ids).items():
        part = encode_jsonl_gz(rows, default=_json_default)
        stored = store.write(store.key(organization.pk, day, rows[0]["id"]), part)
        with transaction.atomic():
            Archive.objects.create(organization=organization, day=day, key=stored.key, rows=part.rows,
                                   bytes=stored.bytes, sha256=stored.sha256, created_at=now)
            deleted += delete_executions([row["id"] for row in rows])
    return deleted


def archive_lines(ids):
    """{UTC day: [one dict per execution, its attempts inside]}, days and runs in time order.
    Headers are kept as stored (masked when recorded) and masked again here, so a secret
    header never reaches the archive in plain text."""
    attempts = defaultdict(list)
    attempt_fields = [f.attname for f in Attempt._meta.concrete_fields if f.attname != "execution_id"]
    for attempt in (Attempt.objects.filter(execution_id__in=ids).order_by("execution_id", "number")
                    .values("execution_id", *attempt_fields)):
        attempts[attempt.pop("execution_id")].append(_masked(attempt))
    days = defaultdict(list)
    fields = [f.attname for f in Execution._meta.concrete_fields]
    for row in Execution.objects.filter(id__in=ids).order_by("scheduled_for", "id").values(*fields):
        row["attempts"] = attempts.get(row["id"], [])
        days[row["scheduled_for"].astimezone(tz.utc).date()].append(_masked(row))
    return dict(sorted(days.items()))


def _masked(row):
    for name in HEADER_FIELDS:
        if isinstance(row.get(name), dict):
            row[name] = masked(row[name])
    return row
