"""Outer joins as inner joins plus the unmatched rows padded with NULLs.

``A LEFT JOIN B ON A.k = B.k [AND <B only>]`` (B the last FROM item) is the inner join
``UNION ALL`` the A rows with ``NOT EXISTS`` a matching B row, B's columns NULL; RIGHT and FULL
joins of two tables likewise (FULL: both sides padded). ``translate`` translates the branches.
"""

from __future__ import annotations

from sqlglot import exp

from ..errors import SQLError
from ..query import SetOperation
from .aggregates import is_aggregate_query
from .literals import strip_parens, unsupported, user_text
from .shapes import column_owner, conjuncts, definition_columns, table_aliases


def outer_join(select: exp.Select, tables, dialect: str, translate):
    joins = select.args["joins"]
    outer = [j for j in joins if j.side]
    if len(outer) > 1:
        raise unsupported("more than one outer join in one SELECT", outer[1])
    j = outer[0]
    side = j.side.upper()
    if is_aggregate_query(select):
        raise unsupported(f"GROUP BY / aggregates over a {side} OUTER JOIN", j)
    if j.args.get("using") or j.args.get("method"):
        raise unsupported(f"{side} JOIN … USING / NATURAL (write the ON condition)", j)
    if j.args.get("on") is None:
        raise unsupported(f"{side} JOIN without ON", j)
    from_ = select.args.get("from_") or select.args.get("from")
    if from_ is None:
        raise SQLError("an incremental view needs a FROM clause")
    if side == "LEFT" and j is not joins[-1]:
        raise unsupported("LEFT JOIN followed by further joins (put it last)", j)
    if side in ("RIGHT", "FULL") and len(joins) != 1:
        raise unsupported(f"{side} JOIN of more than two tables", j)
    for t in [from_.this] + [x.this for x in joins]:
        if not isinstance(t, exp.Table):
            raise unsupported("outer join of a subquery", t)
    aliases = table_aliases(select)
    first = (from_.this.alias or from_.this.name)
    joined = (j.this.alias or j.this.name)
    inner = select.copy()
    for x in inner.args["joins"]:
        if x.side:
            x.set("side", None)
            x.set("kind", None)
    distinct = select.args.get("distinct") is not None
    branches = [inner]
    if side in ("LEFT", "FULL"):
        branches.append(_padded(select, j, joined, aliases, tables))
    if side in ("RIGHT", "FULL"):
        branches.append(_padded(select, j, first, aliases, tables))
    if distinct:
        for b in branches:
            b.set("distinct", None)
    defs = [translate(b, tables, dialect) for b in branches]
    out = defs[0]
    for d in defs[1:]:
        out = SetOperation("union", not distinct, [out, d], definition_columns(defs[0]))
    return out


def _padded(select: exp.Select, j: exp.Join, nulled: str, aliases: dict[str, str], tables) -> exp.Select:
    """The rows of the preserved side without a match, with the columns of ``nulled`` NULL."""
    keep = {a: t for a, t in aliases.items() if a != nulled}
    null_table = aliases[nulled]
    null_cols = tables.get(null_table, [])
    inner_conds, key_pairs = [], []
    for c in conjuncts(j.args["on"]):
        cols = list(c.find_all(exp.Column))
        owners = {column_owner(col, aliases, tables) for col in cols}
        if owners <= {nulled}:
            inner_conds.append(c.copy())
            continue
        cs = strip_parens(c)
        if isinstance(cs, exp.EQ) and isinstance(strip_parens(cs.this), exp.Column) \
                and isinstance(strip_parens(cs.expression), exp.Column):
            a, b = strip_parens(cs.this), strip_parens(cs.expression)
            oa, ob = column_owner(a, aliases, tables), column_owner(b, aliases, tables)
            if oa == nulled and ob in keep:
                key_pairs.append((a.copy(), b.copy()))
                continue
            if ob == nulled and oa in keep:
                key_pairs.append((b.copy(), a.copy()))
                continue
        raise unsupported("outer join condition other than equalities between the two sides and conditions "
                          "on the side that gets NULLs", c)
    sub = exp.select(*[exp.alias_(exp.Literal.number(1), "one")]).from_(
        exp.Table(this=exp.to_identifier(null_table), alias=exp.TableAlias(this=exp.to_identifier(nulled))))
    conds = [exp.EQ(this=a, expression=b) for a, b in key_pairs] + inner_conds
    if conds:
        sub.set("where", exp.Where(this=exp.and_(*conds)))
    out = select.copy()
    from_ = out.args.get("from_") or out.args.get("from")
    from_key = "from_" if out.args.get("from_") is not None else "from"
    if (from_.this.alias or from_.this.name) == nulled:  # RIGHT JOIN: the joined table stays
        out.set(from_key, exp.From(this=out.args["joins"][0].this.copy()))
        out.set("joins", None)
    else:
        out.set("joins", [x for x in out.args["joins"] if (x.this.alias or x.this.name) != nulled] or None)
    out.set("expressions", _null_items(out.expressions, nulled, aliases, tables, null_cols))
    where = out.args.get("where")
    conjs = [_nullify(c.copy(), nulled, aliases, tables) for c in (conjuncts(where.this) if where else [])]
    conjs.append(exp.Not(this=exp.Exists(this=sub)))
    out.set("where", exp.Where(this=exp.and_(*conjs)))
    return out


def _nullify(node: exp.Expression, nulled: str, aliases, tables) -> exp.Expression:
    for col in list(node.find_all(exp.Column)):
        if column_owner(col, aliases, tables) == nulled:
            if col is node:
                return exp.Null()
            col.replace(exp.Null())
    return node


def _null_items(items, nulled: str, aliases, tables, null_cols) -> list[exp.Expression]:
    out = []
    for item in items:
        node = item.this if isinstance(item, exp.Alias) else item
        if isinstance(node, exp.Star):
            for a, t in aliases.items():
                for c in tables.get(t, []):
                    out.append(exp.alias_(exp.Null(), c) if a == nulled else exp.column(c, a))
            continue
        if isinstance(node, exp.Column) and isinstance(node.this, exp.Star):
            a = node.table
            for c in tables.get(aliases.get(a, ""), []):
                out.append(exp.alias_(exp.Null(), c) if a == nulled else exp.column(c, a))
            continue
        name = item.alias if isinstance(item, exp.Alias) else (node.name if isinstance(node, exp.Column)
                                                                else user_text(node, 200))
        out.append(exp.alias_(_nullify(node.copy(), nulled, aliases, tables), name))
    return out
