"""Nested views: FROM subqueries that are not select–project–join, and GROUP BY over what a
grouped view cannot read directly (outer joins, subquery conditions, OR joins, computed keys).

The inner query becomes its own definition whose change stream feeds a derived relation
(``__nested_…``) of the outer query. ``translate`` translates both.
"""

from __future__ import annotations

import re

from sqlglot import exp

from ..errors import IVMError, SQLError
from ..query import Derived
from .literals import strip_parens, unsupported
from .shapes import column_owner, definition_columns, is_paren_join, item_name, table_aliases


def derived(select: exp.Select, tables: dict[str, list[str]], dialect: str, translate) -> Derived:
    """FROM subqueries that are not select–project–join (GROUP BY, DISTINCT, outer joins…)
    become nested views: each one's change stream feeds a derived relation of the outer query."""
    if select.args.get("with") is not None or select.args.get("with_") is not None:
        raise unsupported("WITH item that could not be inlined", select.args.get("with") or select.args.get("with_"))
    from_ = select.args.get("from_") or select.args.get("from")
    items = [from_.this] + [j.this for j in select.args.get("joins") or []]
    extended = dict(tables)
    nested = []
    for item in items:
        if not isinstance(item, (exp.Subquery, exp.Select)):
            continue
        body = item.this if isinstance(item, exp.Subquery) else item
        if not isinstance(body, exp.Select):
            raise unsupported("set operation in FROM (name it as a view of its own)", item)
        alias = ((item.alias_or_name if isinstance(item, exp.Subquery) else "") or "sub")
        relation = f"__nested_{alias}"
        while relation in extended:
            relation += "_"
        inner = translate(body, tables, dialect)
        cols = list(definition_columns(inner))
        if len(set(cols)) != len(cols):
            raise SQLError(f"the subquery {alias!r} has duplicate column names ({', '.join(cols)}): "
                           "give its columns distinct aliases")
        extended[relation] = cols
        nested.append((relation, inner))
        item.replace(exp.Table(this=exp.to_identifier(relation), alias=exp.TableAlias(this=exp.to_identifier(alias))))
    if not nested:
        raise unsupported("this FROM item", from_)
    outer = translate(select, extended, dialect)
    return Derived(nested, outer)


def aggregate_over(select: exp.Select, tables: dict[str, list[str]], dialect: str, translate) -> Derived:
    """GROUP BY over an outer join or a subquery condition: the join (with its WHERE) becomes a
    nested view of the columns the aggregation reads; the aggregation reads that view."""
    aliases = table_aliases(select)
    from_ = select.args.get("from_") or select.args.get("from")
    if from_ is None:
        raise SQLError("an incremental view needs a FROM clause")
    if any(not isinstance(t, exp.Table) and not is_paren_join(t)
           for t in [from_.this] + [j.this for j in select.args.get("joins") or []]):
        raise unsupported("GROUP BY over an outer join of a subquery", select)
    outer = select.copy()
    outer.set("expressions", [it if isinstance(it, exp.Alias) else exp.alias_(it, item_name(it))
                              for it in outer.expressions])
    computed = _computed_keys(outer, aliases, tables)
    used: dict[tuple[str, str], str] = {}
    for key in ("expressions", "group", "having"):
        value = outer.args.get(key)
        nodes = value if isinstance(value, list) else [value] if value is not None else []
        for node in nodes:
            for col in list(node.find_all(exp.Column)):
                if col.table == "q__":  # a computed group key, already read from the nested view
                    continue
                if isinstance(col.this, exp.Star):
                    raise unsupported("* in a GROUP BY query", col)
                owner = column_owner(col, aliases, tables)
                if owner is None:
                    if col.table or any(col.name in tables.get(t, []) for t in aliases.values()):
                        raise SQLError(f"column {col.sql()!r} is ambiguous: qualify it with its table")
                    continue  # a SELECT alias (HAVING revenue > 10)
                name = used.setdefault((owner, col.name), f"{owner}__{col.name}")
                col.replace(exp.column(name, "q__"))
    inner = select.copy()
    for key in ("group", "having", "order", "limit", "distinct"):
        inner.set(key, None)
    inner.set("expressions", [exp.alias_(e, n) for n, e in computed]
              + [exp.alias_(exp.column(c, a), n) for (a, c), n in used.items()]
              or [exp.alias_(exp.Literal.number(1), "one__")])
    relation = "__nested_q__"
    inner_def = translate(inner, tables, dialect)
    extended = dict(tables)
    extended[relation] = list(definition_columns(inner_def))
    from_key = "from_" if outer.args.get("from_") is not None else "from"
    outer.set(from_key, exp.From(this=exp.Table(this=exp.to_identifier(relation),
                                                alias=exp.TableAlias(this=exp.to_identifier("q__")))))
    outer.set("joins", None)
    outer.set("where", None)
    try:
        outer_def = translate(outer, extended, dialect)
    except IVMError as e:  # speak of the user's columns, not of the nested view's
        text = re.sub(r"q__\.__g\d+", "the GROUP BY expression", str(e))
        raise type(e)(re.sub(r"q__\.(\w+?)__(\w+)", r"\1.\2", text)) from None
    return Derived([(relation, inner_def)], outer_def)


def _group_items(select: exp.Select, aliases, tables) -> list[exp.Expression]:
    """The GROUP BY items with positions and SELECT aliases resolved to their expressions."""
    group = select.args.get("group")
    if group is None:
        return []
    items = {it.alias: it.this for it in select.expressions if isinstance(it, exp.Alias)}
    out = []
    for g in group.expressions:
        g = strip_parens(g)
        if isinstance(g, exp.Literal) and not g.is_string and g.this.isdigit() \
                and 1 <= int(g.this) <= len(select.expressions):
            item = select.expressions[int(g.this) - 1]
            g = item.this if isinstance(item, exp.Alias) else item
        elif isinstance(g, exp.Column) and not g.table and g.name in items \
                and not any(g.name in tables.get(t, []) for t in aliases.values()):
            g = items[g.name]
        out.append(strip_parens(g))
    return out


def has_computed_group(select: exp.Select, tables) -> bool:
    """True if a GROUP BY item is an expression rather than a column."""
    return any(not isinstance(g, exp.Column) for g in _group_items(select, table_aliases(select), tables))


def _computed_keys(outer: exp.Select, aliases, tables) -> list[tuple[str, exp.Expression]]:
    """Replace computed GROUP BY expressions (in GROUP BY, SELECT, HAVING) by columns of the
    nested view; returns ``(name, expression)`` for the nested view's SELECT list."""
    group = outer.args.get("group")
    if group is None:
        return []
    keys, out, new_group = {}, [], []
    for g in _group_items(outer, aliases, tables):
        if isinstance(g, exp.Column):
            new_group.append(g.copy())
            continue
        text = g.sql()
        if text not in keys:
            keys[text] = f"__g{len(keys)}"
            out.append((keys[text], g.copy()))
        new_group.append(exp.column(keys[text], "q__"))

    def swap(node):
        name = keys.get(node.sql()) if not isinstance(node, (exp.Alias, exp.Column, exp.Literal)) else None
        return exp.column(name, "q__") if name else node

    outer.set("expressions", [it.transform(swap) for it in outer.expressions])
    if outer.args.get("having") is not None:
        outer.set("having", outer.args["having"].transform(swap))
    group.set("expressions", new_group)
    return out
