"""A stable per-job offset, so jobs sharing a schedule do not all fire in the same second."""

from __future__ import annotations

from hashlib import blake2b


def jitter_offset(job_key: str, window_seconds: int) -> int:
    """Offset in [0, window_seconds) derived from ``job_key`` only: identical on every process and run.

    blake2b rather than hash(): Python salts str hashes per process.
    A window of 0 or less means no jitter.
    """
    if window_seconds <= 0:
        return 0
    digest = blake2b(job_key.encode("utf-8"), digest_size=8, person=b"cronsvc-jitter").digest()
    return int.from_bytes(digest, "big") % window_seconds
