"""Small readers of SELECT shapes shared by the rewrites (conjuncts, FROM aliases, column owners)."""

from __future__ import annotations

from sqlglot import exp

from ..query import Derived, JoinQuery, SemiJoin, SetOperation, WindowQuery
from .literals import strip_parens, user_text


def definition_columns(d) -> list[str]:
    """The output column names of a definition (GCQ, SetOperation or SemiJoin)."""
    if isinstance(d, (SetOperation, SemiJoin)):
        return list(d.columns)
    if isinstance(d, Derived):
        return definition_columns(d.outer)
    if isinstance(d, (JoinQuery, WindowQuery)):
        return list(d.projection.columns)
    if d.aggregate is not None:
        return list(d.aggregate.columns)
    if d.projection is not None:
        return list(d.projection.columns)
    return list(d.columns)


def conjuncts(node: exp.Expression):
    node = strip_parens(node)
    if isinstance(node, exp.And):
        yield from conjuncts(node.this)
        yield from conjuncts(node.expression)
    else:
        yield node


def subquery_kind(node: exp.Expression) -> str | None:
    node = strip_parens(node)
    neg = False
    if isinstance(node, exp.Not):
        neg, node = True, strip_parens(node.this)
    if isinstance(node, exp.Exists):
        return "not exists" if neg else "exists"
    if isinstance(node, exp.In) and node.args.get("query") is not None:
        return "not in" if neg else "in"
    return None


def is_paren_join(item: exp.Expression) -> bool:
    """``(a JOIN b ON …)`` or ``(t)`` as a FROM item (sqlglot: a Subquery over a Table)."""
    return isinstance(item, exp.Subquery) and isinstance(item.this, exp.Table)


def from_items(select: exp.Select) -> list[exp.Expression]:
    """The FROM item and the joined items of ``select``, in order."""
    from_ = select.args.get("from_") or select.args.get("from")
    return ([from_.this] if from_ is not None else []) + [j.this for j in select.args.get("joins") or []]


def has_paren_join(select: exp.Select) -> bool:
    return any(is_paren_join(i) for i in from_items(select))


def has_outer_join(select: exp.Select) -> bool:
    """True if ``select``'s FROM has a LEFT/RIGHT/FULL join, also inside parentheses."""
    if any(j.side for j in select.args.get("joins") or []):
        return True
    return any(is_paren_join(i) and any(j.side for j in i.this.find_all(exp.Join)) for i in from_items(select))


def table_aliases(select: exp.Select) -> dict[str, str]:
    """alias -> table of the plain tables in ``select``'s FROM / JOINs (also inside parenthesized
    joins)."""
    out = {}
    for item in from_items(select):
        tables = [item] if isinstance(item, exp.Table) else []
        if is_paren_join(item):
            tables = [t for t in item.this.find_all(exp.Table)]
        for t in tables:
            if isinstance(t.this, exp.Identifier):
                out[t.alias or t.name] = t.name
    return out


def column_owner(col: exp.Column, aliases: dict[str, str], tables) -> str | None:
    if col.table:
        return col.table
    owners = [a for a, t in aliases.items() if col.name in tables.get(t, [])]
    return owners[0] if len(owners) == 1 else None


def item_name(item: exp.Expression) -> str:
    """The name DuckDB gives an unaliased SELECT item."""
    if isinstance(item, exp.Column):
        return item.name
    if isinstance(item, exp.Count) and isinstance(item.this, exp.Star):
        return "count_star()"
    return user_text(item, 200).lower()
