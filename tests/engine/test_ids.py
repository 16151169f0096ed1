"""cronsvc.ids: time-ordered keys, and UUIDs as clients send them."""

import uuid

import pytest

from cronsvc.ids import uuid7, uuid_or_none

KNOWN = uuid.UUID("01a233c7-61e2-7d27-9a1b-9d90ac48f911")


@pytest.mark.parametrize("given", [KNOWN, str(KNOWN), KNOWN.hex, str(KNOWN).upper(), f"{{{KNOWN}}}",
                                   f"urn:uuid:{KNOWN}"])
def test_every_spelling_of_a_uuid_reads_as_it(given):
    assert uuid_or_none(given) == KNOWN


@pytest.mark.parametrize("given", [None, "", "not-a-uuid", "12", KNOWN.int, True, ["x"], {"id": str(KNOWN)}])
def test_anything_else_is_none(given):
    # KNOWN.int: a number is not an id, although str() of it spells a UUID's 32 hex digits
    # often enough (DRF and Django would read it as UUID(int=...), another UUID).
    assert uuid_or_none(given) is None


def test_uuid7_keys_grow_with_time():
    assert uuid7(now_ms=1_000).version == 7
    assert uuid7(now_ms=1_000) < uuid7(now_ms=2_000)
