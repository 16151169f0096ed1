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

from datetime import timedelta

from django.db.models import BooleanField, F, Func, Q, Value
from django.utils.dateparse import parse_datetime

from apps.sql.modes import on_postgresql
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


class _UnseenWebSearch(_WebSearch):
    """For a phrase: in a sub-select, so the planner cannot see the words and plans for a
    match of the default frequency. From the statistics it reads a phrase as a handful of
    rows (the product of its words' frequencies), skips the time index and rechecks every
    one of its thousands of candidates by computing their words (0.3 s); so planned, a
    window (newest_window) ANDs exec_search with exec_search_time and computes the words
    of the window's candidates only. Words alone keep their statistics: a very common
    word is better read newest first than from its huge GIN entry."""

    template = f"(SELECT {_WebSearch.template})"


class _Matches(Func):
    template = "%(expressions)s"
    arg_joiner = " @@ "
    output_field = BooleanField()


def matching(executions, text):
    """The executions whose error message or response body matches ``text``; raises
    cronsvc.search_query.InvalidSearch for a search that cannot be run."""
    alternatives = parse(text)
    if on_postgresql(executions.db):
        return full_text(executions, text, phrase=any(" " in term.text for terms in alternatives for term in terms))
    return substrings(executions, alternatives)


def full_text(executions, text, *, phrase=False):
    document = _Document(*(F(column) for column in TEXT_COLUMNS))
    words = (_UnseenWebSearch if phrase else _WebSearch)(Value(text))
    # The index's predicate (PostgreSQL reads NOT (x = '') as x <> '')
    has_text = ~Q(error_message="") | ~Q(response_body="")
    return executions.filter(has_text, _Matches(document, words))


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


# The widening windows: the first covers the hour before the newest run in reach; each next
# one reaches as far as the matches found so far say fills the page (_next_width), and four
# times as far while none is found, so a search through a year of history counts about 8
# windows (a rare word's are cheap each).
FIRST_WINDOW = timedelta(hours=1)
GROWTH = 4
# A time range of at most this many runs is searched in one query: sorting its matches costs
# less than the windows' counts, each of which reads the word's index entry again. (Counting
# them is cheap for a range: a few ms; an open-ended history is not counted.)
SMALL_RANGE = 50_000


def newest_window(found, history, *, cursor, needed, time_range=None):
    """``found`` (a search of ``history``) limited to the newest time window that holds the
    ``needed`` rows the cursor page will read (its offset, the page and one more), or as it
    is when all of what remains is fewer.

    Why: sorting the matches by time makes PostgreSQL fetch every match of the history
    from the heap (thousands of pages for a word of 1 % of the runs) before it returns the
    newest 50. So the windows go back in time from the newest run of ``history`` after the
    cursor's position, newest first, widening, each counting at most what is still needed
    in its own slice (a bounded scan: exec_search ANDed with exec_search_time) until the
    page is full or the oldest run (or ``time_range``'s start) is passed; then the page's
    query reads only that window. A time range of at most SMALL_RANGE runs is read whole
    (``found`` as it is). ``cursor`` is the pagination's (offset, reverse,
    position): forward, the page holds rows before its position (older); reversed (a
    "previous" link), rows after it, and the windows widen forward in time instead."""
    position = parse_datetime(cursor.position) if cursor and cursor.position else None
    older = not (cursor and cursor.reverse)  # the direction the page reads in
    if (cursor and cursor.position and position is None) or (not older and position is None):
        return found  # not a time, or no position to start from: the pagination's query answers
    start = time_range.start if time_range else None
    stop = time_range.stop if time_range else None
    if position is not None:
        bound = {"scheduled_for__lt" if older else "scheduled_for__gt": position}
        found, history = found.filter(**bound), history.filter(**bound)
    in_range = _within(history, start, stop)
    if start is not None and stop is not None and _at_most(in_range, SMALL_RANGE):
        return found
    anchor = _edge(in_range, newest=older)  # the first run the page can read
    last = _edge(in_range, newest=not older)  # the last one
    if anchor is None:
        return found
    step = -1 if older else 1
    width, counted, previous = FIRST_WINDOW, 0, None
    try:
        while True:
            edge = anchor + step * width
            piece = found.filter(**_beyond(edge, older, include=True))
            if previous is not None:
                piece = piece.filter(**_beyond(previous, not older, include=False))
            counted += piece.order_by()[:needed - counted].count()
            if counted >= needed:
                return found.filter(**_beyond(edge, older, include=True))
            if (edge <= last) if older else (edge >= last):
                return found
            previous, width = edge, _next_width(width, counted, needed)
    except OverflowError:  # a window past year 1 or 9999: the whole history is in it
        return found


def _next_width(width, counted, needed):
    """How far the next window reaches: from the matches per hour so far, a quarter more
    than the page needs (each window reads the word's whole index entry again, so fewer
    windows is what counts for a frequent word); GROWTH times as far while none was found."""
    if not counted:
        return width * GROWTH
    return width * min(64, max(2, 1.25 * needed / counted))


def _within(history, start, stop):
    if start is not None:
        history = history.filter(scheduled_for__gte=start)
    if stop is not None:
        history = history.filter(scheduled_for__lte=stop)
    return history


def _at_most(rows, limit):
    return rows.order_by()[:limit + 1].count() <= limit


def _beyond(moment, older, *, include):
    """The rows on the near side of ``moment``: not older than it, for a page read towards older."""
    return {f"scheduled_for__{'gt' if older else 'lt'}{'e' if include else ''}": moment}


def _edge(history, newest):
    """The newest (or oldest) scheduled_for of ``history``, or None."""
    ordering = "-scheduled_for" if newest else "scheduled_for"
    return history.order_by(ordering).values_list("scheduled_for", flat=True).first()


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
