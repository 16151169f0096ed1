"""cronsvc.slot: what a higher layer lends a lower one."""

import pytest

from cronsvc.slot import Slot


def test_an_empty_slot_names_the_app_that_should_fill_it():
    slot = Slot("usage-metered hook", "apps.billing")
    assert not slot.filled
    with pytest.raises(RuntimeError, match="No usage-metered hook registered: apps.billing must be installed"):
        slot.get()


def test_filling_again_replaces_and_a_default_reads_until_filled():
    slot = Slot("report", "apps.observability", default="nobody")
    assert slot.get() == "nobody"
    assert slot.fill("metrics") == "metrics"
    slot.fill("heartbeats")
    assert (slot.filled, slot.get()) == (True, "heartbeats")
