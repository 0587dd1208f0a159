"""Subquery conditions and outer joins, rewritten into views the engine maintains.

- ``[NOT] EXISTS (SELECT … FROM B WHERE B.x = outer.y AND <B only>)`` and
  ``x [NOT] IN (SELECT b FROM B …)`` as a WHERE conjunct → a :class:`SemiJoin` of the outer
  query (its columns plus the key columns) and the subquery's keys.
- ``A LEFT JOIN B ON A.k = B.k [AND <B only>]`` (B the last FROM item) → the inner join
  ``UNION ALL`` the A rows with ``NOT EXISTS`` a matching B row, B's columns NULL; RIGHT and
  FULL joins of two tables likewise (FULL: both sides padded).

What is not of these shapes is refused in the user's terms.
"""

from __future__ import annotations

import re

from sqlglot import exp

from ..errors import IVMError, SQLError
from ..query import Derived, SemiJoin, SetOperation
from .aggregates import is_aggregate_query
from .literals import strip_parens, unsupported, user_text
from .parse import has_nested_from, inline_nested
from .translate import translate_tree


def definition_columns(d) -> list[str]:
    """The output column names of a definition (GCQ, SetOperation or SemiJoin)."""
    if isinstance(d, (SetOperation, SemiJoin)):
        return list(d.columns)
    if isinstance(d, Derived):
        return definition_columns(d.outer)
    if d.aggregate is not None:
        return list(d.aggregate.columns)
    if d.projection is not None:
        return list(d.projection.columns)
    return list(d.columns)


def translate_select_tree(select: exp.Select, tables: dict[str, list[str]], dialect: str):
    """A SELECT with possibly subquery conditions / one outer join → a definition."""
    if has_nested_from(select):
        select = inline_nested(select, tables, dialect, strict=False)
        if has_nested_from(select):  # aggregated / DISTINCT subqueries: nested views
            return _derived(select, tables, dialect)
    joins = select.args.get("joins") or []
    where = select.args.get("where")
    has_sub = where is not None and any(_subquery_kind(c) is not None for c in _conjuncts(where.this))
    or_join = None if any(j.side for j in joins) or has_sub else _or_join(select, tables)
    if (has_sub or or_join is not None or any(j.side for j in joins) or has_computed_group(select, tables)) \
            and is_aggregate_query(select):
        return _aggregate_over(select, tables, dialect)
    if or_join is not None:
        return _or_union(*or_join, tables, dialect)
    if any(j.side for j in joins):
        return _outer_join(select, tables, dialect)
    where = select.args.get("where")
    if where is not None:
        conjs = list(_conjuncts(where.this))
        for i, c in enumerate(conjs):
            if _subquery_kind(c) is not None:
                return _semijoin(select, conjs, i, tables, dialect)
        for c in conjs:
            sub = c.find(exp.Exists, exp.Subquery)
            if sub is not None:
                raise unsupported("subquery inside OR/NOT/an expression (only as a WHERE conjunct: "
                                  "[NOT] EXISTS (…), x [NOT] IN (SELECT …))", sub)
    return translate_tree(select, tables, dialect)


# -- [NOT] EXISTS / [NOT] IN -----------------------------------------------------------------
def _conjuncts(node: exp.Expression):
    node = strip_parens(node)
    if isinstance(node, exp.And):
        yield from _conjuncts(node.this)
        yield from _conjuncts(node.expression)
    else:
        yield node


def _subquery_kind(node: exp.Expression) -> str | None:
    node = strip_parens(node)
    neg = False
    if isinstance(node, exp.Not):
        neg, node = True, strip_parens(node.this)
    if isinstance(node, exp.Exists):
        return "not exists" if neg else "exists"
    if isinstance(node, exp.In) and node.args.get("query") is not None:
        return "not in" if neg else "in"
    return None


def _aliases(select: exp.Select) -> dict[str, str]:
    """alias -> table of the plain tables in ``select``'s FROM / JOINs."""
    out = {}
    from_ = select.args.get("from_") or select.args.get("from")
    items = ([from_.this] if from_ is not None else []) + [j.this for j in select.args.get("joins") or []]
    for t in items:
        if isinstance(t, exp.Table):
            out[(t.alias or t.name).lower()] = t.name.lower()
    return out


