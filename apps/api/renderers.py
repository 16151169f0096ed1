"""The API's JSON, written by orjson.

DRF's JSONRenderer runs the standard library's encoder, whose Python ``default`` hook and
pure-Python iteration over every dict and list cost about half a millisecond on a page of
50 jobs. orjson writes the same documents in C. What DRF's encoder decides is kept: a
datetime, date or time goes to DRF's own ``JSONEncoder.default`` (``Z`` for UTC, its error
for an aware time), as does anything orjson does not know (lazy strings, Decimal,
timedelta, querysets); U+2028 and U+2029 are escaped as DRF escapes them. Whatever orjson
refuses (a non-text key, an integer beyond 64 bits, a lone surrogate) and every indented
or ASCII-only rendering go to DRF's renderer, so the output does not depend on which wrote it
(tests/api/test_renderers.py compares them) but for a float in exponent notation: 1e-7
where Python writes 1e-07, the same number.
"""

import orjson
from rest_framework.renderers import JSONRenderer
from rest_framework.utils.encoders import JSONEncoder

_DRF_DEFAULT = JSONEncoder().default
_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


class FastJSONRenderer(JSONRenderer):
    def render(self, data, accepted_media_type=None, renderer_context=None):
        if data is None or self.ensure_ascii or not self.compact or \
                self.get_indent(accepted_media_type, renderer_context or {}) is not None:
            return super().render(data, accepted_media_type, renderer_context)
        try:
            text = orjson.dumps(data, default=_DRF_DEFAULT, option=_OPTIONS)
        except orjson.JSONEncodeError:
            return super().render(data, accepted_media_type, renderer_context)
        # Valid JSON but not valid JavaScript: DRF escapes them for JSONP-minded clients.
        return text.replace(b"\xe2\x80\xa8", b"\\u2028").replace(b"\xe2\x80\xa9", b"\\u2029")
