"""How deeply a JSON text nests, found without parsing it (Python's json module recurses
and would raise RecursionError, a 500, on a body of ten thousand '[')."""

import re

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


def exceeds_depth(text, limit):
    """True when arrays/objects in ``text`` nest deeper than ``limit``."""
    depth = 0
    for match in _BRACKET.finditer(_STRING.sub("", text)):
        if match.group() in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False