def _semijoin(select: exp.Select, conjs: list, i: int, tables, dialect: str) -> SemiJoin:
    cond = strip_parens(conjs[i])
    mode = _subquery_kind(cond)
    if is_aggregate_query(select):
        raise unsupported("GROUP BY / aggregates over a subquery condition", cond)
    inner_node = strip_parens(cond.this) if isinstance(cond, exp.Not) else cond
    outer_aliases = _aliases(select)
    if mode in ("exists", "not exists"):
        sub = inner_node.this
        if isinstance(sub, exp.Subquery):
            sub = sub.this
        if not isinstance(sub, exp.Select):
            raise unsupported("EXISTS over a set operation", inner_node)
        outer_keys, right = _correlate(sub, outer_aliases, tables, inner_node)
    else:
        query = inner_node.args["query"]
        sub = query.this if isinstance(query, exp.Subquery) else query
        if not isinstance(sub, exp.Select):
            raise unsupported("IN over a set operation", inner_node)
        if len(sub.expressions) != 1:
            raise SQLError(f"the IN subquery must select one column, it selects {len(sub.expressions)}")
        if _outer_refs(sub, outer_aliases, tables):
            raise unsupported("correlated IN (SELECT …) (use EXISTS with equalities)", inner_node)
        outer_keys, right = [inner_node.this], sub.copy()
    left = select.copy()
    rest = [c.copy() for j, c in enumerate(conjs) if j != i]
    left.set("where", exp.Where(this=exp.and_(*rest)) if rest else None)
    distinct = left.args.get("distinct") is not None
    left.set("distinct", None)
    for k, key in enumerate(outer_keys):
        left.append("expressions", exp.alias_(key.copy(), f"__key{k}"))
    left_def = translate_select_tree(left, tables, dialect)
    right_def = translate_select_tree(right, tables, dialect)
    columns = definition_columns(left_def)[:-len(outer_keys) or None]
    return SemiJoin(mode, left_def, right_def, len(outer_keys), columns, distinct, user_text(cond, 120))


def _outer_refs(sub: exp.Select, outer_aliases: dict[str, str], tables) -> list[exp.Column]:
    inner = _aliases(sub)
    inner_cols = {c for t in inner.values() for c in tables.get(t, [])}
    out = []
    for col in sub.find_all(exp.Column):
        q = col.table.lower() if col.table else None
        if q is not None and q not in inner and q in outer_aliases or q is None and col.name.lower() not in inner_cols and any(
                col.name.lower() in tables.get(t, []) for t in outer_aliases.values()):
            out.append(col)
    return out


def _correlate(sub: exp.Select, outer_aliases, tables, node) -> tuple[list[exp.Expression], exp.Select]:
    """Split an EXISTS subquery's WHERE into ``inner = outer`` key pairs and inner conditions."""
    for key in ("group", "having", "limit", "order", "distinct"):
        if sub.args.get(key):
            raise unsupported(f"EXISTS subquery with {key.upper()}", node)
    outer_refs = {id(c) for c in _outer_refs(sub, outer_aliases, tables)}
    where = sub.args.get("where")
    outer_keys, inner_keys, rest = [], [], []
    for c in (_conjuncts(where.this) if where is not None else []):
        refs = [x for x in c.find_all(exp.Column) if id(x) in outer_refs]
        if not refs:
            rest.append(c.copy())
            continue
        c = strip_parens(c)
        if isinstance(c, exp.EQ):
            a, b = strip_parens(c.this), strip_parens(c.expression)
            if isinstance(a, exp.Column) and isinstance(b, exp.Column):
                if id(b) in outer_refs and id(a) not in outer_refs:
                    inner_keys.append(a.copy())
                    outer_keys.append(b.copy())
                    continue
                if id(a) in outer_refs and id(b) not in outer_refs:
                    inner_keys.append(b.copy())
                    outer_keys.append(a.copy())
                    continue
        raise unsupported("condition on the outer query inside EXISTS other than inner_column = outer_column", c)
    right = sub.copy()
    right.set("expressions", [exp.alias_(k, f"__key{i}") for i, k in enumerate(inner_keys)]
              or [exp.alias_(exp.Literal.number(1), "one")])
    right.set("where", exp.Where(this=exp.and_(*rest)) if rest else None)
    return outer_keys, right


