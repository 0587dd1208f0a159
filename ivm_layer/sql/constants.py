"""Constant inputs: a SELECT without FROM, ``VALUES`` lists and set-returning functions of constants
(``generate_series``, ``range``, ``unnest``) in FROM become static tables of the view.

:func:`constant_inputs` rewrites the definition: each such FROM item is replaced by a table
``__const_<n>`` (aliased as the user wrote it, its columns named as the database names them)
whose rows are computed here, once; a SELECT without FROM reads a one-row table. The compiled
view loads those rows when it is built (:class:`ivm_layer.engine.constant.ConstantInputs`) and
never changes them: they cost nothing per update.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from decimal import Decimal

from sqlglot import exp

from ..errors import IVMError, SQLError
from .literals import NOT_CONST, constant, position, strip_parens, unsupported
from .parse import parse_select

#: Largest constant input built (rows): a set-returning function this big is a table, not a constant.
MAX_ROWS = 1_000_000
PREFIX = "__const_"


@dataclass
class ConstantTable:
    """One constant input: its columns, SQL types, rows and what the user wrote (EXPLAIN)."""

    name: str
    columns: list[str]
    types: list[str]
    rows: list[tuple]
    text: str


def constant_inputs(sql: str, dialect: str) -> tuple[str, list[ConstantTable]]:
    """``sql`` with its constant inputs replaced by ``__const_<n>`` tables, and those tables;
    ``(sql, [])`` when there are none (or when ``sql`` does not parse: the caller reports that)."""
    try:
        tree = parse_select(sql, dialect)
    except IVMError:
        return sql, []  # the definition's own translation reports what is wrong with it
    found: list[ConstantTable] = []
    for select in list(tree.find_all(exp.Select)):
        _rewrite(select, found, dialect)
    if not found:
        return sql, []
    return tree.sql(dialect=dialect), found


def _rewrite(select: exp.Select, found: list[ConstantTable], dialect: str) -> None:
    from_ = select.args.get("from_") or select.args.get("from")
    if from_ is None:
        if not select.expressions or _is_set_returning(select):
            return
        table = ConstantTable(f"{PREFIX}{len(found)}", ["__unit"], ["INTEGER"], [(1,)], "a SELECT without FROM")
        found.append(table)
        select.from_(exp.Table(this=exp.to_identifier(table.name)), copy=False)
        return
    items = [from_] + list(select.args.get("joins") or [])
    for holder in items:
        item = holder.this
        table = _constant_item(item, len(found), dialect)
        if table is None:
            continue
        found.append(table)
        alias = item.args.get("alias")
        name = alias.name if alias is not None and alias.name else table.columns[0] if \
            len(table.columns) == 1 and not isinstance(item, exp.Values) else "v"
        holder.set("this", exp.Table(this=exp.to_identifier(table.name),
                                     alias=exp.TableAlias(this=exp.to_identifier(name))))


def _is_set_returning(select: exp.Select) -> bool:
    return any(isinstance(e, (exp.GenerateSeries, exp.ExplodingGenerateSeries, exp.Unnest))
               for item in select.expressions for e in item.walk())


def _constant_item(item: exp.Expression, n: int, dialect: str) -> ConstantTable | None:
    """The constant table of a FROM item, or None when it is not a constant input."""
    alias = item.args.get("alias")
    names = [c.name for c in alias.columns] if alias is not None and alias.columns else []
    alias_name = alias.name if alias is not None and alias.name else ""
    if isinstance(item, exp.Subquery) and isinstance(item.this, exp.Values):
        inner = item.this
        if not names and inner.args.get("alias") is not None:
            names = [c.name for c in inner.args["alias"].columns]
        return _values(inner, names, f"{PREFIX}{n}", dialect)
    if isinstance(item, exp.Values):
        return _values(item, names, f"{PREFIX}{n}", dialect)
    if isinstance(item, exp.Unnest):
        if len(item.expressions) != 1 or not isinstance(item.expressions[0], exp.Array):
            raise unsupported("unnest of something other than one constant array", item)
        values = [_const(x, item) for x in item.expressions[0].expressions]
        col = names[0] if names else alias_name or "unnest"
        return ConstantTable(f"{PREFIX}{n}", [col], [_type_of(values, dialect)], [(v,) for v in values],
                             item.sql(dialect=dialect))
    if not isinstance(item, exp.Table):
        return None
    fn = item.this
    if isinstance(fn, (exp.GenerateSeries, exp.ExplodingGenerateSeries)):
        exclusive = bool(fn.args.get("is_end_exclusive"))
        start, end, step = fn.args.get("start"), fn.args.get("end"), fn.args.get("step")
        default = "range" if exclusive else "generate_series"
    elif isinstance(fn, exp.Anonymous) and fn.name.lower() in ("range", "generate_series") and dialect != "postgres":
        args = fn.expressions
        if not 1 <= len(args) <= 3:
            raise unsupported(f"{fn.name}() with {len(args)} arguments", item)
        exclusive = fn.name.lower() == "range"
        start, end, step = (None, args[0], None) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else None)
        default = fn.name.lower()
    elif isinstance(fn, (exp.Anonymous, exp.Func)) and not isinstance(fn, exp.Identifier):
        raise unsupported(f"table function {fn.sql(dialect=dialect)[:60]} in FROM (constant inputs: VALUES, "
                          "generate_series / range / unnest of constants)", item)
    else:
        return None
    lo = 0 if start is None else _const(start, item)
    hi = _const(end, item)
    by = 1 if step is None else _const(step, item)
    values = _series(lo, hi, by, exclusive, item, dialect)
    col = names[0] if names else alias_name or default
    return ConstantTable(f"{PREFIX}{n}", [col], [_type_of(values, dialect, series=True)],
                         [(v,) for v in values], item.sql(dialect=dialect))


def _const(node: exp.Expression, where: exp.Expression):
    v = constant(strip_parens(node), decimals=True)
    if v is NOT_CONST:
        raise unsupported("set-returning function or VALUES over something other than constants (a "
                          "table's column, an expression): join the table instead", where)
    return v


def _series(lo, hi, by, exclusive: bool, node: exp.Expression, dialect: str) -> list:
    if any(v is None for v in (lo, hi, by)):
        return []
    if isinstance(lo, datetime.date) or isinstance(hi, datetime.date):
        if dialect == "postgres":
            raise unsupported("generate_series over dates or timestamps (PostgreSQL returns timestamp with "
                              "time zone)", node)
        if not isinstance(by, datetime.timedelta) or not by:
            raise SQLError(f"generate_series over dates needs a non-zero INTERVAL step{position(node)}")
        lo, hi = _ts(lo), _ts(hi)
    elif not all(isinstance(v, (int, Decimal)) and not isinstance(v, bool) for v in (lo, hi, by)):
        raise unsupported("generate_series / range over values that are not integers or dates", node)
    if not by:
        raise SQLError(f"the step of a series cannot be zero{position(node)}")
    count = _count(lo, hi, by, exclusive)
    if count > MAX_ROWS:
        raise unsupported(f"a constant series of {count} rows (at most {MAX_ROWS}: load it into a table)", node)
    return [lo + by * i for i in range(count)]


def _count(lo, hi, by, exclusive: bool) -> int:
    span = hi - lo
    if isinstance(span, datetime.timedelta):
        q = span / by
    else:
        q = Decimal(span) / Decimal(by)
    if q < 0:
        return 0
    whole = int(q)
    if exclusive and whole == q:
        return whole
    return whole + 1


def _ts(v):
    return datetime.datetime.combine(v, datetime.time()) if type(v) is datetime.date else v


def _values(node: exp.Values, names: list[str], name: str, dialect: str) -> ConstantTable:
    rows = []
    for t in node.expressions:
        vals = t.expressions if isinstance(t, exp.Tuple) else [t]
        rows.append(tuple(_const(v, node) for v in vals))
    width = len(rows[0]) if rows else 0
    if any(len(r) != width for r in rows):
        raise SQLError(f"VALUES lists must all be the same length{position(node)}")
    if names and len(names) > width:
        raise SQLError(f"VALUES has {width} columns but {len(names)} names{position(node)}")
    base = "column{}" if dialect == "postgres" else "col{}"
    default = [base.format(i + 1 if dialect == "postgres" else i) for i in range(width)]
    cols = list(names) + default[len(names):]
    types = []
    for i in range(width):
        column = [r[i] for r in rows]
        types.append(_type_of(column, dialect))
        if types[-1].startswith(("DECIMAL", "NUMERIC")):  # a column of 1 and 2.5 is a numeric column
            rows = [r[:i] + (Decimal(r[i]) if isinstance(r[i], int) else r[i],) + r[i + 1:] for r in rows]
    return ConstantTable(name, cols, types, rows, "VALUES …")


def _type_of(values: list, dialect: str, series: bool = False) -> str:
    kinds = {type(v) for v in values if v is not None}
    if not kinds or kinds <= {int}:
        return "BIGINT" if series and dialect != "postgres" else "INTEGER"
    if kinds <= {int, Decimal}:
        return "NUMERIC" if dialect == "postgres" else "DECIMAL(38,10)"
    if kinds <= {int, float, Decimal}:
        return "DOUBLE" if dialect != "postgres" else "DOUBLE PRECISION"
    if kinds <= {str}:
        return "VARCHAR" if dialect != "postgres" else "TEXT"
    if kinds <= {bool}:
        return "BOOLEAN"
    if kinds <= {datetime.datetime}:
        return "TIMESTAMP"
    if kinds <= {datetime.date}:
        return "DATE"
    raise SQLError("a VALUES column mixes values of different types")
