"""Statement parameters on both backends: ``?``, ``$1`` and ``$name`` placeholders, and one
statement for many parameter sets.

- :func:`find`: the placeholders of a statement, outside quotes, dollar quotes and comments
  (one pass over the text, no parse).
- :func:`to_psycopg`: the statement and parameters rewritten for psycopg (``%s`` and
  ``%(name)s``, every other ``%`` doubled); a statement that uses psycopg's own placeholders
  is left as it is. DuckDB takes the three styles natively.
- :func:`insert_values`: ``INSERT INTO t [(cols)] VALUES (…) [rest]`` cut into its parts, so
  ``executemany`` can send every row in one statement: DuckDB as ``INSERT … SELECT`` over an
  Arrow table of the parameters (:func:`arrow_params`), PostgreSQL as a multi-row ``VALUES``
  (:func:`multi_row_values`). Both cost O(rows) once instead of one statement per row.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ProgrammingError
from ..sql.sqltext import skip_literal

_PLACEHOLDER = re.compile(r"\?|\$(\d+)|\$([A-Za-z_][A-Za-z0-9_]*)")
_INTERESTING = re.compile(r"['\"?$]|--|/\*")      # where a literal, comment or placeholder may start
_VALUES = re.compile(r"\bVALUES\b", re.IGNORECASE)
_SPACE = re.compile(r"(?:\s+|--[^\n]*|/\*.*?\*/)*", re.DOTALL)

#: psycopg's query parser limit (PostgreSQL's protocol takes at most 65535 parameters)
MAX_PG_PARAMS = 65535


@dataclass(frozen=True)
class Placeholder:
    start: int
    end: int
    key: int | str      # 0-based position for ? and $n, the name for $name
    named: bool


def find(text: str, start: int = 0, end: int | None = None) -> list[Placeholder]:
    """The placeholders in ``text[start:end]`` (``?`` numbered in order)."""
    end = len(text) if end is None else end
    out: list[Placeholder] = []
    q = 0
    i = start
    while i < end:
        m = _INTERESTING.search(text, i, end)
        if m is None:
            break
        i = m.start()
        c = text[i]
        if c in "'\"-/$":
            skip = skip_literal(text, i)
            if skip is not None:
                i = skip
                continue
        if c in "?$":
            m = _PLACEHOLDER.match(text, i)
            if m and not (c == "?" and text[i + 1:i + 2] in ("|", "&")):   # jsonb ?| ?& operators
                if c == "?":
                    out.append(Placeholder(i, m.end(), q, False))
                    q += 1
                elif m.group(1):
                    out.append(Placeholder(i, m.end(), int(m.group(1)) - 1, False))
                else:
                    out.append(Placeholder(i, m.end(), m.group(2), True))
                i = m.end()
                continue
        i += 1
    return out


def _value(params, ph: Placeholder) -> Any:
    if ph.named:
        if not isinstance(params, Mapping):
            raise ProgrammingError(f"placeholder ${ph.key} needs parameters as a mapping "
                                   "({'name': value}), got a sequence", sqlstate="42P02")
        try:
            return params[ph.key]
        except KeyError:
            raise ProgrammingError(f"no value for placeholder ${ph.key}", sqlstate="42P02") from None
    if isinstance(params, Mapping | str | bytes):
        raise ProgrammingError("positional placeholders (? or $1) need parameters as a sequence",
                               sqlstate="42P02")
    try:
        return params[ph.key]
    except IndexError:
        raise ProgrammingError(f"the statement has a placeholder for parameter {ph.key + 1} but only "
                               f"{len(params)} were given", sqlstate="42P02") from None


def _check_count(phs: list[Placeholder], params) -> None:
    if isinstance(params, Sequence) and not isinstance(params, str | bytes) and phs and not phs[0].named:
        want = max(p.key for p in phs) + 1
        if len(params) != want:
            raise ProgrammingError(f"the statement takes {want} parameter(s), {len(params)} were given",
                                   sqlstate="42P02")


def to_psycopg(text: str, params) -> tuple[str, Any]:
    """``(text, params)`` for psycopg: ``?``/``$n`` → ``%s`` with the values in order, ``$name``
    → ``%(name)s``; ``%`` doubled. Without our placeholders (psycopg's own ``%s`` style, or
    no parameters) the statement is returned unchanged."""
    if params is None:
        return text, None
    phs = find(text)
    if not phs:
        return text, params
    if len({p.named for p in phs}) > 1:
        raise ProgrammingError("a statement cannot mix $name with ? or $1 placeholders", sqlstate="42P02")
    _check_count(phs, params)
    parts: list[str] = []
    pos = 0
    values: list[Any] = []
    for ph in phs:
        parts.append(text[pos:ph.start].replace("%", "%%"))
        if ph.named:
            parts.append(f"%({ph.key})s")
            _value(params, ph)
        else:
            parts.append("%s")
            values.append(_value(params, ph))
        pos = ph.end
    parts.append(text[pos:].replace("%", "%%"))
    return "".join(parts), (params if phs[0].named else values)


@dataclass(frozen=True)
class InsertValues:
    """``INSERT INTO t [(cols)] VALUES (row) rest``: ``head`` ends before VALUES, ``row`` is
    the text inside the row's parentheses, with its placeholders (offsets into ``row``)."""

    head: str
    row: str
    rest: str
    placeholders: list[Placeholder]