# -- outer joins ---------------------------------------------------------------------------------
def _outer_join(select: exp.Select, tables, dialect: str):
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
    aliases = _aliases(select)
    first = (from_.this.alias or from_.this.name).lower()
    joined = (j.this.alias or j.this.name).lower()
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
    defs = [translate_select_tree(b, tables, dialect) for b in branches]
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
    for c in _conjuncts(j.args["on"]):
        cols = list(c.find_all(exp.Column))
        owners = {_owner(col, aliases, tables) for col in cols}
        if owners <= {nulled}:
            inner_conds.append(c.copy())
            continue
        cs = strip_parens(c)
        if isinstance(cs, exp.EQ) and isinstance(strip_parens(cs.this), exp.Column) \
                and isinstance(strip_parens(cs.expression), exp.Column):
            a, b = strip_parens(cs.this), strip_parens(cs.expression)
            oa, ob = _owner(a, aliases, tables), _owner(b, aliases, tables)
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
    if (from_.this.alias or from_.this.name).lower() == nulled:  # RIGHT JOIN: the joined table stays
        out.set(from_key, exp.From(this=out.args["joins"][0].this.copy()))
        out.set("joins", None)
    else:
        out.set("joins", [x for x in out.args["joins"] if (x.this.alias or x.this.name).lower() != nulled] or None)
    out.set("expressions", _null_items(out.expressions, nulled, aliases, tables, null_cols))
    where = out.args.get("where")
    conjs = [_nullify(c.copy(), nulled, aliases, tables) for c in (_conjuncts(where.this) if where else [])]
    conjs.append(exp.Not(this=exp.Exists(this=sub)))
    out.set("where", exp.Where(this=exp.and_(*conjs)))
    return out


def _owner(col: exp.Column, aliases: dict[str, str], tables) -> str | None:
    if col.table:
        return col.table.lower()
    owners = [a for a, t in aliases.items() if col.name.lower() in tables.get(t, [])]
    return owners[0] if len(owners) == 1 else None


def _nullify(node: exp.Expression, nulled: str, aliases, tables) -> exp.Expression:
    for col in list(node.find_all(exp.Column)):
        if _owner(col, aliases, tables) == nulled:
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
            a = node.table.lower()
            for c in tables.get(aliases.get(a, ""), []):
                out.append(exp.alias_(exp.Null(), c) if a == nulled else exp.column(c, a))
            continue
        name = item.alias if isinstance(item, exp.Alias) else (node.name if isinstance(node, exp.Column)
                                                                else user_text(node, 200))
        out.append(exp.alias_(_nullify(node.copy(), nulled, aliases, tables), name))
    return out



# -- nested views ------------------------------------------------------------------------------
def _derived(select: exp.Select, tables: dict[str, list[str]], dialect: str) -> Derived:
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
        alias = ((item.alias_or_name if isinstance(item, exp.Subquery) else "") or "sub").lower()
        relation = f"__nested_{alias}"
        while relation in extended:
            relation += "_"
        inner = translate_select_tree(body, tables, dialect)
        cols = [c.lower() for c in definition_columns(inner)]
        if len(set(cols)) != len(cols):
            raise SQLError(f"the subquery {alias!r} has duplicate column names ({', '.join(cols)}): "
                           "give its columns distinct aliases")
        extended[relation] = cols
        nested.append((relation, inner))
        item.replace(exp.Table(this=exp.to_identifier(relation), alias=exp.TableAlias(this=exp.to_identifier(alias))))
    if not nested:
        raise unsupported("this FROM item", from_)
    outer = translate_select_tree(select, extended, dialect)
    return Derived(nested, outer)


