"""Customer regular expressions searched in linear time: no backtracking, no way to hang.

Python's ``re`` backtracks: ``(a+)+$`` against thirty ``a`` and a ``b`` takes minutes, and
the match holds the GIL so no thread-based timeout can stop it. Instead the pattern is
parsed with ``re``'s own parser (same syntax, same errors), compiled to an NFA, and
searched by simulating every NFA state at once (Thompson's construction, as RE2 does):
time grows with len(text) x len(pattern), whatever the pattern. Visited state sets are
memoised into DFA transitions, so a typical search costs a dict look-up per character.

Features that need backtracking are refused when the job is saved: backreferences,
lookaround, conditionals, atomic groups and possessive quantifiers. Only "does it match
somewhere" is answered (``re.search`` semantics); there are no capture groups.
"""

from __future__ import annotations

import re
import re._constants as sre  # re's parser: the syntax customers know, errors included
import re._parser as sre_parse
from functools import lru_cache
from typing import Callable

from .errors import InvalidRequest

MAX_PATTERN_LENGTH = 1000
MAX_PROGRAM_SIZE = 5000  # NFA states, after expanding {m,n}
_MAX_CACHED_TRANSITIONS = 20000

CHAR, SPLIT, JMP, ASSERT, MATCH = range(5)
_ASCII_SPACE = frozenset(" \t\n\r\f\v")


