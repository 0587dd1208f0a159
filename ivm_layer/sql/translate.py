"""Translate the select–from–where subset of SQL into a :class:`~ivm_layer.query.GCQ`.

Supported: ``SELECT`` of columns, ``t.*`` or ``*`` (with column aliases); ``FROM`` lists and
``[INNER|CROSS] JOIN … ON / USING``; table aliases including self-joins; ``WHERE``/``ON``
conjunctions of ``=, <, <=, >, >=`` and ``BETWEEN`` between columns, ``column ± constant``
(numbers, or fixed-length ``INTERVAL``s for timestamps) and constants; leaf filters
``<>``, ``[NOT] IN (…)``, ``[NOT] [I]LIKE``, ``IS [NOT] NULL`` on one table's columns.
Equalities between columns become shared variables (union–find); every other comparison
becomes a :class:`~ivm_layer.query.Predicate`. ``GROUP BY``/aggregates/``HAVING`` on top of
the join are read by :mod:`.aggregates` into ``GCQ.aggregate`` (the GCQ's output variables
are then the group-by variables). Anything else raises
:class:`~ivm_layer.errors.UnsupportedSQLError` naming the construct and its position.
"""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from ..errors import SQLError, UnsupportedSQLError
from ..query import FLIP, GCQ, UNARY_OPS, Atom, Predicate, normalize_schema
from .aggregates import AggregateTranslator, is_aggregate_query