def insert_values(text: str, values_from: int) -> InsertValues | None:
    """Cut an ``INSERT … VALUES`` of exactly one row with placeholders; ``values_from`` is where
    to look for ``VALUES`` (after the target table). ``None`` for anything else."""
    m = _VALUES.search(text, values_from)
    if m is None:
        return None
    i = _SPACE.match(text, m.end()).end()
    if not text.startswith("(", i):
        return None
    depth, j = 0, i
    while j < len(text):
        skip = skip_literal(text, j)
        if skip is not None:
            j = skip
            continue
        depth += (text[j] == "(") - (text[j] == ")")
        j += 1
        if depth == 0:
            break
    if depth:
        return None
    after = _SPACE.match(text, j).end()
    if text.startswith(",", after):
        return None                       # several rows already
    row = text[i + 1:j - 1]
    phs = find(row)
    if not phs or len({p.named for p in phs}) > 1 or find(text, 0, m.start()) or find(text, j):
        return None                       # placeholders outside the row: not a plain batch
    return InsertValues(text[:m.start()], row, text[j:], phs)


def _fill(row: str, phs: list[Placeholder], make) -> str:
    parts, pos = [], 0
    for ph in phs:
        parts.append(row[pos:ph.start])
        parts.append(make(ph))
        pos = ph.end
    parts.append(row[pos:])
    return "".join(parts)


def arrow_params(iv: InsertValues, seq: list, relation: str):
    """DuckDB: ``(INSERT … SELECT <row over relation's columns> FROM relation rest, table)``
    where ``table`` is a ``pyarrow.Table`` with one column per placeholder key; ``None`` when
    pyarrow cannot type a column (mixed Python types): the caller runs the rows one by one."""
    import pyarrow as pa

    keys = sorted({p.key for p in iv.placeholders}, key=str)
    for params in seq:
        _check_count(iv.placeholders, params)
    cols = {}
    for k in keys:
        ph = next(p for p in iv.placeholders if p.key == k)
        values = [_value(params, ph) for params in seq]
        try:
            cols[f"p{k}"] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            return None
    table = pa.table(cols)
    select = _fill(iv.row, iv.placeholders, lambda ph: f'{relation}."p{ph.key}"')
    return f"{iv.head}SELECT {select} FROM {relation}{iv.rest}", table


def multi_row_values(iv: InsertValues, seq: list) -> list[tuple[str, list]]:
    """PostgreSQL: ``[(INSERT … VALUES (…), (…), … rest, params)]``, as few statements as the
    protocol's parameter limit allows (psycopg ``%s`` placeholders, ``%`` doubled)."""
    per_row = len(iv.placeholders)
    template = "(" + _fill(iv.row.replace("%", "%%") if "%" in iv.row else iv.row,
                           _shift(iv), lambda ph: "%s") + ")"
    head, rest = iv.head.replace("%", "%%"), iv.rest.replace("%", "%%")
    rows_per = max(1, MAX_PG_PARAMS // per_row)
    out = []
    for start in range(0, len(seq), rows_per):
        chunk = seq[start:start + rows_per]
        values: list[Any] = []
        for params in chunk:
            _check_count(iv.placeholders, params)
            values.extend(_value(params, ph) for ph in iv.placeholders)
        out.append((f"{head}VALUES {', '.join([template] * len(chunk))}{rest}", values))
    return out


def _shift(iv: InsertValues) -> list[Placeholder]:
    """The row's placeholders at their offsets after ``%`` was doubled in the row text."""
    if "%" not in iv.row:
        return iv.placeholders
    out = []
    for ph in iv.placeholders:
        extra = iv.row.count("%", 0, ph.start)
        out.append(Placeholder(ph.start + extra, ph.end + extra, ph.key, ph.named))
    return out
