"""Reads of an incremental view that go straight to the engine, without SQL execution.

Recognised by one regular expression (a session caches the answer per statement text; ``ivm
serve`` reads it once per prepared statement), never by a parse:

- ``SELECT count(*) FROM v`` — the engine's O(1) count;
- ``SELECT * | cols FROM v [LIMIT n]`` — the engine's enumeration, stopped after n rows;
- on a parameterized view, ``SELECT * | cols | count(*) FROM v WHERE input = $1 [AND …]
  [LIMIT n]`` with exactly the view's inputs — ``view.lookup(**inputs)``: an O(1) probe and
  constant-delay enumeration for CQAP0 views.

Values are ``$n``, ``?`` (in order) or literals. Everything else (other filters, joins,
ORDER BY, expressions) goes to DuckDB, which reads the view through the session's lazy Arrow
reader. Rows are yielded as they are enumerated. Cost: the lookup and the rows, no SQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from itertools import islice

from ..identifiers import IDENT
from ..sql.sqltext import unquote

_IDENT = IDENT
_VALUE = r"(?:\$\d+|\?|-?\d+(?:\.\d+)?|'(?:[^']|'')*')"
_SHAPE = re.compile(
    rf"\s*SELECT\s+(?P<sel>\*|count\s*\(\s*\*\s*\)(?:\s+(?:AS\s+)?{_IDENT})?|{_IDENT}(?:\s*,\s*{_IDENT})*)"
    rf"\s+FROM\s+(?:(?:main|public)\s*\.\s*)?(?P<view>{_IDENT})(?:\s+(?:AS\s+)?(?P<alias>(?!WHERE\b|LIMIT\b){_IDENT}))?"
    rf"(?:\s+WHERE\s+(?P<where>(?:{_IDENT}\s*\.\s*)?{_IDENT}\s*=\s*{_VALUE}"
    rf"(?:\s+AND\s+(?:{_IDENT}\s*\.\s*)?{_IDENT}\s*=\s*{_VALUE})*))?"
    rf"(?:\s+LIMIT\s+(?P<limit>\d+|\$\d+|\?))?\s*;?\s*", re.IGNORECASE | re.DOTALL)
_COND = re.compile(rf"(?:({_IDENT})\s*\.\s*)?({_IDENT})\s*=\s*({_VALUE})", re.IGNORECASE | re.DOTALL)
_COUNT = re.compile(rf"count\s*\(\s*\*\s*\)(?:\s+(?:AS\s+)?({_IDENT}))?", re.IGNORECASE)


@dataclass(frozen=True)
class Shape:
    """A statement the engine answers: ``select`` is ``None`` for ``*``, else column names;
    ``count`` for ``count(*)`` (its output name); ``conds`` are ``(column, value)`` with
    value ``("$", n)`` or ``("lit", python value)``; ``limit`` likewise or ``None``."""

    view: str
    select: tuple[str, ...] | None
    count: str | None
    conds: tuple[tuple[str, tuple], ...]
    limit: tuple | None


def _value(text: str, marks: list) -> tuple:
    if text == "?":
        marks.append(None)
        return ("$", len(marks))
    if text.startswith("$"):
        return ("$", int(text[1:]))
    if text.startswith("'"):
        return ("lit", text[1:-1].replace("''", "'"))
    if "." in text:
        return ("lit", Decimal(text))
    return ("lit", int(text))


def shape(text: str, dialect: str = "duckdb") -> Shape | None:
    """The engine-answerable shape of ``text``, or ``None``; names are keys by ``dialect``'s rules."""
    m = _SHAPE.fullmatch(text)
    if not m:
        return None

    def ident(name: str) -> str:
        return unquote(name, dialect)

    view = ident(m.group("view"))
    alias = ident(m.group("alias")) if m.group("alias") else view
    sel = m.group("sel")
    count = None
    select = None
    cm = _COUNT.fullmatch(sel)
    if cm:
        count = ident(cm.group(1)) if cm.group(1) else "count"
    elif sel != "*":
        select = tuple(ident(s.strip()) for s in sel.split(","))
    conds = []
    marks: list = []
    if m.group("where"):
        for q, col, val in _COND.findall(m.group("where")):
            if q and ident(q) not in (alias, view):
                return None
            conds.append((ident(col), _value(val, marks)))
    limit = _value(m.group("limit"), marks) if m.group("limit") else None
    return Shape(view, select, count, tuple(conds), limit)


def bind(value: tuple, params) -> object:
    kind, v = value
    if kind == "$":
        if params is None or v > len(params):
            raise IndexError(f"there is no parameter ${v}")
        return params[v - 1]
    return v


def rows(view, sh: Shape, params, inputs: dict | None, project: list[int] | None):
    """The answer's rows (``inputs``: the lookup's values, already of the inputs' types)."""
    if sh.count is not None:
        yield (len(view) if inputs is None else sum(k for _, k in view.lookup(**inputs)),)
        return
    pairs = view.lookup(**inputs) if inputs is not None else view.rows()
    limit = None if sh.limit is None else int(bind(sh.limit, params))
    out = _expand(pairs, project)
    yield from (out if limit is None else islice(out, limit))


def _expand(pairs, project):
    for row, k in pairs:
        if project is not None:
            row = tuple(row[i] for i in project)
        if k == 1:
            yield row
        else:
            for _ in range(k):
                yield row
