"""A SELECT → a definition: dispatch to the rewrites, and subquery conditions as semi-joins.

:func:`translate_select_tree` sends FROM subqueries that cannot be inlined to
:mod:`.nesting`, GROUP BY over shapes a grouped view cannot read to :mod:`.nesting`, outer
joins to :mod:`.outerjoin`, ORs that join tables to :mod:`.disjunction`, and reads
``[NOT] EXISTS (SELECT … FROM B WHERE B.x = outer.y AND <B only>)`` and
``x [NOT] IN (SELECT b FROM B …)`` WHERE conjuncts as a :class:`SemiJoin` of the outer query
(its columns plus the key columns) and the subquery's keys. What is not of these shapes is
refused in the user's terms.
"""

from __future__ import annotations

from sqlglot import exp

from ..errors import SQLError, UnsupportedSQLError
from ..query import SemiJoin
from .aggregates import is_aggregate_query
from .disjunction import or_join, or_union
from .jointree import flatten_inner, join_tree
from .window import has_window, order_limit, top_n, window_query
from .literals import strip_parens, unsupported, user_text
from .nesting import aggregate_over, derived, has_computed_group
from .outerjoin import outer_join
from .parse import has_nested_from, inline_nested
from .shapes import conjuncts, definition_columns, has_outer_join, has_paren_join, subquery_kind, table_aliases
from .translate import translate_tree

__all__ = ["definition_columns", "translate_select_tree"]


def translate_select_tree(select: exp.Select, tables: dict[str, list[str]], dialect: str):
    """A SELECT with possibly subquery conditions / one outer join → a definition."""
    for item in select.expressions:
        sub = item.find(exp.Subquery)
        if sub is not None:
            raise unsupported(f"{_scalar_kind(sub, select, tables)} in the SELECT list (join its table "
                              "in the view's FROM and aggregate, or define it as a view of its own)", sub)
    if has_nested_from(select):
        select = inline_nested(select, tables, dialect, strict=False)
        if has_nested_from(select):
            topn = top_n(select, tables, dialect, translate_select_tree)
            if topn is not None:  # SELECT … FROM (… ROW_NUMBER() OVER (…) AS rn …) WHERE rn <= k
                return topn
            return derived(select, tables, dialect, translate_select_tree)  # aggregated / DISTINCT subqueries
    if select.args.get("order") is not None or select.args.get("limit") is not None \
            or select.args.get("offset") is not None:
        return order_limit(select, tables, dialect, translate_select_tree)
    if has_window(select):
        return window_query(select, tables, dialect, translate_select_tree)
    if has_paren_join(select) and not has_outer_join(select):
        select = flatten_inner(select, tables, dialect)  # inner joins are associative
    outer = has_outer_join(select)
    where = select.args.get("where")
    has_sub = where is not None and any(subquery_kind(c) is not None for c in conjuncts(where.this))
    or_join_at = None if outer or has_sub else or_join(select, tables)
    if (has_sub or or_join_at is not None or outer or has_computed_group(select, tables)) \
            and is_aggregate_query(select):
        return aggregate_over(select, tables, dialect, translate_select_tree)
    if or_join_at is not None:
        return or_union(*or_join_at, tables, dialect, translate_select_tree)
    if outer:
        if not has_paren_join(select):
            try:  # one outer join: the inner join plus the unmatched rows (no state of its own)
                return outer_join(select, tables, dialect, translate_select_tree)
            except UnsupportedSQLError:
                pass  # several outer joins, or conditions only a join tree handles
        return join_tree(select, tables, dialect, translate_select_tree)
    where = select.args.get("where")
    if where is not None:
        conjs = list(conjuncts(where.this))
        for i, c in enumerate(conjs):
            if subquery_kind(c) is not None:
                return _semijoin(select, conjs, i, tables, dialect)
        for c in conjs:
            sub = c.find(exp.Exists, exp.Subquery)
            if sub is not None:
                what = _scalar_kind(sub, select, tables) if isinstance(sub, exp.Subquery) else "subquery"
                raise unsupported(f"{what} inside OR/NOT/an expression (only as a WHERE conjunct: "
                                  "[NOT] EXISTS (…), x [NOT] IN (SELECT …))", sub)
    return translate_tree(select, tables, dialect)


# -- [NOT] EXISTS / [NOT] IN -----------------------------------------------------------------
def _semijoin(select: exp.Select, conjs: list, i: int, tables, dialect: str) -> SemiJoin:
    cond = strip_parens(conjs[i])
    mode = subquery_kind(cond)
    if is_aggregate_query(select):
        raise unsupported("GROUP BY / aggregates over a subquery condition", cond)
    inner_node = strip_parens(cond.this) if isinstance(cond, exp.Not) else cond
    outer_aliases = table_aliases(select)
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


def _scalar_kind(sub: exp.Subquery, select: exp.Select, tables) -> str:
    """"correlated subquery" when ``sub`` reads columns of the outer query, else "scalar subquery"."""
    inner = sub.this
    if isinstance(inner, exp.Select) and _outer_refs(inner, table_aliases(select), tables):
        return "correlated subquery"
    return "scalar subquery"


def _outer_refs(sub: exp.Select, outer_aliases: dict[str, str], tables) -> list[exp.Column]:
    inner = table_aliases(sub)
    inner_cols = {c for t in inner.values() for c in tables.get(t, [])}
    out = []
    for col in sub.find_all(exp.Column):
        q = col.table if col.table else None
        if q is not None:
            outer = q not in inner and q in outer_aliases
        else:  # unqualified: the subquery's own tables first
            name = col.name
            outer = name not in inner_cols and any(name in tables.get(t, []) for t in outer_aliases.values())
        if outer:
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
    for c in (conjuncts(where.this) if where is not None else []):
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
