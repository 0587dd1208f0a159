"""``INSERT … VALUES`` of plain literals, sent to DuckDB as one typed list per column.

DuckDB binds a ``VALUES`` list as one constant expression per cell: a 200-row, 3-column
statement costs it about 5–25 ms to plan (measured on DuckDB 2.0.1), more than the whole
maintenance of a view over it. A session reads such a statement here instead, in one regex
pass over its text, and runs the same rows as ``INSERT INTO t [(cols)] SELECT unnest($1::T1[]),
unnest($2::T2[]), …`` (:func:`rewrite`): one parameter per column, no per-cell planning.

Only cells whose stored value is certain are taken, so the table ends exactly as the original
statement would leave it; any other statement is left as written (``None``):

* integer columns (TINYINT … BIGINT, UTINYINT … UBIGINT): integer literals within the type's range;
* DOUBLE: integer and decimal literals (no exponent) whose digits, at the column's largest
  scale, stay below 2⁵³ — DuckDB casts the column's DECIMAL to DOUBLE by one exact division,
  which rounds as Python's ``float()`` of the text does;
* VARCHAR: string literals (``''`` for a quote; no ``E''``, no adjacent literals);
* BOOLEAN: ``TRUE``/``FALSE``;
* ``NULL`` in any of these; every row the same width, the width of the column list (or of the
  table); nothing after the last row (no ``ON CONFLICT``, no ``RETURNING``, no comment).

Cost: O(length of the statement) in C-level regex matching plus one Python step per cell.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ...identifiers import ascii_lower

_INT_RANGE = {
    "TINYINT": (-(1 << 7), (1 << 7) - 1), "SMALLINT": (-(1 << 15), (1 << 15) - 1),
    "INTEGER": (-(1 << 31), (1 << 31) - 1), "BIGINT": (-(1 << 63), (1 << 63) - 1),
    "UTINYINT": (0, (1 << 8) - 1), "USMALLINT": (0, (1 << 16) - 1),
    "UINTEGER": (0, (1 << 32) - 1), "UBIGINT": (0, (1 << 64) - 1),
}
_TYPES = frozenset(_INT_RANGE) | {"DOUBLE", "VARCHAR", "BOOLEAN"}
_EXACT = 1 << 53

#: one cell and the separator after it: a string, a number, or a keyword
_CELL = re.compile(r"""\s*(?:'([^']*(?:''[^']*)*)'(?!\s*')|(-?)(\d+)(?:\.(\d*))?(?![\w.])|(NULL|TRUE|FALSE)(?!\w))\s*([,)])""",
                   re.IGNORECASE)
_OPEN = re.compile(r"\s*\(")
_NEXT_ROW = re.compile(r"\s*(,)?")
_END = re.compile(r"\s*;?\s*\Z")
_VALUES = re.compile(r"\s*VALUES\b", re.IGNORECASE)
_COLUMN = re.compile(r'\s*(?:([A-Za-z_][A-Za-z0-9_]*)|"([^"]+)")\s*([,)])')


def rewrite(text: str, pos: int, columns: Sequence[str], types: Sequence[str]) \
        -> tuple[str, list[list]] | None:
    """``(statement, parameters)`` equal in effect to the ``INSERT … [(cols)] VALUES …`` in
    ``text`` whose target name ends at ``pos``, for a table of ``columns`` with DuckDB
    ``types``; None when the statement is not of the shape the module describes."""
    at = pos
    m = _OPEN.match(text, at)
    if m is not None:       # a column list
        names = []
        at = m.end()
        while True:
            c = _COLUMN.match(text, at)
            if c is None:
                return None
            names.append(ascii_lower(c.group(1) or c.group(2)))
            at = c.end()
            if c.group(3) == ")":
                break
        lower = [ascii_lower(c) for c in columns]
        if len(set(names)) != len(names) or any(n not in lower for n in names):
            return None
        targets = [types[lower.index(n)] for n in names]
    else:
        targets = list(types)
    head = at
    v = _VALUES.match(text, at)
    if v is None or any(t not in _TYPES for t in targets):
        return None
    at = v.end()
    width = len(targets)
    cols: list[list] = [[] for _ in range(width)]
    cell = _CELL.match
    while True:
        m = _OPEN.match(text, at)
        if m is None:
            return None
        at = m.end()
        for i in range(width):
            c = cell(text, at)
            if c is None or (c.group(6) == ")") != (i == width - 1):
                return None
            at = c.end()
            cols[i].append(c)
        n = _NEXT_ROW.match(text, at)
        at = n.end()
        if n.group(1) is None:
            break
    if _END.match(text, at) is None:
        return None
    params = []
    for i, (typ, cells) in enumerate(zip(targets, cols)):
        got = _column(typ, cells)
        if got is None:
            return None
        params.append(got)
    select = ", ".join(f"unnest(${i + 1}::{t}[])" for i, t in enumerate(targets))
    return f"{text[:head].rstrip()} SELECT {select}", params


def _column(typ: str, cells: list) -> list | None:
    """The Python values of one column's cells for DuckDB type ``typ``; None when a cell's
    stored value is not certain (see the module docstring)."""
    out: list[Any] = []
    add = out.append
    if typ == "VARCHAR":
        for c in cells:
            s = c.group(1)
            if s is not None:
                add(s.replace("''", "'"))
            elif (c.group(5) or "").upper() == "NULL":
                add(None)
            else:
                return None
        return out
    if typ == "BOOLEAN":
        for c in cells:
            k = (c.group(5) or "").upper()
            if not k:
                return None
            add(None if k == "NULL" else k == "TRUE")
        return out
    rng = _INT_RANGE.get(typ)
    if rng is not None:
        lo, hi = rng
        for c in cells:
            digits = c.group(3)
            if digits is None:
                if (c.group(5) or "").upper() != "NULL":
                    return None
                add(None)
                continue
            if c.group(4) is not None:
                return None
            x = int(digits)
            if c.group(2):
                x = -x
            if not lo <= x <= hi:
                return None
            add(x)
        return out
    # DOUBLE: the column's literals unify to one DECIMAL scale; exact while digits < 2**53
    scale = max((len(c.group(4)) for c in cells if c.group(4)), default=0)
    if scale > 18:
        return None
    for c in cells:
        digits = c.group(3)
        if digits is None:
            if (c.group(5) or "").upper() != "NULL":
                return None
            add(None)
            continue
        frac = c.group(4) or ""
        m = int(digits + frac)
        if m * 10 ** (scale - len(frac)) >= _EXACT:
            return None
        add(float(f"{c.group(2)}{digits}.{frac}0") if m else 0.0)   # DuckDB's -0 literal is 0
    return out
