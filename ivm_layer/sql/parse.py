"""Parsing a view definition: never a raw exception, and WITH / subqueries in FROM inlined.

``parse_select`` turns every failure of the parser (tokenizer errors, deep nesting) into an
:class:`SQLError` with the position. A ``WITH`` (non-recursive) or a subquery in ``FROM``
that is select–project–join is merged into the outer query (sqlglot's optimizer rules
``qualify``, ``merge_subqueries``; a WITH item used twice is inlined twice); what cannot be merged
(aggregates, DISTINCT, LIMIT inside) is refused in the user's terms.
"""

from __future__ import annotations

import sys

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ..errors import SQLError, UnsupportedSQLError
from ..identifiers import normalize_tree
from .literals import unsupported, user_text

#: Deepest expression nesting accepted (DuckDB itself stops at a few hundred levels).
MAX_DEPTH = 200


def _depth_ok(sql: str) -> None:
    depth = deepest = 0
    in_str = False
    for ch in sql:
        if ch == "'":
            in_str = not in_str
        elif not in_str:
            if ch == "(":
                depth += 1
                deepest = max(deepest, depth)
            elif ch == ")":
                depth -= 1
    if deepest > MAX_DEPTH:
        raise SQLError(f"the definition nests parentheses {deepest} deep; at most {MAX_DEPTH} are supported")


def parse_statements(sql: str, dialect: str = "duckdb", what: str = "SQL") -> list[exp.Expression]:
    """sqlglot's parse of ``sql`` that never raises anything but :class:`SQLError`: tokenizer
    and parser errors, nesting deeper than :data:`MAX_DEPTH` and the parser's recursion limit all
    become one message naming ``what`` was being parsed."""
    _depth_ok(sql)
    limit = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(max(limit, 20000))
        return [normalize_tree(s, dialect) for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except SqlglotError as e:
        raise SQLError(f"cannot parse {what}: {_first_line(e)}") from None
    except RecursionError:
        raise SQLError(f"{what} is nested too deeply to parse") from None
    finally:
        sys.setrecursionlimit(limit)


def parse_select(sql: str, dialect: str = "duckdb") -> exp.Select:
    """Parse ``sql`` and return its ``SELECT`` expression, or raise :class:`SQLError`."""
    if not isinstance(sql, str):
        raise SQLError("the view definition must be SQL text")
    statements = parse_statements(sql, dialect, "SQL")
    if len(statements) != 1:
        raise SQLError(f"expected exactly one SELECT statement, got {len(statements)}")
    stmt = statements[0]
    if isinstance(stmt, (exp.Union, exp.Intersect, exp.Except)):
        return stmt  # set operations: see ivm_layer.sql.setops
    if not isinstance(stmt, exp.Select):
        raise unsupported(f"{type(stmt).__name__.upper()} statement (expected SELECT)", stmt)
    return stmt


def _first_line(e: Exception) -> str:
    text = str(e).replace("\x1b[4m", "").replace("\x1b[0m", "")
    return text.splitlines()[0][:200] if text else type(e).__name__


def has_nested_from(select: exp.Expression) -> bool:
    """True if ``select`` has a WITH or a subquery in FROM/JOIN."""
    if select.args.get("with") is not None or select.args.get("with_") is not None:
        return True
    from_ = select.args.get("from_") or select.args.get("from")
    items = [from_.this] if from_ is not None else []
    items += [j.this for j in select.args.get("joins") or []]
    # a parenthesized join ``(a JOIN b ON …)`` is a Subquery over a Table: not a nested query
    return any(isinstance(i, exp.Select) or (isinstance(i, exp.Subquery) and not isinstance(i.this, exp.Table))
               for i in items)


def inline_nested(select: exp.Select, schema: dict[str, list[str]], dialect: str,
                  strict: bool = True) -> exp.Select:
    """Merge select–project–join WITH items and FROM subqueries into ``select``. What cannot be
    merged stays a FROM subquery when not ``strict`` (a nested view), else is refused."""
    from sqlglot.optimizer.merge_subqueries import merge_subqueries
    from sqlglot.optimizer.qualify import qualify

    inner = _star_over_subquery(select)
    if inner is not None:  # SELECT * FROM (SELECT …) x: the subquery itself
        return inner if not has_nested_from(inner) else inline_nested(inner, schema, dialect, strict)
    with_ = select.args.get("with") or select.args.get("with_")
    if with_ is not None and with_.args.get("recursive"):
        raise unsupported("WITH RECURSIVE (recursive queries are not maintained incrementally)", with_)
    names = _output_names(select)
    select = _expand_ctes(select)
    try:
        q = qualify(select, schema={t: {c: "UNKNOWN" for c in cols} for t, cols in schema.items()},
                    dialect=dialect, quote_identifiers=False, validate_qualify_columns=True)
        q = merge_subqueries(q)
    except SqlglotError as e:
        raise SQLError(f"cannot resolve the columns of the WITH/subquery: {_first_line(e)}") from None
    if not isinstance(q, exp.Select):
        raise UnsupportedSQLError("unsupported in incremental views: this WITH/subquery shape")
    left = q.args.get("with") or q.args.get("with_")
    if strict and (left is not None or has_nested_from(q)):
        node = left.expressions[0] if left is not None else q
        raise unsupported("WITH item or subquery in FROM that is not select–project–join (a nested "
                          "GROUP BY, DISTINCT, LIMIT or set operation)", node)
    if names is not None and len(names) == len(q.expressions):
        for item, name in zip(q.expressions, names):
            if name is not None and isinstance(item, exp.Alias):
                item.set("alias", exp.to_identifier(name))
    return q


def _expand_ctes(select: exp.Select) -> exp.Select:
    """A copy of ``select`` with every reference to a WITH item replaced by the item's query as
    a FROM subquery (so a WITH item used twice, e.g. in a self-join, is inlined twice)."""
    select = select.copy()
    key = "with_" if select.args.get("with_") is not None else "with"
    with_ = select.args.get(key)
    if with_ is None:
        return select
    bodies: dict[str, exp.Expression] = {}
    for cte in with_.expressions:
        body = _replace_refs(cte.this.copy(), bodies)
        bodies[cte.alias_or_name] = body
    select.set(key, None)
    return _replace_refs(select, bodies)


def _replace_refs(node: exp.Expression, bodies: dict[str, exp.Expression]) -> exp.Expression:
    for table in list(node.find_all(exp.Table)):
        name = table.name
        if name in bodies and not table.args.get("db") and isinstance(table.this, exp.Identifier):
            alias = table.alias or table.name
            table.replace(exp.Subquery(this=bodies[name].copy(), alias=exp.TableAlias(this=exp.to_identifier(alias))))
    return node


def _star_over_subquery(select: exp.Select) -> exp.Select | None:
    if len(select.expressions) != 1 or not isinstance(select.expressions[0], exp.Star):
        return None
    if any(v not in (None, [], False) for k, v in select.args.items() if k not in ("expressions", "from_", "from")):
        return None
    from_ = select.args.get("from_") or select.args.get("from")
    sub = from_.this if from_ is not None else None
    if isinstance(sub, exp.Subquery) and isinstance(sub.this, exp.Select) and not sub.args.get("pivots"):
        return sub.this
    return None


def _output_names(select: exp.Select) -> list[str | None] | None:
    """The output names the user's SELECT list gives (None for ``*`` lists)."""
    out: list[str | None] = []
    for item in select.expressions:
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
            return None
        if isinstance(item, exp.Alias):
            out.append(item.alias)
        elif isinstance(item, exp.Column):
            out.append(item.name)
        else:
            out.append(user_text(item, 200))
    return out

