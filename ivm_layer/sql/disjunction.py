"""``OR`` across tables whose disjuncts join the tables, as disjoint conjunctive queries.

``… WHERE A OR B`` → ``… WHERE A`` UNION ALL ``… WHERE B AND A IS NOT TRUE``: each branch is
joined through its own indexes instead of a residual filter over the cross product.
"""

from __future__ import annotations

from sqlglot import exp

from ..query import SetOperation
from .literals import strip_parens
from .shapes import column_owner, conjuncts, definition_columns, table_aliases


def or_join(select: exp.Select, tables) -> tuple[exp.Select, list, int] | None:
    """``(select with inner-join ON moved to WHERE, conjuncts, i)`` when WHERE conjunct ``i`` is an
    OR one of whose disjuncts compares columns of two tables (a join condition), else None."""
    aliases = table_aliases(select)
    if len(aliases) < 2:
        return None
    sel = select.copy()
    conds = []
    for j in sel.args.get("joins") or []:
        if j.args.get("on") is not None:
            conds.extend(c.copy() for c in conjuncts(j.args["on"]))
            j.set("on", None)
    where = sel.args.get("where")
    conds += [c.copy() for c in conjuncts(where.this)] if where is not None else []
    for i, c in enumerate(conds):
        if not isinstance(strip_parens(c), exp.Or):
            continue
        for d in _disjuncts(c):
            for conj in conjuncts(d):
                conj = strip_parens(conj)
                if isinstance(conj, (exp.EQ, exp.LT, exp.LTE, exp.GT, exp.GTE)):
                    owners = {column_owner(col, aliases, tables) for col in conj.find_all(exp.Column)}
                    if len(owners) == 2 and None not in owners:
                        return sel, conds, i
    return None


def _disjuncts(node: exp.Expression):
    node = strip_parens(node)
    if isinstance(node, exp.Or):
        yield from _disjuncts(node.this)
        yield from _disjuncts(node.expression)
    else:
        yield node


def or_union(select: exp.Select, conds: list, i: int, tables, dialect: str, translate) -> SetOperation:
    """``… WHERE A OR B`` → ``… WHERE A`` UNION ALL ``… WHERE B AND A IS NOT TRUE``: disjoint
    conjunctive queries, each joined through its own indexes."""
    disjuncts = list(_disjuncts(conds[i]))
    distinct = select.args.get("distinct") is not None
    branches = []
    for k, d in enumerate(disjuncts):
        earlier = [exp.Not(this=exp.Paren(this=exp.Coalesce(this=exp.Paren(this=e.copy()),
                                                           expressions=[exp.false()])))
                   for e in disjuncts[:k]]
        branch = select.copy()
        branch.set("distinct", None)
        rest = [c.copy() for j, c in enumerate(conds) if j != i] + [exp.Paren(this=d.copy())] + earlier
        branch.set("where", exp.Where(this=exp.and_(*rest)))
        branches.append(translate(branch, tables, dialect))
    out = branches[0]
    for b in branches[1:]:
        out = SetOperation("union", not distinct, [out, b], definition_columns(branches[0]))
    return out
