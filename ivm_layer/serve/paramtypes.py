"""The types of a statement's ``$n`` parameters, for ``Describe`` of a prepared statement.

Drivers that prepare first (asyncpg, JDBC's describe, pgbench ``-M prepared``) ask the server
for the parameter types and then encode the values in them, so ``WHERE id = $1`` on a
``BIGINT`` column must come back as ``int8``. DuckDB does not type parameters before they are
bound, so the statement is read with sqlglot (once per prepared statement) and each ``$n``
takes the type of what it meets: the column it is compared with (``=``, ``<``, ``IN``,
``BETWEEN``), the column it is inserted into or assigned to, a ``CAST``, ``LIMIT``/
``OFFSET`` (``int8``). A parameter typed by the client in Parse keeps that type; one nothing
decides is ``text``, which DuckDB coerces where the value is used.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ..identifiers import ascii_lower
from . import pgtypes, sqlscan

_PARAM = re.compile(r"\$(\d+)")


def infer(sql: str, declared: list[int], columns_of: Callable[[str], dict[str, str] | None],
          count: int) -> list[int]:
    """OIDs of parameters ``$1 … $count``. ``columns_of(table)`` gives ``{column: DuckDB type}``
    of a table or view (``None`` when unknown); ``declared`` are the OIDs from Parse (0 =
    unspecified)."""
    out = [declared[i] if i < len(declared) and declared[i] else 0 for i in range(count)]
    if all(out):
        return out
    try:   # $n as identifiers: sqlglot's tokenizer reads "$1,$2" as a dollar-quoted string
        tree = sqlglot.parse_one(sqlscan.map_code(sql, lambda p: _PARAM.sub(r"__ivm_param_\1", p)),
                                 read="postgres")
    except (SqlglotError, RecursionError, ValueError):
        return [o or pgtypes.TEXT for o in out]
    if tree is None:
        return [o or pgtypes.TEXT for o in out]
    aliases: dict[str, str] = {}
    tables: list[str] = []
    for t in tree.find_all(exp.Table):
        name = ascii_lower(t.name)     # DuckDB's rule: ASCII case-insensitive
        tables.append(name)
        aliases[ascii_lower(t.alias or t.name)] = name
    cache: dict[str, dict[str, str] | None] = {}

    def cols(table: str) -> dict[str, str]:
        if table not in cache:
            found = columns_of(table)
            cache[table] = {ascii_lower(k): v for k, v in found.items()} if found else None
        return cache[table] or {}

    def column_type(col: exp.Column) -> str | None:
        name = ascii_lower(col.name)
        if name.startswith("__ivm_param_"):
            return None
        if col.table:
            t = aliases.get(ascii_lower(col.table), ascii_lower(col.table))
            return cols(t).get(name)
        for t in tables:
            ty = cols(t).get(name)
            if ty is not None:
                return ty
        return None

    def number(node) -> int | None:
        if isinstance(node, exp.Column) and not node.table and node.name.startswith("__ivm_param_"):
            return int(node.name[len("__ivm_param_"):]) - 1
        return None

    def assign(node, duck_type: str | None) -> None:
        i = number(node)
        if i is None or i >= count or out[i] or duck_type is None:
            return
        out[i] = pgtypes.pg_type(duck_type)[0]

    for node in tree.walk():
        if isinstance(node, (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.ILike)):
            left, right = node.this, node.expression
            if isinstance(left, exp.Column):
                assign(right, column_type(left))
            if isinstance(right, exp.Column):
                assign(left, column_type(right))
            if isinstance(left, (exp.Add, exp.Sub, exp.Mul)) and isinstance(left.this, exp.Column):
                assign(left.expression, column_type(left.this))
        elif isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div)):
            for a, b in ((node.this, node.expression), (node.expression, node.this)):
                if isinstance(a, exp.Column) and number(a) is None:
                    assign(b, column_type(a))
                elif isinstance(a, exp.Literal) and not a.is_string:
                    assign(b, "DECIMAL(38,10)" if "." in a.name else "BIGINT")
        elif isinstance(node, exp.In) and isinstance(node.this, exp.Column):
            ty = column_type(node.this)
            for e in node.expressions:
                assign(e, ty)
        elif isinstance(node, exp.Between) and isinstance(node.this, exp.Column):
            ty = column_type(node.this)
            assign(node.args.get("low"), ty)
            assign(node.args.get("high"), ty)
        elif isinstance(node, exp.Cast):
            assign(node.this, node.to.sql(dialect="duckdb"))
        elif isinstance(node, (exp.Limit, exp.Offset)):
            assign(node.expression, "BIGINT")
        elif isinstance(node, exp.Insert):
            _insert(node, cols, assign)
    return [o or pgtypes.TEXT for o in out]


def _insert(node: exp.Insert, cols: Callable[[str], dict[str, str]], assign) -> None:
    target = node.this
    names: list[str] | None = None
    if isinstance(target, exp.Schema):
        names = [ascii_lower(c.name) for c in target.expressions]
        target = target.this
    if not isinstance(target, exp.Table):
        return
    types = cols(ascii_lower(target.name))
    if not types:
        return
    order = names or list(types)
    values = node.expression
    if isinstance(values, exp.Values):
        for tup in values.expressions:
            for name, e in zip(order, tup.expressions):
                assign(e, types.get(name))
