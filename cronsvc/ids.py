"""Time-ordered UUIDs (RFC 9562 version 7), and UUIDs as clients send them.

Random UUIDv4 keys scatter inserts across a B-tree; v7 keys grow with time, so the
executions table's primary-key index stays append-mostly at millions of rows. They are
still opaque to customers: nothing sequential can be guessed from them.
"""

import os
import time
import uuid


def uuid7(now_ms=None):
    millis = int(time.time() * 1000) if now_ms is None else int(now_ms)
    rand_a = int.from_bytes(os.urandom(2), "big") & 0xFFF
    rand_b = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (millis & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76  # version
    value |= rand_a << 64
    value |= 0b10 << 62  # variant
    value |= rand_b
    return uuid.UUID(int=value)


def uuid_or_none(value):
    """``value`` as a UUID when it is one or a string spelling one (any form uuid.UUID
    reads), else None. Only strings are parsed: str() of a number could spell a UUID."""
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(value) if isinstance(value, str) else None
    except ValueError:
        return None
