"""The value a parameterized view's input is looked up with, as the database would compare it.

A read ``SELECT … FROM v WHERE acc = <value>`` stands for the view's definition with
``t.acc = <value>``; the engine answers it by a dict probe, where ``7 == 7.0`` but
``'7' != 7``. :func:`coerce` turns the value into the engine's representation of the input's
SQL type with the comparison rules DuckDB and PostgreSQL share, in O(1) and mostly without the
database:

- ``NULL`` matches nothing (SQL ``= NULL``): the lookup is empty;
- numbers against numeric inputs compare exactly (``a = 7.5`` on an INTEGER input matches
  nothing), a float against a DECIMAL input as the database does (as a double);
- a string is read as a value of the input's type (``WHERE d = '2024-01-01'`` on a DATE
  input), by the database itself (``cast``: one round trip), so its errors are the database's
  (``22P02`` and the like, raised as :class:`~ivm_layer.errors.DataError` naming the input);
- a number against a string input, a Boolean against a number, …: ``42883`` (PostgreSQL's
  "operator does not exist"), never a silent mismatch;
- anything else (UUIDs, intervals, time zones) goes through ``cast`` as well.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from ..errors import DataError, Error, ProgrammingError
from ..sql.types import value_kind

_INT = re.compile(r"(u?(tiny|small|big|huge)?int(eger)?(\d+)?|int[248]|smallint|bigint|integer|"
                  r"hugeint|uhugeint|u?int128|signed|long|short)$")
_DEC = re.compile(r"(decimal|numeric)(\s*\(.*\))?$")
_FLOAT = re.compile(r"(double( precision)?|float8|float\s*\(\s*(2[5-9]|[3-5]\d)\s*\))$")
_STRING = re.compile(r"(varchar|text|string|character varying|bpchar_never)(\s*\(.*\))?$")
_DATE = re.compile(r"date$")
_TS = re.compile(r"(timestamp|datetime|timestamp without time zone|timestamp_us)(\s*\(\d+\))?"
                 r"( without time zone)?$")
_BOOL = re.compile(r"(bool|boolean|logical)$")
_REAL = re.compile(r"(real|float4|float(\s*\(\s*(\d|1\d|2[0-4])\s*\))?)$")

NATIVE = object()   # a family whose values need no conversion


def family(sql_type: str | None) -> str:
    """``int``, ``decimal``, ``float``, ``real`` (4-byte floats), ``string``, ``date``,
    ``timestamp``, ``bool`` or ``other`` (CHAR(n), time zones, UUIDs, …: converted by the
    database)."""
    t = (sql_type or "").strip().lower()
    for name, rx in (("int", _INT), ("decimal", _DEC), ("float", _FLOAT), ("string", _STRING),
                     ("date", _DATE), ("timestamp", _TS), ("bool", _BOOL), ("real", _REAL)):
        if rx.fullmatch(t):
            return name
    return "other"


def coerce(value: Any, sql_type: str | None, fam: str, cast: Callable[[Any, str], Any], what: str) -> Any:
    """``value`` as the engine holds values of ``sql_type`` (``fam`` = :func:`family` of it),
    ``None`` when it can match nothing. ``cast(value, sql_type)`` asks the database. ``what``
    names the input in errors ("input acc of incremental view recent")."""
    if value is None:
        return None
    num = value_kind(value)
    num = num if num in ("int", "decimal", "float") else None
    if num is not None:
        if fam in ("int", "real"):
            return value          # Python compares numbers exactly, as SQL does here
        if fam == "decimal":
            if num == "float":
                return Decimal(repr(value)) if math.isfinite(value) else None
            return value
        if fam == "float":
            return float(value)
        if fam in ("string", "date", "timestamp", "bool"):
            raise ProgrammingError(f"{what} is {sql_type}: it cannot be compared with the number {value!r} "
                                   f"(write it as a {sql_type} value)", sqlstate="42883")
    elif isinstance(value, bool):
        if fam == "bool":
            return value
        if fam != "other":
            raise ProgrammingError(f"{what} is {sql_type}: it cannot be compared with the Boolean {value!r}",
                                   sqlstate="42883")
    elif isinstance(value, str):
        if fam == "string":
            return value
    elif isinstance(value, dt.datetime):
        if value.tzinfo is None:
            if fam == "timestamp":
                return value
            if fam == "date":
                return value.date() if value.time() == dt.time(0) else None
    elif isinstance(value, dt.date):
        if fam == "date":
            return value
        if fam == "timestamp":
            return dt.datetime(value.year, value.month, value.day)
    if fam != "other" and not isinstance(value, (str, dt.date)):
        raise ProgrammingError(f"{what} is {sql_type}: it cannot be compared with a value of Python type "
                               f"{type(value).__name__}", sqlstate="42883")
    try:
        return cast(value, sql_type)
    except Error as e:
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DataError(f"{what} is {sql_type}: {value!r} is not a valid {sql_type} value ({why})",
                        sqlstate=getattr(e, "sqlstate", None) or "22P02") from e


def lookup_inputs(vs, values: dict[str, Any], cast: Callable[[Any, str], Any]) -> dict[str, Any]:
    """``values`` (input → value as the statement gave it) converted by :func:`coerce` with the
    view state's ``input_types``."""
    types = vs.input_types
    return {p: coerce(v, types.get(p), family(types.get(p)), cast, f"input {p} of incremental view {vs.name!r}")
            for p, v in values.items()}