_OPS = {exp.EQ: "=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">=", exp.NEQ: "<>"}
_NONDETERMINISTIC = {"now", "current_timestamp", "current_date", "current_time", "random", "rand",
                     "uuid", "gen_random_uuid", "clock_timestamp", "statement_timestamp",
                     "transaction_timestamp", "localtimestamp", "localtime", "today", "get_current_time",
                     "timeofday", "setseed", "nextval", "currval"}
_ALLOWED_SELECT_ARGS = {"expressions", "from_", "from", "joins", "where", "kind", "hint", "distinct"}
_ALLOWED_AGGREGATE_ARGS = _ALLOWED_SELECT_ARGS | {"group", "having"}


def _position(node: exp.Expression | None) -> str:
    """'line L, column C' of the first token under ``node``, when sqlglot recorded it."""
    if node is None:
        return ""
    for sub in node.walk():
        meta = getattr(sub, "meta", None) or {}
        if "line" in meta and "col" in meta:
            return f" at line {meta['line']}, column {meta['col']}"
    return ""


def _unsupported(what: str, node: exp.Expression | None) -> UnsupportedSQLError:
    text = node.sql() if node is not None else ""
    snippet = f" ({text[:80]})" if text else ""
    return UnsupportedSQLError(f"unsupported in incremental views: {what}{snippet}{_position(node)}")


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        self.parent.setdefault(x, x)
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            # Keep the lexicographically smaller name as representative: stable variable names.
            if rb < ra:
                ra, rb = rb, ra
            self.parent[rb] = ra


class _Side:
    """One side of a comparison: ``column + offset`` or a constant (``column is None``)."""

    __slots__ = ("column", "offset")

    def __init__(self, column: str | None, offset: Any) -> None:
        self.column = column
        self.offset = offset


def parse_select(sql: str, dialect: str = "duckdb") -> exp.Select:
    """Parse ``sql`` and return its ``SELECT`` expression, or raise :class:`SQLError`."""
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except ParseError as e:
        raise SQLError(f"cannot parse SQL: {e}") from None
    if len(statements) != 1:
        raise SQLError(f"expected exactly one SELECT statement, got {len(statements)}")
    stmt = statements[0]
    if not isinstance(stmt, exp.Select):
        raise _unsupported(f"{type(stmt).__name__.upper()} statement (expected SELECT)", stmt)
    return stmt


def translate_select(sql: str, schema: dict, dialect: str = "duckdb") -> GCQ:
    """Translate a select–from–where query into a GCQ over ``schema``."""
    tables = normalize_schema(schema)
    select = parse_select(sql, dialect)
    return _Translator(select, tables).run()


class _Translator:
    def __init__(self, select: exp.Select, tables: dict[str, list[str]]) -> None:
        self.select = select
        self.tables = tables
        self.aliases: dict[str, str] = {}  # alias -> table
        self.alias_order: list[str] = []
        self.uf = _UnionFind()
        self.referenced: set[str] = set()  # "alias.col"
        self.comparisons: list[tuple[_Side, str, _Side, exp.Expression]] = []

    # -- FROM ---------------------------------------------------------------------------
    def run(self) -> GCQ:
        sel = self.select
        aggregating = is_aggregate_query(sel)
        allowed = _ALLOWED_AGGREGATE_ARGS if aggregating else _ALLOWED_SELECT_ARGS
        for key, value in sel.args.items():
            if value in (None, [], False):
                continue
            if key not in allowed:
                node = value if isinstance(value, exp.Expression) else None
                raise _unsupported(f"{key.upper()} clause (not yet supported by the engine)", node)
        if sel.args.get("kind"):
            raise _unsupported(f"SELECT {sel.args['kind']}", sel)
        distinct = sel.args.get("distinct")
        if distinct is not None and distinct.args.get("on") is not None:
            raise _unsupported("DISTINCT ON", distinct)
        from_ = sel.args.get("from_") or sel.args.get("from")
        if from_ is None:
            raise SQLError("an incremental view needs a FROM clause")
        self._add_table(from_.this)
        conditions: list[exp.Expression] = []
        for join in sel.args.get("joins") or []:
            side = (join.side or "").upper()
            kind = (join.kind or "").upper()
            if side:
                raise _unsupported(f"{side} OUTER JOIN", join)
            if kind not in ("", "INNER", "CROSS"):
                raise _unsupported(f"{kind} JOIN", join)
            self._add_table(join.this)
            for ident in join.args.get("using") or []:
                self._add_using(ident.name.lower(), join)
            if join.args.get("on") is not None:
                conditions.append(join.args["on"])
        where = sel.args.get("where")
        if where is not None:
            conditions.append(where.this)
        for cond in conditions:
            agg = next((a for a in cond.find_all(exp.AggFunc) if a.find_ancestor(exp.Select) is sel), None)
            if agg is not None:
                raise _unsupported("aggregate in WHERE/ON (filter aggregates with HAVING)", agg)
            for conj in _conjuncts(cond):
                self._add_comparison(conj)
        if aggregating:
            find = self.uf.find
            group_vars, spec = AggregateTranslator(sel, lambda c: find(self._column(c)), _unsupported).run()
            gcq = self._build([(v, v) for v in group_vars])
            gcq.aggregate = spec
        else:
            gcq = self._build(self._outputs())
        gcq.distinct = distinct is not None
        return gcq

    def _add_table(self, node: exp.Expression) -> None:
        if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
            raise _unsupported("FROM item that is not a plain table (subqueries, functions)", node)
        if node.args.get("db") or node.args.get("catalog"):
            name = node.sql().lower()
        else:
            name = node.name.lower()
        if name not in self.tables:
            raise SQLError(f"unknown table {node.name!r}{_position(node)}; known: {', '.join(sorted(self.tables))}")
        alias = (node.alias or node.name).lower()
        if alias in self.aliases:
            raise SQLError(f"duplicate table alias {alias!r}{_position(node)}: give each occurrence its own alias")
        self.aliases[alias] = name
        self.alias_order.append(alias)

    def _add_using(self, name: str, join: exp.Join) -> None:
        """``JOIN t USING (c)``: t.c equals the c of the single earlier FROM item that has it."""
        right = self.alias_order[-1]
        earlier = [a for a in self.alias_order[:-1] if name in self.tables[self.aliases[a]]]
        if name not in self.tables[self.aliases[right]] or not earlier:
            raise SQLError(f"USING column {name!r} must exist on both sides of the join{_position(join)}")
        if len(earlier) > 1:
            raise SQLError(f"USING column {name!r} is ambiguous on the left side ({', '.join(earlier)}){_position(join)}")
        for a in (earlier[0], right):
            self.referenced.add(f"{a}.{name}")
        self.uf.union(f"{earlier[0]}.{name}", f"{right}.{name}")

    # -- columns ------------------------------------------------------------------------
    def _column(self, col: exp.Column) -> str:
        name = col.name.lower()
        qual = col.table.lower() if col.table else None
        if col.args.get("db") or col.args.get("catalog"):
            raise _unsupported("schema-qualified column", col)
        if qual is not None:
            if qual not in self.aliases:
                raise SQLError(f"unknown table or alias {col.table!r}{_position(col)}")
            if name not in self.tables[self.aliases[qual]]:
                raise SQLError(f"table {self.aliases[qual]!r} (alias {qual!r}) has no column {col.name!r}{_position(col)}")
            key = f"{qual}.{name}"
        else:
            owners = [a for a in self.alias_order if name in self.tables[self.aliases[a]]]
            if not owners:
                raise SQLError(f"unknown column {col.name!r}{_position(col)}")
            if len(owners) > 1:
                raise SQLError(f"column {col.name!r} is ambiguous{_position(col)}: qualify it with one of {', '.join(owners)}")
            key = f"{owners[0]}.{name}"
        self.referenced.add(key)
        self.uf.find(key)
        return key

    # -- WHERE / ON ---------------------------------------------------------------------
    def _side(self, node: exp.Expression) -> _Side:
        node = _strip_parens(node)
        if isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star):
                raise _unsupported("star in a comparison", node)
            return _Side(self._column(node), 0)
        const = _constant(node)
        if const is not _NOT_CONST:
            return _Side(None, const)
        if isinstance(node, (exp.Add, exp.Sub)):
            left, right = self._side(node.this), self._side(node.expression)
            sign = 1 if isinstance(node, exp.Add) else -1
            if right.column is None and left.column is not None:
                return _Side(left.column, _add(left.offset, right.offset, sign, node))
            if left.column is None and right.column is not None and sign == 1:
                return _Side(right.column, _add(right.offset, left.offset, 1, node))
            if left.column is None and right.column is None:
                return _Side(None, _add(left.offset, right.offset, sign, node))
        if isinstance(node, exp.Cast):
            raise _unsupported("cast in a comparison (compare the column itself)", node)
        if isinstance(node, exp.Func):
            name = (node.sql_name() if not isinstance(node, exp.Anonymous) else node.name).lower()
            if name in _NONDETERMINISTIC or isinstance(node, (exp.CurrentTimestamp, exp.CurrentDate, exp.CurrentTime)):
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
        col = _Side(self._column(target), 0)
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise _unsupported("IS with something other than NULL", node)
            self.comparisons.append((col, "is not null" if negate else "is null", _Side(None, None), node))
            return
        if isinstance(node, exp.In):
            if node.args.get("query") is not None or node.args.get("unnest") is not None:
                raise _unsupported("IN (subquery)", node)
            values = []
            for item in node.expressions:
                v = _constant(item)
                if v is _NOT_CONST:
                    raise _unsupported("IN list item that is not a constant", item)
                values.append(v)
            self.comparisons.append((col, "not in" if negate else "in", _Side(None, tuple(values)), node))
            return
        pattern = _constant(node.expression)
        if not isinstance(pattern, str):
            raise _unsupported("LIKE pattern that is not a string constant", node)
        if node.args.get("escape") is not None:
            raise _unsupported("LIKE … ESCAPE", node)
        op = ("not " if negate else "") + ("ilike" if isinstance(node, exp.ILike) else "like")
        self.comparisons.append((col, op, _Side(None, pattern), node))

    # -- SELECT -------------------------------------------------------------------------
    def _outputs(self) -> list[tuple[str, str]]:
        outs: list[tuple[str, str]] = []
        for item in self.select.expressions:
            name = None
            node = item
            if isinstance(item, exp.Alias):
                name = item.alias
                node = item.this
            if isinstance(node, exp.Star):
                for alias in self.alias_order:
                    for c in self.tables[self.aliases[alias]]:
                        outs.append((c, self._column(exp.column(c, alias))))
                continue
            if isinstance(node, exp.Column) and isinstance(node.this, exp.Star):
                alias = node.table.lower()
                if alias not in self.aliases:
                    raise SQLError(f"unknown table or alias {node.table!r}{_position(node)}")
                for c in self.tables[self.aliases[alias]]:
                    outs.append((c, self._column(exp.column(c, alias))))
                continue
            if isinstance(node, exp.Column):
                key = self._column(node)
                outs.append((name or node.name.lower(), key))
                continue
            if isinstance(node, exp.Window) or node.find(exp.Window) is not None:
                raise _unsupported("window function", node)
            if isinstance(node, exp.AggFunc) or node.find(exp.AggFunc) is not None:
                raise _unsupported("aggregate function (GROUP BY views arrive with the aggregates issue)", node)
            raise _unsupported("SELECT item that is not a column (computed columns are not supported yet)", node)
        if not outs:
            raise SQLError("empty SELECT list")
        return outs

    # -- build the GCQ ------------------------------------------------------------------
    def _build(self, outputs: list[tuple[str, str]]) -> GCQ:
        find = self.uf.find
        atoms = []
        for alias in self.alias_order:
            table = self.aliases[alias]
            vars_ = tuple(
                find(f"{alias}.{c}") if f"{alias}.{c}" in self.referenced else None
                for c in self.tables[table]
            )
            atoms.append(Atom(table, alias, vars_))
        preds: list[Predicate] = []
        for left, op, right, _node in self.comparisons:
            if op in UNARY_OPS:
                preds.append(Predicate(find(left.column), op, None, right.offset))
            elif right.column is None:
                preds.append(Predicate(find(left.column), op, None, _sub(right.offset, left.offset)))
            else:
                offset = _sub(right.offset, left.offset)
                preds.append(Predicate(find(left.column), op, find(right.column), offset))
        gcq = GCQ(
            atoms=atoms,
            predicates=preds,
            output=[find(key) for _, key in outputs],
            columns=[name for name, _ in outputs],
            schema={t: list(cols) for t, cols in self.tables.items()},
        )
        gcq.validate()
        return gcq


