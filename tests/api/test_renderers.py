"""apps.api.renderers: orjson writes the API's JSON byte for byte as DRF's JSONRenderer
writes it, falls back to DRF for what orjson refuses, and costs no Python per item."""

import json
import sys
import uuid
from collections import OrderedDict
from datetime import date, datetime, time, timedelta, timezone as dt_timezone
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from django.db import models
from django.utils.functional import lazy
from rest_framework.exceptions import ErrorDetail
from rest_framework.renderers import JSONRenderer
from rest_framework.settings import api_settings

from apps.api.renderers import FastJSONRenderer


class Colour(models.TextChoices):
    RED = "red"


DOCUMENTS = {
    "scalars": {"none": None, "yes": True, "no": False, "int": -42, "float": 1.5, "third": 1 / 3,
                "text": "plain", "empty": "", "list": [], "dict": {}},
    "unicode": {"ünïcode": "日本語 ✓ émoji 🎉", "separators": "a\u2028b\u2029c", "quotes": 'say "hi" \\ /',
                "controls": "\n\r\t\b\f", "del": "\x7f"},
    "datetimes": {"utc": datetime(2030, 3, 31, 0, 30, 15, 123456, tzinfo=dt_timezone.utc),
                  "zoned": datetime(2030, 3, 31, 1, 30, tzinfo=ZoneInfo("Europe/Berlin")),
                  "whole": datetime(2030, 1, 1, tzinfo=dt_timezone.utc), "naive": datetime(2030, 1, 1, 12, 0, 0, 5),
                  "date": date(2030, 2, 28), "time": time(3, 0, 0, 250), "delta": timedelta(minutes=90)},
    "objects": {"uuid": uuid.UUID("0190f5c2-7d1e-7c1a-9b1e-2f3a4b5c6d7e"), "decimal": Decimal("1.50"),
                "lazy": lazy(lambda: "lazy text", str)(), "error": ErrorDetail("Bad thing.", code="bad"),
                "choice": Colour.RED, "tuple": (1, "two"), "ordered": OrderedDict([("b", 1), ("a", 2)]),
                "bytes": b"raw", "set": [1, 2, 3]},
    "refused by orjson": {"big": 2**70, "keys": {1: "one", None: "none"}},
    "a page": [{"id": str(uuid.UUID(int=n)), "name": f"job {n}", "enabled": n % 2 == 0,
                "next_run_at": datetime(2030, 1, 1, tzinfo=dt_timezone.utc) + timedelta(seconds=n),
                "tags": ["a", "b"], "request": {"url": "https://example.com/", "headers": {"X": "1"}}}
               for n in range(50)],
}


@pytest.mark.parametrize("name", DOCUMENTS)
def test_every_kind_of_value_is_written_as_drf_writes_it(name):
    document = DOCUMENTS[name]
    assert FastJSONRenderer().render(document) == JSONRenderer().render(document)


def test_floats_in_exponent_notation_are_the_same_numbers():
    """The one difference: Python writes 1e-07 and 1e+16, orjson 1e-7 and 1e16 (the same
    numbers to every JSON reader; no API field is that small or large)."""
    document = {"small": 1e-07, "large": 1e16, "negative": -2.5e-12}
    assert json.loads(FastJSONRenderer().render(document)) == json.loads(JSONRenderer().render(document)) == document


def test_indented_and_empty_renderings_are_drfs():
    document = DOCUMENTS["a page"][:2]
    indented = "application/json; indent=2"
    assert FastJSONRenderer().render(document, indented) == JSONRenderer().render(document, indented)
    assert FastJSONRenderer().render(None) == b""


def test_what_drf_refuses_is_refused_alike():
    with pytest.raises(TypeError):
        JSONRenderer().render({"object": object()})
    with pytest.raises(TypeError):
        FastJSONRenderer().render({"object": object()})


def test_the_api_renders_with_it_at_a_few_python_calls_per_page():
    """A page of 50 documents costs a handful of Python calls (one per datetime, DRF's own
    conversion), not the standard encoder's pass over every item."""
    assert api_settings.DEFAULT_RENDERER_CLASSES == [FastJSONRenderer]
    page = [{key: value for key, value in job.items() if key != "next_run_at"} for job in DOCUMENTS["a page"]]
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        calls += event == "call"

    renderer = FastJSONRenderer()
    sys.setprofile(count)
    try:
        renderer.render(page)
    finally:
        sys.setprofile(None)
    assert calls < 10, calls  # JSONRenderer: several hundred
