"""Placeholders of parameterized views (paper 004): ``col = $name``, ``col = $1``, ``col = ?``.

:func:`extract_params` rewrites a view's SQL so that the translator sees an ordinary query:
each ``column = placeholder`` conjunct of ``WHERE`` (or of a join's ``ON``) is removed, the
first column equated with a parameter is added to the SELECT list as a hidden output
``__param_<name>``, and every further column equated with the same parameter is equated
with that first one (an input equated with several columns is one parameter). Named
placeholders (``$acc``, ``:acc``) are addressed by name; positional ones (``$1``, ``?``) as
``p1``, ``p2``, … in order. A placeholder anywhere else is refused.
"""

from __future__ import annotations

from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ..errors import SQLError, UnsupportedSQLError
from ..identifiers import ascii_lower, normalize_tree

HIDDEN = "__param_"
RANGE = "__range_"
_RANGE_OPS = {exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<="}
_FLIP = {">": "<", ">=": "<=", "<": ">", "<=": ">="}


def _placeholder_name(node: exp.Expression, counter: list[int]) -> str | None:
    """The parameter's name, or None when ``node`` is not a placeholder."""
    if isinstance(node, exp.Placeholder):
        this = node.this
        if this is None or str(this) == "":
            counter[0] += 1
            return f"p{counter[0]}"
        text = str(this.name if isinstance(this, exp.Expression) else this)
        return f"p{text}" if text.isdigit() else ascii_lower(text)
    if isinstance(node, exp.Parameter):
        this = node.this
        text = this.name if isinstance(this, exp.Expression) else str(this)
        return f"p{text}" if text.isdigit() else ascii_lower(text)
    return None


def _conjuncts(node: exp.Expression) -> list[exp.Expression]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    return [node]


def _and(parts: list[exp.Expression]) -> exp.Expression | None:
    if not parts:
        return None
    out = parts[0]
    for p in parts[1:]:
        out = exp.and_(out, p)
    return out


def extract_params(sql: str, dialect: str = "duckdb") -> tuple[str, list[str], list[tuple[str, str, str]]]:
    """``(rewritten SQL, equality parameter names, range parameters)``, unchanged without
    placeholders. A range parameter ``(name, op, hidden column)`` stands for
    ``column op $name`` (``BETWEEN $lo AND $hi`` gives two); its column becomes the hidden
    output ``__range_<k>``, filtered at lookup time."""
    if "$" not in sql and "?" not in sql and ":" not in sql:
        return sql, [], []
    try:
        tree = normalize_tree(sqlglot.parse_one(sql, read=dialect), dialect)
    except SqlglotError:
        return sql, [], []  # the translator reports the parse error
    if not any(isinstance(n, (exp.Placeholder, exp.Parameter)) for n in tree.walk()):
        return sql, [], []
    if not isinstance(tree, exp.Select):
        raise UnsupportedSQLError("placeholders are supported in a plain SELECT … WHERE col = $p view only")
    counter = [0]
    columns: dict[str, list[exp.Column]] = {}
    ranges: list[tuple[str, str, exp.Column]] = []

    def range_conjunct(c: exp.Expression) -> bool:
        """Record ``col op $p`` / ``$p op col`` / ``col BETWEEN $lo AND $hi``; True if it was one."""
        if isinstance(c, exp.Between) and isinstance(c.this, exp.Column):
            lo = _placeholder_name(c.args["low"], counter)
            hi = _placeholder_name(c.args["high"], counter)
            if lo is not None and hi is not None:
                ranges.extend([(lo, ">=", c.this), (hi, "<=", c.this)])
                return True
            return False
        op = _RANGE_OPS.get(type(c))
        if op is None:
            return False
        name = _placeholder_name(c.expression, counter)
        if name is not None and isinstance(c.this, exp.Column):
            ranges.append((name, op, c.this))
            return True
        name = _placeholder_name(c.this, counter)
        if name is not None and isinstance(c.expression, exp.Column):
            ranges.append((name, _FLIP[op], c.expression))
            return True
        return False

    def strip(cond: exp.Expression | None) -> exp.Expression | None:
        if cond is None:
            return None
        keep = []
        for c in _conjuncts(cond):
            if isinstance(c, exp.EQ):
                left, right = c.this, c.expression
                name = _placeholder_name(right, counter)
                col = left
                if name is None:
                    name = _placeholder_name(left, counter)
                    col = right
                if name is not None:
                    if not isinstance(col, exp.Column):
                        raise UnsupportedSQLError(f"a parameter must be compared with a column: {c.sql()}")
                    columns.setdefault(name, []).append(col)
                    continue
            if range_conjunct(c):
                continue
            if any(isinstance(n, (exp.Placeholder, exp.Parameter)) for n in c.walk()):
                raise UnsupportedSQLError(
                    f"unsupported in parameterized views: {c.sql()} (parameters are supported as "
                    "top-level conjuncts column = $p, column < $p (<=, >, >=) or column BETWEEN $lo AND $hi "
                    "of WHERE or ON)")
            keep.append(c)
        return _and(keep)

    for join in tree.args.get("joins") or []:
        on = join.args.get("on")
        if on is not None:
            new = strip(on)
            join.set("on", new if new is not None else exp.true())
    where = tree.args.get("where")
    if where is not None:
        new = strip(where.this)
        tree.set("where", exp.Where(this=new) if new is not None else None)
    for n in tree.walk():
        if isinstance(n, (exp.Placeholder, exp.Parameter)):
            raise UnsupportedSQLError(
                f"unsupported in parameterized views: a parameter in {n.parent.sql() if n.parent else n.sql()} "
                "(parameters are supported as top-level conjuncts of WHERE or ON)")
    names = list(columns)
    rnames = list(dict.fromkeys(name for name, _, _ in ranges))
    if set(rnames) & set(names):
        raise UnsupportedSQLError(f"parameter {sorted(set(rnames) & set(names))[0]} is used both in an equality "
                                  "and in a range comparison; use two parameters")
    if len(rnames) != len(ranges):
        raise UnsupportedSQLError("each range parameter may be used in one comparison only")
    if any(n.startswith("p") and n[1:].isdigit() for n in names) and any(
            not (n.startswith("p") and n[1:].isdigit()) for n in names):
        raise SQLError("do not mix positional ($1, ?) and named ($name) parameters in one view")
    extra = []
    grouped = tree.args.get("group") is not None or any(
        isinstance(n, exp.AggFunc) for e in tree.expressions for n in e.walk())
    if grouped and ranges:
        raise UnsupportedSQLError("range parameters (col < $p, BETWEEN $lo AND $hi) are not supported with "
                                  "GROUP BY / aggregates yet; use equality parameters (col = $p)")
    for name in names:
        first, *rest = columns[name]
        tree.append("expressions", exp.alias_(first.copy(), HIDDEN + name, quoted=True))
        if grouped:  # a parameterized aggregate: one group (set) per input value
            group = tree.args.get("group")
            if group is None:
                tree.set("group", exp.Group(expressions=[first.copy()]))
            else:
                group.append("expressions", first.copy())
        extra += [exp.EQ(this=first.copy(), expression=c.copy()) for c in rest]
    out_ranges = []
    for k, (name, op, col) in enumerate(ranges):
        tree.append("expressions", exp.alias_(col.copy(), f"{RANGE}{k}", quoted=True))
        out_ranges.append((name, op, f"{RANGE}{k}"))
    if extra:
        w = tree.args.get("where")
        cond = _and(([w.this] if w is not None else []) + extra)
        tree.set("where", exp.Where(this=cond))
    return tree.sql(dialect=dialect), names, out_ranges


def literal_columns(sql: str, dialect: str = "duckdb") -> tuple[str, list[tuple[int, str, Any]]]:
    """Constant SELECT items of a parameterized view (004's Boolean lookups, ``SELECT 1 AS hit
    … WHERE r.a = $a``): the SQL without them and ``(position, name, value)`` of each, which
    the view puts back into every output row. Integer, string and Boolean literals only; a
    query with ``DISTINCT``, ``GROUP BY`` or aggregates is returned unchanged. O(query size)."""
    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except SqlglotError:
        return sql, []
    if not isinstance(tree, exp.Select) or tree.args.get("distinct") or tree.args.get("group") or any(
            isinstance(n, exp.AggFunc) for n in tree.walk()):
        return sql, []
    keep, out = [], []
    for pos, e in enumerate(tree.expressions):
        value = _literal(e.this if isinstance(e, exp.Alias) else e)
        if value is _NOT_LITERAL:
            keep.append(e)
        else:
            out.append((pos, e.alias if isinstance(e, exp.Alias) else e.sql(dialect=dialect), value))
    if not out or not keep:  # nothing to take out, or nothing (not even a parameter) left to select
        return sql, []
    tree.set("expressions", keep)
    return tree.sql(dialect=dialect), out


_NOT_LITERAL = object()


def _literal(e: exp.Expression) -> Any:
    if isinstance(e, exp.Boolean):
        return bool(e.this)
    if isinstance(e, exp.Neg) and isinstance(e.this, exp.Literal) and e.this.is_int:
        return -int(e.this.this)
    if isinstance(e, exp.Literal):
        if e.is_string:
            return e.this
        if e.is_int:
            return int(e.this)
    return _NOT_LITERAL