_NOT_CONST = object()


def _strip_parens(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _conjuncts(node: exp.Expression):
    node = _strip_parens(node)
    if isinstance(node, exp.And):
        yield from _conjuncts(node.this)
        yield from _conjuncts(node.expression)
    else:
        yield node


_INTERVAL_UNITS = {
    "microsecond": "microseconds", "microseconds": "microseconds", "us": "microseconds",
    "millisecond": "milliseconds", "milliseconds": "milliseconds", "ms": "milliseconds",
    "second": "seconds", "seconds": "seconds", "sec": "seconds", "secs": "seconds", "s": "seconds",
    "minute": "minutes", "minutes": "minutes", "min": "minutes", "mins": "minutes", "m": "minutes",
    "hour": "hours", "hours": "hours", "h": "hours", "hr": "hours", "hrs": "hours",
    "day": "days", "days": "days", "d": "days",
    "week": "weeks", "weeks": "weeks", "w": "weeks",
}


def _interval(node: exp.Interval) -> datetime.timedelta:
    """``INTERVAL '1 hour'`` / ``INTERVAL 2 MINUTE`` as a timedelta (fixed-length units only)."""
    text = node.this.name if node.this is not None else ""
    unit = node.args.get("unit")
    parts = text.split()
    if unit is not None:
        unit_name = unit.name.lower()
        amount_text = text
    elif len(parts) == 2:
        amount_text, unit_name = parts[0], parts[1].lower()
    else:
        raise _unsupported("interval literal (use e.g. INTERVAL '1 hour')", node)
    key = _INTERVAL_UNITS.get(unit_name)
    if key is None:
        raise _unsupported(f"interval unit {unit_name!r} (months and years have no fixed length)", node)
    try:
        amount = float(amount_text)
    except ValueError:
        raise _unsupported("interval literal (use e.g. INTERVAL '1 hour')", node) from None
    return datetime.timedelta(**{key: amount})


def _constant(node: exp.Expression) -> Any:
    node = _strip_parens(node)
    if isinstance(node, exp.Interval):
        return _interval(node)
    if isinstance(node, exp.Neg):
        inner = _constant(node.this)
        if inner is _NOT_CONST or isinstance(inner, str):
            return _NOT_CONST
        return -inner
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        try:
            return int(text)
        except ValueError:
            d = Decimal(text)
            return int(d) if d == d.to_integral_value() else float(d)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.is_string:
        return _typed_literal(node)  # DATE '2026-01-01', TIMESTAMP '…'
    return _NOT_CONST


def _typed_literal(node: exp.Cast) -> Any:
    """``DATE '…'`` / ``TIMESTAMP '…'`` as a date/datetime; other casts are not constants."""
    text = node.this.this.strip()
    kind = node.to.this
    try:
        if kind == exp.DataType.Type.DATE:
            return datetime.date.fromisoformat(text)
        if kind in (exp.DataType.Type.TIMESTAMP, exp.DataType.Type.DATETIME):
            return datetime.datetime.fromisoformat(text)
    except ValueError:
        raise SQLError(f"invalid {kind.value} literal {text!r}{_position(node)}") from None
    return _NOT_CONST


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


def _sub(a: Any, b: Any) -> Any:
    """``a - b`` for offsets, where ``a`` may be a constant of any type and ``b`` a numeric offset."""
    if not b:
        return a
    if _is_zero(a):
        return -b
    return a - b
