"""The range of DuckDB's bounded numeric column types, checked on values the engine computes.

The engine sums and multiplies with Python's unbounded ints and exact decimals, so a view's
``SUM`` over a ``HUGEINT`` or ``DECIMAL(38, s)`` column, or ``a * b`` over ``BIGINT``\\ s, can
hold a value its DuckDB column type cannot (DuckDB's own ``SELECT`` raises "Overflow in …"
there). Served, such a value would break every later read of the view; the session refuses the
write that produces it instead (the statement is rolled back, the view stays as it was).

Only views that compute values (aggregates, expressions) are checked, on their change: O(rows
of the change) per statement; views that copy input columns hold values DuckDB already took.

>>> [b[1:] for b in column_bounds(["INTEGER", "VARCHAR", "DECIMAL(4,2)", "UTINYINT"])]
[(-2147483648, 2147483647, 'INTEGER'), (Decimal('-99.99'), Decimal('99.99'), 'DECIMAL(4,2)'), (0, 255, 'UTINYINT')]
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from decimal import Decimal

from ...errors import UpdateError

_INTS = {
    "TINYINT": 8, "INT1": 8, "SMALLINT": 16, "INT2": 16, "INTEGER": 32, "INT4": 32, "INT": 32,
    "BIGINT": 64, "INT8": 64, "HUGEINT": 128, "INT128": 128,
}
_UINTS = {"UTINYINT": 8, "USMALLINT": 16, "UINTEGER": 32, "UBIGINT": 64, "UHUGEINT": 128, "UINT128": 128}
_DECIMAL = re.compile(r"(?:DECIMAL|NUMERIC)\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)$", re.IGNORECASE)


def integer_bits(sql_type: str) -> int | None:
    """The width in bits of a DuckDB integer type (signed or not), None for other types.

    >>> integer_bits("hugeint"), integer_bits("UTINYINT"), integer_bits("DOUBLE")
    (128, 8, None)
    """
    name = sql_type.strip().upper()
    return _INTS.get(name) or _UINTS.get(name)


def column_bounds(types: Iterable[str]) -> list[tuple[int, object, object, str]]:
    """``(position, lowest, highest, type)`` of every column of a bounded numeric type."""
    out = []
    for i, t in enumerate(types):
        name = t.strip().upper()
        if name in _INTS:
            half = 1 << (_INTS[name] - 1)
            out.append((i, -half, half - 1, t))
        elif name in _UINTS:
            out.append((i, 0, (1 << _UINTS[name]) - 1, t))
        else:
            m = _DECIMAL.match(name)
            if m:
                p, s = int(m.group(1)), int(m.group(2))
                top = (Decimal(10) ** p - 1).scaleb(-s)
                out.append((i, -top, top, t))
    return out


def check(view: str, columns: list[str], bounds: list, change: Iterable[tuple[tuple, int]]) -> None:
    """Raise :class:`UpdateError` when a row the view gains holds a value outside its column's
    type (``bounds`` from :func:`column_bounds`)."""
    for row, k in change:
        if k <= 0:
            continue
        for i, lo, hi, typ in bounds:
            v = row[i]
            if v is None or isinstance(v, float):
                continue
            if v < lo or v > hi:
                raise UpdateError(
                    f"the value {v} of column {columns[i]!r} of incremental view {view!r} is out of "
                    f"range for its type {typ} (as DuckDB's own SELECT would say: overflow); the "
                    f"statement was not applied. Cast the column to a wider type in the view's "
                    f"definition (e.g. ::HUGEINT or ::DOUBLE) if such values are expected",
                    sqlstate="22003")
