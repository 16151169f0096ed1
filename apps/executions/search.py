"""Searching the history: executions whose error message or response body matches a search
(``cronsvc.search_query``), and status-code filters (``503``, ``5xx``).

On PostgreSQL the search is full-text: ``websearch_to_tsquery`` against the words of the two
texts (``execution_search_words``), both with the ``simple`` configuration (no stemming, no
stop words: error codes, host names and ids are found as typed; JSON keys and values are
words like any other). The index ``exec_search``
(migration 0005) holds, per organization, the words of every execution that has a text, so
a search reads the matching rows of one organization only. The query below repeats the
index's expression and predicate exactly: PostgreSQL uses an expression index only for the
same expression.

Elsewhere (the embedded SQLite mode) each term is a case-insensitive substring of either
text: slower, looser (``time`` finds ``timeout``), and enough for a laptop's history.
"""

from django.db import connections
from django.db.models import BooleanField, F, Func, Q, Value

from cronsvc.search_query import parse

CONFIG = "simple"
TEXT_COLUMNS = ("error_message", "response_body")


class _Document(Func):
    """The index's ``execution_search_words(error_message, response_body)`` (migration 0005:
    to_tsvector('simple', error_message || ' ' || response_body) at its real cost), its
    columns named through the query (a join cannot make them ambiguous)."""

    function = "execution_search_words"


class _WebSearch(Func):
    template = f"websearch_to_tsquery('{CONFIG}'::regconfig, %(expressions)s)"


class _Matches(Func):
    template = "%(expressions)s"
    arg_joiner = " @@ "
    output_field = BooleanField()


def matching(executions, text):
    """The executions whose error message or response body matches ``text``; raises
    cronsvc.search_query.InvalidSearch for a search that cannot be run."""
    alternatives = parse(text)
    if connections[executions.db].vendor == "postgresql":
        return full_text(executions, text)
    return substrings(executions, alternatives)


def full_text(executions, text):
    document = _Document(*(F(column) for column in TEXT_COLUMNS))
    # The index's predicate (PostgreSQL reads NOT (x = '') as x <> '')
    has_text = ~Q(error_message="") | ~Q(response_body="")
    return executions.filter(has_text, _Matches(document, _WebSearch(Value(text))))


def substrings(executions, alternatives):
    """The fallback: every term of some alternative is (or, excluded, is not) a substring."""
    wanted = Q(pk__in=[])
    for terms in alternatives:
        every = Q()
        for term in terms:
            found = Q(error_message__icontains=term.text) | Q(response_body__icontains=term.text)
            every &= ~found if term.excluded else found
        wanted |= every
    return executions.filter(wanted)


class InvalidStatusCode(ValueError):
    pass


def status_code_range(value):
    """``503`` -> (503, 503); ``5xx`` (any case) -> (500, 599). Raises InvalidStatusCode."""
    value = value.strip().lower()
    if len(value) == 3 and value[0] in "12345" and value[1:] == "xx":
        low = int(value[0]) * 100
        return low, low + 99
    if value.isdigit() and 100 <= int(value) <= 599:
        return int(value), int(value)
    raise InvalidStatusCode(value)
