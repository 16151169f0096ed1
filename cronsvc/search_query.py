"""A history search as customers type it, read the way PostgreSQL's ``websearch_to_tsquery``
reads it: words and "quoted phrases" must all appear, ``or`` between two of them offers
an alternative (``a b or c`` is ``(a and b) or c``), and a leading ``-`` excludes one.

PostgreSQL does the real matching (full-text search); this reading serves the embedded
SQLite mode's plain substring fallback and refuses a search that finds nothing on its own
(only exclusions: ``-word`` would scan the whole history).
"""

import re
from dataclasses import dataclass

MAX_LENGTH = 200
# A quoted phrase (the closing quote may be missing, as websearch_to_tsquery allows), or
# a run of anything but spaces and quotes; either may start with "-".
_TOKEN = re.compile(r'(-?)(?:"([^"]*)"?|([^\s"]+))')
_WORD = re.compile(r"[^\W_]")  # a letter or a digit: what full-text search keeps


@dataclass(frozen=True)
class Term:
    text: str
    excluded: bool = False


class InvalidSearch(ValueError):
    """A search that cannot be run; ``code`` is stable for the API's 400."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def parse(text):
    """The alternatives of a search, each the terms that must all hold (a disjunction of
    conjunctions). Terms without a letter or digit are dropped, as full-text search drops
    them. Raises InvalidSearch when the search is too long or some alternative has no
    word to look for."""
    if len(text) > MAX_LENGTH:
        raise InvalidSearch("search_too_long", f"Search at most {MAX_LENGTH} characters.")
    alternatives, current, pending_or = [], [], False
    tokens = list(_TOKEN.finditer(text))
    for index, token in enumerate(tokens):
        minus, phrase, bare = token.groups()
        if bare is not None and not minus and bare.lower() == "or" and current and index + 1 < len(tokens):
            pending_or = True
            continue
        words = " ".join((phrase if phrase is not None else bare).split())
        if not _WORD.search(words):
            continue
        if pending_or:
            alternatives.append(current)
            current, pending_or = [], False
        current.append(Term(words, excluded=bool(minus)))
    if current:
        alternatives.append(current)
    if not alternatives:
        raise InvalidSearch("invalid_search", "Give a word or a \"quoted phrase\" to search for.")
    if any(all(term.excluded for term in terms) for terms in alternatives):
        raise InvalidSearch("invalid_search", "Each alternative needs a word to find, not only -exclusions.")
    return alternatives