def _aggregate_over(select: exp.Select, tables: dict[str, list[str]], dialect: str) -> Derived:
    """GROUP BY over an outer join or a subquery condition: the join (with its WHERE) becomes a
    nested view of the columns the aggregation reads; the aggregation reads that view."""
    aliases = _aliases(select)
    from_ = select.args.get("from_") or select.args.get("from")
    if from_ is None:
        raise SQLError("an incremental view needs a FROM clause")
    if any(not isinstance(t, exp.Table) for t in [from_.this] + [j.this for j in select.args.get("joins") or []]):
        raise unsupported("GROUP BY over an outer join of a subquery", select)
    outer = select.copy()
    outer.set("expressions", [it if isinstance(it, exp.Alias) else exp.alias_(it, _item_name(it))
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
                owner = _owner(col, aliases, tables)
                if owner is None:
                    if col.table or any(col.name.lower() in tables.get(t, []) for t in aliases.values()):
                        raise SQLError(f"column {col.sql()!r} is ambiguous: qualify it with its table")
                    continue  # a SELECT alias (HAVING revenue > 10)
                name = used.setdefault((owner, col.name.lower()), f"{owner}__{col.name.lower()}")
                col.replace(exp.column(name, "q__"))
    inner = select.copy()
    for key in ("group", "having", "order", "limit", "distinct"):
        inner.set(key, None)
    inner.set("expressions", [exp.alias_(e, n) for n, e in computed]
              + [exp.alias_(exp.column(c, a), n) for (a, c), n in used.items()]
              or [exp.alias_(exp.Literal.number(1), "one__")])
    relation = "__nested_q__"
    inner_def = translate_select_tree(inner, tables, dialect)
    extended = dict(tables)
    extended[relation] = [c.lower() for c in definition_columns(inner_def)]
    from_key = "from_" if outer.args.get("from_") is not None else "from"
    outer.set(from_key, exp.From(this=exp.Table(this=exp.to_identifier(relation),
                                                alias=exp.TableAlias(this=exp.to_identifier("q__")))))
    outer.set("joins", None)
    outer.set("where", None)
    try:
        outer_def = translate_select_tree(outer, extended, dialect)
    except IVMError as e:  # speak of the user's columns, not of the nested view's
        text = re.sub(r"q__\.__g\d+", "the GROUP BY expression", str(e))
        raise type(e)(re.sub(r"q__\.(\w+?)__(\w+)", r"\1.\2", text)) from None
    return Derived([(relation, inner_def)], outer_def)


def _group_items(select: exp.Select, aliases, tables) -> list[exp.Expression]:
    """The GROUP BY items with positions and SELECT aliases resolved to their expressions."""
    group = select.args.get("group")
    if group is None:
        return []
    items = {it.alias.lower(): it.this for it in select.expressions if isinstance(it, exp.Alias)}
    out = []
    for g in group.expressions:
        g = strip_parens(g)
        if isinstance(g, exp.Literal) and not g.is_string and g.this.isdigit() \
                and 1 <= int(g.this) <= len(select.expressions):
            item = select.expressions[int(g.this) - 1]
            g = item.this if isinstance(item, exp.Alias) else item
        elif isinstance(g, exp.Column) and not g.table and g.name.lower() in items \
                and not any(g.name.lower() in tables.get(t, []) for t in aliases.values()):
            g = items[g.name.lower()]
        out.append(strip_parens(g))
    return out


def has_computed_group(select: exp.Select, tables) -> bool:
    """True if a GROUP BY item is an expression rather than a column."""
    return any(not isinstance(g, exp.Column) for g in _group_items(select, _aliases(select), tables))


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


def _item_name(item: exp.Expression) -> str:
    """The name DuckDB gives an unaliased SELECT item."""
    if isinstance(item, exp.Column):
        return item.name.lower()
    if isinstance(item, exp.Count) and isinstance(item.this, exp.Star):
        return "count_star()"
    return user_text(item, 200).lower()


# -- OR across tables ----------------------------------------------------------------------------
def _or_join(select: exp.Select, tables) -> tuple[exp.Select, list, int] | None:
    """``(select with inner-join ON moved to WHERE, conjuncts, i)`` when WHERE conjunct ``i`` is an
    OR one of whose disjuncts compares columns of two tables (a join condition), else None."""
    aliases = _aliases(select)
    if len(aliases) < 2:
        return None
    sel = select.copy()
    conds = []
    for j in sel.args.get("joins") or []:
        if j.args.get("on") is not None:
            conds.extend(c.copy() for c in _conjuncts(j.args["on"]))
            j.set("on", None)
    where = sel.args.get("where")
    conds += [c.copy() for c in _conjuncts(where.this)] if where is not None else []
    for i, c in enumerate(conds):
        if not isinstance(strip_parens(c), exp.Or):
            continue
        for d in _disjuncts(c):
            for conj in _conjuncts(d):
                conj = strip_parens(conj)
                if isinstance(conj, (exp.EQ, exp.LT, exp.LTE, exp.GT, exp.GTE)):
                    owners = {_owner(col, aliases, tables) for col in conj.find_all(exp.Column)}
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


def _or_union(select: exp.Select, conds: list, i: int, tables, dialect: str) -> SetOperation:
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
        branches.append(translate_select_tree(branch, tables, dialect))
    out = branches[0]
    for b in branches[1:]:
        out = SetOperation("union", not distinct, [out, b], definition_columns(branches[0]))
    return out
