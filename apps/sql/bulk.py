"""Set-based statements over arrays: one array per column, unpacked by PostgreSQL's
``unnest`` into rows, so a group of any size is one statement and nothing is quoted into
the SQL text.

A statement names its columns once, with their PostgreSQL types, as an ``Unnest``; the
placeholders, the row alias's column list and the arrays of the parameters all come from
that one list, so a column added or moved cannot leave them out of step.
"""

import re
import struct
import weakref
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import orjson
from django.db import connection
from psycopg import pq
from psycopg.adapt import Dumper
from psycopg.types.json import Jsonb


class Unnest:
    """``unnest(%b::uuid[], %b::text[], ...) AS v(id, status, ...)`` from ``columns``, a
    sequence of (name, PostgreSQL type) pairs in the order the rows give their values.

    ``placeholder`` is ``%b`` for binary parameters (``binding_cursor``) or ``%s`` for a
    Django cursor."""

    def __init__(self, columns, *, alias="v", placeholder="%b"):
        self.columns = tuple(columns)
        self.names = tuple(name for name, _ in self.columns)
        self.alias = alias
        self.placeholder = placeholder
        self.arrays = ", ".join(f"{placeholder}::{kind}[]" for _, kind in self.columns)

    @property
    def source(self):
        """``unnest(...) AS <alias>(<names>)``, for a FROM clause."""
        return f"unnest({self.arrays}) AS {self.alias}({', '.join(self.names)})"

    @property
    def select(self):
        """``SELECT <names> FROM unnest(...) AS <alias>(<names>)``, for an INSERT ... SELECT."""
        return f"SELECT {', '.join(self.names)} FROM {self.source}"

    def params(self, rows):
        """One list per column from ``rows`` (each a sequence of values in column order)."""
        width = len(self.columns)
        rows = list(rows)
        for length in set(map(len, rows)) - {width}:  # (map and set in C: no Python loop per row)
            raise ValueError(f"a row of {length} values for the {width} columns {self.names}")
        # transposed by zip, in C: a Python loop per value is a visible share of a scheduler's tick
        columns = [list(column) for column in zip(*rows)] if rows else [[] for _ in range(width)]
        if self.placeholder != "%b":
            return columns
        return [_encoded(kind, values) for (_, kind), values in zip(self.columns, columns)]


# --- arrays in PostgreSQL's binary format, built here --------------------------------------
#
# psycopg dumps a list parameter element by element in Python (a dumper looked up and
# called for each value: ~0.8 us a value, the largest Python part of a scheduler's write,
# bench/README.md "Issue 38"). For the element types below the array is built here in
# one pass instead (a value's bytes memoised within the column: a batch repeats its
# statuses, queues and times) and handed to psycopg as one ready binary parameter. A column
# whose values are not all of the type's Python kind (a naive datetime, a str for a uuid,
# an int out of range) raises here and goes to psycopg as a list, as before: it decides.

_NULL = b"\xff\xff\xff\xff"
_PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_HEADER = struct.Struct("!iiiii").pack  # dimensions, has nulls, element oid, length, lower bound
_EMPTY = struct.Struct("!iii").pack  # no dimensions, no nulls, element oid


def _fixed(fmt, size):
    pack = struct.Struct(f"!i{fmt}").pack
    return lambda value: pack(size, value)


def _uuids(values):
    # every value its own (ids): no memo; a value without ``.int`` (a str) raises AttributeError
    return [_NULL if value is None else b"\x00\x00\x00\x10" + value.int.to_bytes(16, "big") for value in values]


_int8 = _fixed("q", 8)


