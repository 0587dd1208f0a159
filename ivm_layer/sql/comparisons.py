"""Reading comparisons for the IEDyn indexes: ``column ± constant op column ± constant``, BETWEEN
and the one-column filters (``IN``, ``LIKE``, ``IS NULL``), as a mixin of the translator.

A conjunct of another shape raises :class:`UnsupportedSQLError`; the translator then reads
it as a condition of any shape (:mod:`.scalar`).
"""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any

from sqlglot import exp

from ..query import FLIP
from .literals import NOT_CONST, constant
from .literals import strip_parens as _strip_parens
from .literals import unsupported as _unsupported
from .scalar import NONDETERMINISTIC

_OPS = {exp.EQ: "=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">=", exp.NEQ: "<>"}


class Side:
    """One side of a comparison: ``column + offset`` or a constant (``column is None``)."""

    __slots__ = ("column", "offset")

    def __init__(self, column: str | None, offset: Any) -> None:
        self.column = column
        self.offset = offset


class ComparisonReader:
    """Mixin: needs ``self._column(col) -> key``, ``self.uf`` and ``self.comparisons``."""

    def _side(self, node: exp.Expression) -> Side:
        node = _strip_parens(node)
        if isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star):
                raise _unsupported("star in a comparison", node)
            return Side(self._column(node), 0)
        const = constant(node)
        if const is not NOT_CONST:
            return Side(None, const)
        if isinstance(node, (exp.Add, exp.Sub)):
            left, right = self._side(node.this), self._side(node.expression)
            sign = 1 if isinstance(node, exp.Add) else -1
            for side in (left, right):
                if side.column is None and not _is_offset(side.offset) and (left.column or right.column):
                    raise _unsupported("a column plus a constant that is not a number or an interval", node)
            if right.column is None and left.column is not None:
                return Side(left.column, _add(left.offset, right.offset, sign, node))
            if left.column is None and right.column is not None and sign == 1:
                return Side(right.column, _add(right.offset, left.offset, 1, node))
            if left.column is None and right.column is None:
                return Side(None, _add(left.offset, right.offset, sign, node))
        if isinstance(node, exp.Cast):
            raise _unsupported("cast in a comparison (compare the column itself)", node)
        if isinstance(node, exp.Func):
            name = (node.sql_name() if not isinstance(node, exp.Anonymous) else node.name).lower()
            if name in NONDETERMINISTIC or isinstance(node, (exp.CurrentTimestamp, exp.CurrentDate, exp.CurrentTime)):
                raise _unsupported(f"non-deterministic function {name}() (its value changes without any update)", node)
            raise _unsupported(f"function {name}() in a comparison (only column ± constant and constants)", node)
        raise _unsupported("expression in a comparison (only column ± constant and constants)", node)

    def _add_comparison(self, node: exp.Expression) -> None:
        node = _strip_parens(node)
        if isinstance(node, exp.Not):
            inner = _strip_parens(node.this)
            if isinstance(inner, (exp.In, exp.Like, exp.ILike, exp.Is)):
                return self._add_unary(inner, negate=True)
            raise _unsupported("NOT of this condition (only NOT IN, NOT LIKE, IS NOT NULL)", node)
        if isinstance(node, (exp.In, exp.Like, exp.ILike, exp.Is)):
            return self._add_unary(node, negate=bool(node.args.get("negate")))
        if isinstance(node, exp.Between):
            self._add_binary(node.this, ">=", node.args["low"], node)
            self._add_binary(node.this, "<=", node.args["high"], node)
            return
        op = _OPS.get(type(node))
        if op is None:
            if isinstance(node, exp.Or):
                raise _unsupported("OR in WHERE/ON (only conjunctions of comparisons)", node)
            raise _unsupported(f"{type(node).__name__} condition (only comparisons, BETWEEN, IN, LIKE, IS NULL)", node)
        self._add_binary(node.this, op, node.expression, node)

    def _add_binary(self, lhs: exp.Expression, op: str, rhs: exp.Expression, node: exp.Expression) -> None:
        left, right = self._side(lhs), self._side(rhs)
        if left.column is None and right.column is None:
            raise _unsupported("comparison between two constants", node)
        if left.column is None:  # constant op column  ->  column op' constant
            left, right, op = right, left, FLIP[op]
        if right.column is not None and op == "=" and not _nonzero(left.offset) and not _nonzero(right.offset):
            if self.uf.find(left.column) == self.uf.find(right.column):  # x = x: true unless x is NULL
                self.comparisons.append((left, "is not null", Side(None, None), node))
                return
            self.uf.union(left.column, right.column)
            return
        if op == "<>" and right.column is not None and left.column.split(".")[0] != right.column.split(".")[0]:
            raise _unsupported("<> between columns of different tables (it cannot be indexed)", node)
        if right.column is None and right.offset is None:
            self.comparisons.append((left, "never", right, node))  # comparison with NULL: never true
            return
        self.comparisons.append((left, op, right, node))

    def _add_unary(self, node: exp.Expression, negate: bool) -> None:
        target = _strip_parens(node.this)
        if not isinstance(target, exp.Column):
            raise _unsupported(f"{type(node).__name__.upper()} on an expression (only on a column)", node)
        col = Side(self._column(target), 0)
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise _unsupported("IS with something other than NULL", node)
            self.comparisons.append((col, "is not null" if negate else "is null", Side(None, None), node))
            return
        if isinstance(node, exp.In):
            if node.args.get("query") is not None or node.args.get("unnest") is not None:
                raise _unsupported("IN (subquery)", node)
            values = []
            for item in node.expressions:
                v = constant(item)
                if v is NOT_CONST:
                    raise _unsupported("IN list item that is not a constant", item)
                values.append(v)
            self.comparisons.append((col, "not in" if negate else "in", Side(None, tuple(values)), node))
            return
        pattern = constant(node.expression)
        if not isinstance(pattern, str):
            raise _unsupported("LIKE pattern that is not a string constant", node)
        if node.args.get("escape") is not None:
            raise _unsupported("LIKE … ESCAPE", node)
        op = ("not " if negate else "") + ("ilike" if isinstance(node, exp.ILike) else "like")
        self.comparisons.append((col, op, Side(None, pattern), node))


def _is_offset(value: Any) -> bool:
    return isinstance(value, (int, float, Decimal, datetime.timedelta)) and not isinstance(value, bool)


def _nonzero(value: Any) -> bool:
    return bool(value) if not isinstance(value, str) else True


def _add(a: Any, b: Any, sign: int, node: exp.Expression) -> Any:
    if isinstance(a, str) or isinstance(b, str) or a is None or b is None:
        raise _unsupported("arithmetic on a string or NULL constant", node)
    if _is_zero(a):  # a column's implicit offset: keep the other constant's type (e.g. an interval)
        return b if sign > 0 else -b
    try:
        return a + b if sign > 0 else a - b
    except TypeError:
        raise _unsupported("arithmetic between constants of different types", node) from None


def _is_zero(value: Any) -> bool:
    return type(value) is int and value == 0


def offset_sub(a: Any, b: Any) -> Any:
    """``a - b`` for offsets, where ``a`` may be a constant of any type and ``b`` a numeric offset."""
    if not b:
        return a
    if _is_zero(a):
        return -b
    return a - b
