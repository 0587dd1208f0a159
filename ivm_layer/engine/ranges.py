"""Range parameters of a parameterized view (``t.ts > $since``, ``BETWEEN $lo AND $hi``) at
lookup time: the interval the ordered index is bisected to, and what is left to do per row.

A view's range parameters compare hidden output columns (the raw rows a lookup reads carry
them after the view's columns). One compared column, the *indexed* one, is served by an order
(``planner/params.py``: the enumeration index of the GJT node right under the inputs, or each
input value's rows in the answer map): its parameters become one interval, found in O(log n)
by bisection. Parameters on other columns are checked row by row inside that interval (one
order cannot serve two columns). When the compared columns are not all among the view's
columns, rows that differ only in them are merged (SQL's bag over the SELECT list), which
costs a dict of the answer before the first row (a ``DISTINCT`` view's merged row counts
once); otherwise rows stream with O(1) delay.

>>> r = RangeLookup([("lo", ">=", 1), ("hi", "<", 1)], indexed=[0, 1], nout=1, merge=True)
>>> r.interval((3, 7)), r.interval((7, 7))
((3, True, 7, False), None)
>>> sorted(r.finish(iter([(("a", 3), 1), (("a", 4), 2), (("b", 5), 1)]), (3, 7)))
[(('a',), 3), (('b',), 1)]
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from typing import Any

from ..errors import IVMError

OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}


def _incomparable(e: TypeError) -> IVMError:
    return IVMError(f"a range parameter cannot be compared with the column's values: {e}")


class RangeLookup:
    """The range parameters of one view. ``ranges``: ``(name, op, position in a raw row)`` in
    the order of the lookup's range values; ``indexed``: which of them the order serves
    (all on one column, possibly none); ``nout``: the view's engine columns (a raw row's
    prefix that is returned); ``merge``: the compared columns are not all among them."""

    __slots__ = ("_plain", "distinct", "indexed", "merge", "names", "nout", "residual")

    def __init__(self, ranges: list[tuple[str, str, int]], indexed: list[int], nout: int, merge: bool,
                 distinct: bool = False):
        self.names = [name for name, _, _ in ranges]
        self.indexed = [(k, ranges[k][1]) for k in indexed]
        self.residual = [(k, OPS[op], pos) for k, (_, op, pos) in enumerate(ranges) if k not in set(indexed)]
        self.nout = nout
        self.merge = merge
        self.distinct = distinct  # SELECT DISTINCT: a merged row counts once
        self._plain = not self.residual and not merge

    def interval(self, values: tuple) -> tuple[Any, bool, Any, bool] | None:
        """``(lo, lo_inclusive, hi, hi_inclusive)`` of the indexed column for the range values
        (None = unbounded), or None when it is empty. O(range parameters)."""
        lo = hi = None
        li = hii = False
        try:
            for k, op in self.indexed:
                v = values[k]
                if op[0] == ">":
                    incl = op == ">="
                    if lo is None or v > lo or (v == lo and not incl):
                        lo, li = v, incl
                else:
                    incl = op == "<="
                    if hi is None or v < hi or (v == hi and not incl):
                        hi, hii = v, incl
            if lo is not None and hi is not None and (lo > hi or (lo == hi and not (li and hii))):
                return None
        except TypeError as e:
            raise _incomparable(e) from None
        return lo, li, hi, hii

    def finish(self, raw: Iterator[tuple[tuple, int]], values: tuple) -> Iterator[tuple[tuple, int]]:
        """The lookup's rows over the view's columns from the raw rows inside the interval:
        the other range parameters checked, the compared columns dropped, rows merged when
        they can repeat."""
        if self._plain:
            return self._cut(raw)
        checks = [(f, pos, values[k]) for k, f, pos in self.residual]
        if not self.merge:
            return self._checked(raw, checks)
        width = self.nout
        out: dict[tuple, int] = {}
        try:
            for row, m in raw:
                if all(f(row[pos], v) for f, pos, v in checks):
                    r = row[:width]
                    out[r] = out.get(r, 0) + m
        except TypeError as e:
            raise _incomparable(e) from None
        if self.distinct:
            return iter([(r, 1) for r in out])
        return iter(list(out.items()))

    def _cut(self, raw: Iterator[tuple[tuple, int]]) -> Iterator[tuple[tuple, int]]:
        width = self.nout
        for row, m in raw:
            yield row[:width], m

    def _checked(self, raw: Iterator[tuple[tuple, int]], checks: list) -> Iterator[tuple[tuple, int]]:
        width = self.nout
        try:
            for row, m in raw:
                if all(f(row[pos], v) for f, pos, v in checks):
                    yield row[:width], m
        except TypeError as e:
            raise _incomparable(e) from None