def _timestamptz(value):
    return _int8((value - _PG_EPOCH) // _MICROSECOND)  # a naive datetime (or a date) raises TypeError


def _text(value):
    return _text_bytes(value.encode())  # Django's connections are UTF8


def _text_bytes(data):
    return _LENGTH(len(data)) + data


_LENGTH = struct.Struct("!i").pack


def _each(encode):
    """All the values' bytes, each encoded on its own."""
    return lambda values: [_NULL if value is None else encode(value) for value in values]


def _memoised(encode):
    """All the values' bytes, each distinct value encoded once (a batch repeats its statuses,
    queues and times); an unhashable value raises TypeError."""
    def encode_all(values):
        table = dict.fromkeys(values)
        for value in table:
            table[value] = _NULL if value is None else encode(value)
        return list(map(table.__getitem__, values))
    return encode_all


_float8_bytes = _fixed("d", 8)


def _float8(value):
    if not isinstance(value, float):
        raise TypeError("not a float")  # (psycopg decides for an int or a Decimal)
    return _float8_bytes(value)


def _bool(value):
    if type(value) is not bool:
        raise TypeError("not a bool")
    return b"\x00\x00\x00\x01\x01" if value else b"\x00\x00\x00\x01\x00"


def _jsonb(value):
    """A psycopg ``Jsonb`` wrapper, written by orjson: a header set costs ~0.1 us there and ~2
    us through ``json.dumps`` (three a recorded run). What orjson refuses (a lone surrogate,
    an integer beyond 64 bits, a key that is not a string) raises its JSONEncodeError, a
    TypeError: the column then goes to psycopg, whose ``json.dumps`` decides, as before."""
    if not isinstance(value, Jsonb) or value.dumps is not None:
        raise TypeError("not a plain Jsonb")
    return _text_bytes(b"\x01" + orjson.dumps(value.obj))  # jsonb's binary form: version 1, then the text


#: element type (as a column names it) -> (element oid, array oid, the values' bytes)
_ELEMENTS = {
    "uuid": (2950, 2951, _uuids),
    "timestamptz": (1184, 1185, _memoised(_timestamptz)),
    "timestamp with time zone": (1184, 1185, _memoised(_timestamptz)),
    "text": (25, 1009, _memoised(_text)),
    "varchar": (25, 1009, _memoised(_text)),  # the statement casts to its varchar(n)[]
    "integer": (23, 1007, _memoised(_fixed("i", 4))),
    "smallint": (21, 1005, _memoised(_fixed("h", 2))),
    "bigint": (20, 1016, _memoised(_int8)),
    "float8": (701, 1022, _each(_float8)),  # not memoised: 0.0 == -0.0 would share bytes
    "double precision": (701, 1022, _each(_float8)),
    "bool": (16, 1000, _each(_bool)),  # not memoised: True == 1 would share bytes unchecked
    "boolean": (16, 1000, _each(_bool)),
    "jsonb": (3802, 3807, _each(_jsonb)),
}
_TYPMOD = re.compile(r"\(\d+\)$")


class _BinaryArray(bytes):
    """An array parameter already in binary form; a subclass per array type carries its oid."""

    __slots__ = ()


def _array_class(array_oid):
    holder = type(f"_BinaryArray{array_oid}", (_BinaryArray,), {"__slots__": ()})
    holder.dumper = type(f"_BinaryArray{array_oid}Dumper", (Dumper,), {
        "format": pq.Format.BINARY, "oid": array_oid, "dump": lambda self, obj: obj})
    return holder


_ARRAY_CLASSES = {oid: _array_class(oid) for oid in {array_oid for _, array_oid, _ in _ELEMENTS.values()}}


def _encoded(kind, values):
    """The column ``values`` of PostgreSQL type ``kind`` as one binary array parameter, or
    the list itself for psycopg to dump (a type without an encoder here, or a value that is
    not of its type's Python kind)."""
    element = _ELEMENTS.get(_TYPMOD.sub("", kind).strip())
    if element is None:
        return values
    element_oid, array_oid, encode_all = element
    try:
        parts = encode_all(values)
    except (AttributeError, TypeError, ValueError, OverflowError, struct.error):
        return values
    if not values:
        return _ARRAY_CLASSES[array_oid](_EMPTY(0, 0, element_oid))
    # (no value's bytes equal _NULL's: each starts with a length, >= 0)
    has_nulls = int(_NULL in parts)
    return _ARRAY_CLASSES[array_oid](_HEADER(1, has_nulls, element_oid, len(values), 1) + b"".join(parts))


_registered = weakref.WeakSet()  # the psycopg connections that know the array classes


def _register(psycopg_connection):
    if psycopg_connection not in _registered:
        for holder in _ARRAY_CLASSES.values():
            psycopg_connection.adapters.register_dumper(holder, holder.dumper)
        _registered.add(psycopg_connection)


@contextmanager
def binding_cursor():
    """A server-side-binding psycopg cursor on Django's connection (same transaction), its
    errors wrapped as Django's: the arrays go out in binary (``%b``) instead of being quoted
    into the SQL text."""
    import psycopg

    connection.ensure_connection()
    _register(connection.connection)
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        yield cursor