def compile_pattern(pattern: str, field: str = "body_regex") -> "SafePattern":
    """Compile or raise InvalidRequest (``invalid_regex`` or ``unsupported_regex``)."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise InvalidRequest("invalid_regex", field, f"at most {MAX_PATTERN_LENGTH} characters")
    return _compile_cached(pattern, field)


@lru_cache(maxsize=256)
def _compile_cached(pattern: str, field: str) -> "SafePattern":
    try:
        parsed = sre_parse.parse(pattern, 0)
    except re.error as exc:
        raise InvalidRequest("invalid_regex", field, f"invalid regular expression: {exc}") from exc
    compiler = _Compiler(field)
    compiler.sequence(parsed.data, parsed.state.flags)
    compiler.emit(MATCH)
    return SafePattern(compiler.program)


class SafePattern:
    def __init__(self, program: list[tuple]) -> None:
        self._program = program
        self._has_asserts = any(op[0] == ASSERT for op in program)
        self._match_pc = len(program) - 1  # the one MATCH, emitted last
        # Shared by all threads: dict reads and writes are atomic, and a lost entry is
        # only recomputed.
        self._transitions: dict[tuple, frozenset[int]] = {}

    def search(self, text: str) -> bool:
        """Whether the pattern matches anywhere in ``text``."""
        state = self._closure([0], (None, text[:1] or None, len(text) == 1))
        if self._match_pc in state:
            return True
        transitions, match_pc, last = self._transitions, self._match_pc, len(text) - 1
        for position, char in enumerate(text):
            if self._has_asserts:
                # What assertions after ``char`` can see: the next char, whether it is the
                # last one (``$`` also matches before a final newline).
                following = text[position + 1] if position < last else None
                key = (state, char, following, position + 1 == last)
            else:
                key = (state, char)
            following_state = transitions.get(key)
            state = self._transition(key) if following_state is None else following_state
            if match_pc in state:
                return True
        return False

    def _transition(self, key: tuple) -> frozenset[int]:
        state, char, *seen_next = key
        following = self._step(state, char, (char, *seen_next) if seen_next else None)
        if len(self._transitions) >= _MAX_CACHED_TRANSITIONS:
            self._transitions.clear()
        self._transitions[key] = following
        return following

    def _step(self, state: frozenset[int], char: str, context) -> frozenset[int]:
        seeds = [pc + 1 for pc in state
                 if self._program[pc][0] == CHAR and self._program[pc][1](char)]
        seeds.append(0)  # search: a new match attempt starts at every position
        return self._closure(seeds, context)

    def _closure(self, seeds: list[int], context) -> frozenset[int]:
        """The consuming and matching states reachable from ``seeds`` without input."""
        found: set[int] = set()
        seen: set[int] = set()
        stack = list(reversed(seeds))
        while stack:
            pc = stack.pop()
            if pc in seen:
                continue
            seen.add(pc)
            op = self._program[pc]
            if op[0] == SPLIT:
                stack.extend((op[2], op[1]))
            elif op[0] == JMP:
                stack.append(op[1])
            elif op[0] == ASSERT:
                # context: (previous char, next char, next char is the last one)
                if op[1](*context):
                    stack.append(pc + 1)
            else:
                found.add(pc)
        return frozenset(found)


class _Compiler:
    def __init__(self, field: str) -> None:
        self.field = field
        self.program: list[tuple] = []

    def emit(self, *op) -> int:
        if len(self.program) >= MAX_PROGRAM_SIZE:
            raise InvalidRequest("invalid_regex", self.field, "regular expression is too complex")
        self.program.append(op)
        return len(self.program) - 1

    def patch(self, pc: int, *op) -> None:
        self.program[pc] = op

    def sequence(self, items, flags: int) -> None:
        for op, av in items:
            self.node(op, av, flags)

    def node(self, op, av, flags: int) -> None:
        if op in (sre.LITERAL, sre.NOT_LITERAL, sre.ANY, sre.IN):
            self.emit(CHAR, _char_predicate(op, av, flags))
        elif op is sre.SUBPATTERN:
            _group, add_flags, del_flags, items = av
            self.sequence(items, (flags | add_flags) & ~del_flags)
        elif op is sre.BRANCH:
            self.branch(av[1], flags)
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT):  # laziness cannot change *whether* it matches
            self.repeat(*av, flags)
        elif op is sre.AT:
            self.emit(ASSERT, _assertion(av, flags))
        else:
            raise InvalidRequest(
                "unsupported_regex", self.field,
                f"{op.name.lower()} needs backtracking and is not supported "
                "(no backreferences, lookaround, atomic groups or possessive quantifiers)",
            )

    def branch(self, alternatives, flags: int) -> None:
        jumps = []
        for alternative in alternatives[:-1]:
            split = self.emit(SPLIT, None, None)
            self.sequence(alternative, flags)
            jumps.append(self.emit(JMP, None))
            self.patch(split, SPLIT, split + 1, len(self.program))
        self.sequence(alternatives[-1], flags)
        for jump in jumps:
            self.patch(jump, JMP, len(self.program))

    def repeat(self, low: int, high: int, items, flags: int) -> None:
        for _ in range(low):
            self.sequence(items, flags)
        if high is sre.MAXREPEAT:
            loop = self.emit(SPLIT, None, None)
            self.sequence(items, flags)
            self.emit(JMP, loop)
            self.patch(loop, SPLIT, loop + 1, len(self.program))
            return
        splits = []
        for _ in range(high - low):
            splits.append(self.emit(SPLIT, None, None))
            self.sequence(items, flags)
        for split in splits:
            self.patch(split, SPLIT, split + 1, len(self.program))


def _char_predicate(op, av, flags: int) -> Callable[[str], bool]:
    if op is sre.ANY:
        return (lambda c: True) if flags & re.DOTALL else (lambda c: c != "\n")
    if op in (sre.LITERAL, sre.NOT_LITERAL):
        base = _literal(chr(av), flags)
        return base if op is sre.LITERAL else (lambda c: not base(c))
    return _char_class(av, flags)


def _literal(expected: str, flags: int) -> Callable[[str], bool]:
    if not flags & re.IGNORECASE:
        return lambda c: c == expected
    folded = {expected, expected.lower(), expected.upper()}
    return lambda c: c in folded or c.lower() in folded or c.upper() in folded


def _char_class(items, flags: int) -> Callable[[str], bool]:
    negate = False
    tests: list[Callable[[str], bool]] = []
    singles: set[str] = set()
    for op, av in items:
        if op is sre.NEGATE:
            negate = True
        elif op is sre.LITERAL:
            singles.add(chr(av))
        elif op is sre.RANGE:
            low, high = chr(av[0]), chr(av[1])
            tests.append(lambda c, low=low, high=high: low <= c <= high)
        elif op is sre.CATEGORY:
            tests.append(_category(av, flags))
        else:
            raise InvalidRequest("unsupported_regex", "body_regex", f"unsupported class item {op}")

    def member(c: str) -> bool:
        return c in singles or any(test(c) for test in tests)

    def matches(c: str) -> bool:
        hit = member(c)
        if not hit and flags & re.IGNORECASE:
            hit = member(c.lower()) or member(c.upper())
        return hit != negate

    return matches


def _is_word(c: str | None, ascii_only: bool) -> bool:
    if c is None:
        return False
    if ascii_only:
        return c.isascii() and (c.isalnum() or c == "_")
    return c.isalnum() or c == "_"


def _category(category, flags: int) -> Callable[[str], bool]:
    ascii_only = bool(flags & re.ASCII)
    positive: dict = {
        sre.CATEGORY_DIGIT: (lambda c: "0" <= c <= "9") if ascii_only else str.isdecimal,
        sre.CATEGORY_SPACE: (lambda c: c in _ASCII_SPACE) if ascii_only else str.isspace,
        sre.CATEGORY_WORD: lambda c: _is_word(c, ascii_only),
    }
    negative = {
        sre.CATEGORY_NOT_DIGIT: sre.CATEGORY_DIGIT,
        sre.CATEGORY_NOT_SPACE: sre.CATEGORY_SPACE,
        sre.CATEGORY_NOT_WORD: sre.CATEGORY_WORD,
    }
    if category in positive:
        return positive[category]
    if category in negative:
        test = positive[negative[category]]
        return lambda c: not test(c)
    raise InvalidRequest("unsupported_regex", "body_regex", f"unsupported category {category}")


def _assertion(at, flags: int) -> Callable[[str | None, str | None, bool], bool]:
    multiline = bool(flags & re.MULTILINE)
    ascii_only = bool(flags & re.ASCII)

    def boundary(prev, nxt, _last):
        return _is_word(prev, ascii_only) != _is_word(nxt, ascii_only)

    tests = {
        sre.AT_BEGINNING: (lambda p, n, last: p is None or p == "\n") if multiline
        else (lambda p, n, last: p is None),
        sre.AT_BEGINNING_STRING: lambda p, n, last: p is None,
        sre.AT_END: (lambda p, n, last: n is None or n == "\n") if multiline
        else (lambda p, n, last: n is None or (n == "\n" and last)),
        sre.AT_END_STRING: lambda p, n, last: n is None,
        # re never finds \b or \B in an empty string.
        sre.AT_BOUNDARY: lambda p, n, last: (p, n) != (None, None) and boundary(p, n, last),
        sre.AT_NON_BOUNDARY: lambda p, n, last: (p, n) != (None, None) and not boundary(p, n, last),
    }
    if at not in tests:
        raise InvalidRequest("unsupported_regex", "body_regex", f"unsupported anchor {at}")
    return tests[at]
