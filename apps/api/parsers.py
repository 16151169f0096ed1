"""The API's JSON parser, bounded: bodies nesting deeper than MAX_JSON_DEPTH are refused
with 400 ``json_too_deep`` before the recursive parser sees them."""

import codecs
import io

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from cronsvc.jsondepth import exceeds_depth


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        raw = stream.read() if stream is not None else b""
        try:
            text = codecs.decode(raw, encoding)
        except UnicodeDecodeError as exc:
            raise ParseError(f"The body is not valid {encoding}: {exc}") from None
        if exceeds_depth(text, settings.MAX_JSON_DEPTH):
            raise ParseError(f"The JSON body nests deeper than {settings.MAX_JSON_DEPTH} levels.",
                             code="json_too_deep")
        return super().parse(io.BytesIO(raw), media_type, parser_context)
