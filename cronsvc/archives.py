"""Archives of purged history in S3-compatible object storage (AWS S3, MinIO, moto): the
object key of a part, gzip-compressed JSON Lines, and a small client that writes a part,
confirms it landed, and reads it back.

Free of Django: apps.archives gives it the settings and the rows. A write either returns a
confirmed ``StoredPart`` or raises ``ArchiveWriteFailed``; the caller deletes rows only
after the first.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
from dataclasses import dataclass
from datetime import date

CONTENT_TYPE = "application/gzip"


class ArchiveWriteFailed(Exception):
    """The part is not (confirmed) in the bucket: keep the rows, try again later."""


class ArchiveReadFailed(Exception):
    """The object store did not give the part back (down, or the object is gone)."""


@dataclass(frozen=True)
class StoreConfig:
    bucket: str
    prefix: str = "executions"
    endpoint_url: str | None = None
    region: str = "us-east-1"
    access_key_id: str | None = None  # None: boto3's own chain (AWS_* variables, profile, instance role)
    secret_access_key: str | None = None
    addressing_style: str = "auto"
    timeout_seconds: float = 30.0


@dataclass(frozen=True)
class EncodedPart:
    body: bytes
    rows: int
    sha256: str


@dataclass(frozen=True)
class StoredPart:
    key: str
    bytes: int
    sha256: str


def part_key(prefix, organization_id, day: date, first_id):
    """``<prefix>/<organization>/<YYYY>/<MM>/<DD>-<first execution id>.jsonl.gz``: a day
    purged in several batches has several parts, each named by its first (time-ordered,
    uuid7) execution, so a later part never overwrites an earlier one; listing the day's
    prefix gives them in order."""
    return f"{prefix.strip('/')}/{organization_id}/{day:%Y/%m/%d}-{first_id}.jsonl.gz"


def encode_jsonl_gz(rows, default=str):
    """One JSON object per line, gzip-compressed as written; ``default`` turns what JSON has
    no type for (datetimes, UUIDs) into text."""
    buffer, count = io.BytesIO(), 0
    # mtime=0: the same rows give the same bytes (and the same sha256) on a retry.
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as gz:
        for row in rows:
            gz.write(json.dumps(row, default=default, separators=(",", ":"), ensure_ascii=False).encode())
            gz.write(b"\n")
            count += 1
    body = buffer.getvalue()
    return EncodedPart(body=body, rows=count, sha256=hashlib.sha256(body).hexdigest())


class ObjectStore:
    """A bucket reached with boto3. botocore's errors (connection refused, timeouts, HTTP
    errors) become ArchiveWriteFailed / ArchiveReadFailed so callers catch one thing."""

    def __init__(self, config: StoreConfig):
        import boto3
        from botocore.config import Config

        self.config = config
        self.client = boto3.client(
            "s3", endpoint_url=config.endpoint_url or None, region_name=config.region,
            aws_access_key_id=config.access_key_id or None, aws_secret_access_key=config.secret_access_key or None,
            config=Config(
                connect_timeout=config.timeout_seconds, read_timeout=config.timeout_seconds,
                retries={"mode": "standard", "max_attempts": 3},
                s3={"addressing_style": config.addressing_style},
                signature_version="s3v4",  # presigned URLs too (SigV2 is refused by newer regions)
                # Content-MD5 (below) is the integrity check every S3-compatible server knows;
                # botocore's newer default checksums are refused by some of them.
                request_checksum_calculation="when_required", response_checksum_validation="when_required",
            ))

    def key(self, organization_id, day, first_id):
        return part_key(self.config.prefix, organization_id, day, first_id)

    def write(self, key, part: EncodedPart) -> StoredPart:
        """Put the part and confirm it: the server checked the MD5 of what it received, and a
        HEAD afterwards must show the object with the part's size."""
        from botocore.exceptions import BotoCoreError, ClientError

        md5 = base64.b64encode(hashlib.md5(part.body, usedforsecurity=False).digest()).decode()
        try:
            self.client.put_object(Bucket=self.config.bucket, Key=key, Body=part.body, ContentMD5=md5,
                                   ContentType=CONTENT_TYPE, Metadata={"sha256": part.sha256, "rows": str(part.rows)})
            head = self.client.head_object(Bucket=self.config.bucket, Key=key)
        except (BotoCoreError, ClientError) as exc:
            raise ArchiveWriteFailed(f"{key}: {exc}") from exc
        if head.get("ContentLength") != len(part.body):
            raise ArchiveWriteFailed(f"{key}: stored {head.get('ContentLength')} bytes, wrote {len(part.body)}")
        return StoredPart(key=key, bytes=len(part.body), sha256=part.sha256)

    def open(self, key):
        """The object's body as an iterator of byte chunks (for a streaming response)."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            body = self.client.get_object(Bucket=self.config.bucket, Key=key)["Body"]
        except (BotoCoreError, ClientError) as exc:
            raise ArchiveReadFailed(f"{key}: {exc}") from exc
        return body.iter_chunks(chunk_size=64 * 1024)

    def read(self, key):
        return b"".join(self.open(key))

    def presigned_url(self, key, *, seconds, filename):
        return self.client.generate_presigned_url(
            "get_object", ExpiresIn=seconds,
            Params={"Bucket": self.config.bucket, "Key": key,
                    "ResponseContentDisposition": f'attachment; filename="{filename}"'})
