"""Reading a history search as websearch_to_tsquery does (cronsvc.search_query)."""

import pytest

from cronsvc.search_query import MAX_LENGTH, InvalidSearch, Term, parse


@pytest.mark.parametrize("text, expected", [
    ("timed out", [[Term("timed"), Term("out")]]),
    ('"read  timed out"', [[Term("read timed out")]]),
    ('"unterminated phrase', [[Term("unterminated phrase")]]),
    ("a b or c d", [[Term("a"), Term("b")], [Term("c"), Term("d")]]),  # (a and b) or (c and d)
    ("a -b OR c", [[Term("a"), Term("b", excluded=True)], [Term("c")]]),
    ('-"connection reset" refused', [[Term("connection reset", excluded=True), Term("refused")]]),
    ("or a or", [[Term("or"), Term("a"), Term("or")]]),  # "or" at either end is a word
    ("a-b ORD-98765", [[Term("a-b"), Term("ORD-98765")]]),  # a dash inside a word is the word's
    ("!!! größe", [[Term("größe")]]),  # no letter or digit: dropped, as full-text search drops it
])
def test_parse(text, expected):
    assert parse(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "!!!", '""', "-timeout", "a or -b", "- -", "___"])
def test_a_search_needs_a_word_to_find(text):
    with pytest.raises(InvalidSearch) as raised:
        parse(text)
    assert raised.value.code == "invalid_search"


def test_a_search_has_a_length_limit():
    assert parse("x" * MAX_LENGTH)
    with pytest.raises(InvalidSearch) as raised:
        parse("x" * (MAX_LENGTH + 1))
    assert raised.value.code == "search_too_long"
