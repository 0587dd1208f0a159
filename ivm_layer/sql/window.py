"""Window functions, Top-N and ``ORDER BY … LIMIT`` → :class:`~ivm_layer.query.WindowQuery`.

A SELECT with window functions is split in two. The *inner* query is the same SELECT (FROM,
WHERE, GROUP BY, HAVING) listing only what the windows and the SELECT list read — the columns
(for a grouped query: the group columns and the aggregates) and the PARTITION BY / ORDER BY /
argument expressions — and is translated like any view. The windows (``ROW_NUMBER``, ``RANK``,
``DENSE_RANK``, ``LAG``, ``LEAD``, ``SUM``/``COUNT``/``AVG``/``MIN``/``MAX`` over ``ROWS`` or
``RANGE UNBOUNDED PRECEDING`` or the whole partition) are grouped by OVER clause into *levels*
(:class:`ivm_layer.engine.window.WindowView` each); the SELECT list and any filter on top read
the inner columns and the window values.

Top-N: ``SELECT … FROM (SELECT …, ROW_NUMBER() OVER (…) AS rn FROM …) s WHERE rn <= k`` (also
``rank``/``dense_rank``, ``<``, ``=``, ``BETWEEN``, and DuckDB's ``QUALIFY``) puts the bound on
the level itself, which then stops at position k; ``ORDER BY … LIMIT k [OFFSET m]`` is a
``ROW_NUMBER() OVER (ORDER BY …)`` bounded to ``m+1 … m+k``.
"""

from __future__ import annotations

import math
from decimal import Decimal

from sqlglot import exp

from ..errors import InternalError, IVMError, SQLError
from ..query import RANKING, ProjectionSpec, WindowFunc, WindowQuery, WindowSpec, tree_vars
from .aggregates import is_aggregate_query
from .jointree import read_from, visible
from .literals import NOT_CONST, constant, position, strip_parens, unsupported, user_text
from .scalar import ScalarTranslator
from .shapes import conjuncts, definition_columns

_FUNCS = {exp.RowNumber: "row_number", exp.Rank: "rank", exp.DenseRank: "dense_rank", exp.Lag: "lag",
          exp.Lead: "lead", exp.Sum: "sum", exp.Count: "count", exp.Avg: "avg", exp.Min: "min", exp.Max: "max"}
_SUPPORTED = ("ROW_NUMBER, RANK, DENSE_RANK, LAG, LEAD, and SUM/COUNT/AVG/MIN/MAX over ROWS or RANGE "
              "BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW or over the whole partition")
_DROP = ("distinct", "order", "limit", "offset", "qualify", "windows")


def has_window(select: exp.Select) -> bool:
    """Window functions in the SELECT list, QUALIFY (or, wrongly, WHERE / GROUP BY / HAVING)."""
    if select.args.get("qualify") is not None or any(it.find(exp.Window) is not None for it in select.expressions):
        return True
    return any(select.args.get(k) is not None and select.args[k].find(exp.Window) is not None
               for k in ("where", "group", "having"))


def _check_placement(select: exp.Select) -> None:
    for key in ("where", "group", "having"):
        node = select.args.get(key)
        w = node.find(exp.Window) if node is not None else None
        if w is not None:
            raise unsupported(f"window function in {key.upper()} (filter on it in an outer query: "
                              "SELECT … FROM (SELECT …, ROW_NUMBER() OVER (…) AS rn …) s WHERE rn <= k)", w)


class _Builder:
    """One SELECT with window functions (see the module docstring)."""

    def __init__(self, select: exp.Select, tables, dialect: str, translate):
        self.select = select
        self.tables = tables
        self.dialect = dialect
        self.translate = translate
        self.aggregating = is_aggregate_query(select)
        self.hidden: dict[str, int] = {}  # SQL text of an inner item -> its position
        self.items: list[exp.Expression] = []
        self.windows: list[tuple[tuple, WindowFunc, str]] = []  # (level key, function, var name)
        self.named = {w.this.name: w for w in select.args.get("windows") or []
                      if isinstance(w.this, exp.Identifier)}
        self.scope = _scope(select, tables, dialect)

    # -- pieces -------------------------------------------------------------------------------
    def hide(self, node: exp.Expression) -> int:
        node = self._qualify(node)
        text = node.sql(dialect=self.dialect)
        if text not in self.hidden:
            self.hidden[text] = len(self.items)
            self.items.append(node)
        return self.hidden[text]

    def _qualify(self, node: exp.Expression) -> exp.Expression:
        node = strip_parens(node).copy()
        if self.scope is None:
            return node
        resolve = self.scope
        if isinstance(node, exp.Column) and not node.table:
            return _resolved(node, resolve)
        for col in list(node.find_all(exp.Column)):
            if not col.table and not isinstance(col.this, exp.Star):
                col.replace(_resolved(col, resolve))
        return node

    def window(self, w: exp.Window) -> exp.Column:
        base = self.named.get(w.alias) if isinstance(w.args.get("alias"), exp.Identifier) else None
        if isinstance(w.args.get("alias"), exp.Identifier) and base is None:
            raise SQLError(f"unknown window {w.alias!r}{position(w)}", sqlstate="42704")
        partition = w.args.get("partition_by") or (base.args.get("partition_by") if base is not None else None) or []
        order = w.args.get("order") or (base.args.get("order") if base is not None else None)
        spec = w.args.get("spec") or (base.args.get("spec") if base is not None else None)
        fn = w.this
        if isinstance(fn, (exp.Filter, exp.IgnoreNulls, exp.RespectNulls)):
            raise unsupported("FILTER / IGNORE NULLS in a window function", w)
        name = _FUNCS.get(type(fn))
        if name is None:
            raise unsupported(f"window function {user_text(fn, 40)} (supported: {_SUPPORTED})", w)
        pos = tuple(self.hide(p) for p in partition)
        ords = []
        for o in (order.expressions if order is not None else []):
            desc = bool(o.args.get("desc"))
            nf = o.args.get("nulls_first")
            if nf is None:
                nf = desc if self.dialect == "postgres" else False
            ords.append((self.hide(o.this), desc, bool(nf)))
        arg, offset, default = None, 1, None
        if name in ("lag", "lead"):
            arg = self.hide(fn.this)
            if fn.args.get("offset") is not None:
                offset = constant(fn.args["offset"])
                if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
                    raise unsupported(f"{name.upper()} offset that is not a non-negative integer constant", w)
            if fn.args.get("default") is not None:
                default = constant(fn.args["default"], decimals=True)
                if default is NOT_CONST:
                    raise unsupported(f"{name.upper()} default that is not a constant", w)
        elif name not in RANKING:
            inner = fn.this
            if isinstance(inner, exp.Distinct):
                raise unsupported(f"{name.upper()}(DISTINCT …) OVER (…)", w)
            if not (name == "count" and (inner is None or isinstance(inner, exp.Star))):
                if inner is None:
                    raise SQLError(f"{name.upper()} needs an argument{position(w)}")
                arg = self.hide(inner)
        frame = self._frame(name, spec, bool(ords), w)
        text = user_text(w, 100)
        var = f"__win{len(self.windows)}"
        self.windows.append(((pos, tuple(ords)), WindowFunc(name, arg, frame, offset, default, text), var))
        return exp.column(var)

    @staticmethod
    def _frame(name: str, spec, ordered: bool, w) -> str:
        if name in RANKING + ("lag", "lead"):
            return "rows"
        if spec is None:
            return "range" if ordered else "partition"
        kind = str(spec.args.get("kind") or "").upper()
        start = str(spec.args.get("start") or "").upper()
        start_side = str(spec.args.get("start_side") or "").upper()
        end = str(spec.args.get("end") or "CURRENT ROW").upper()
        end_side = str(spec.args.get("end_side") or "").upper()
        if kind not in ("ROWS", "RANGE") or start != "UNBOUNDED" or start_side != "PRECEDING" \
                or spec.args.get("exclude"):
            raise unsupported(f"window frame {user_text(spec, 80)} (supported: {_SUPPORTED})", w)
        if end == "UNBOUNDED" and end_side == "FOLLOWING":
            return "partition"
        if end != "CURRENT ROW":
            raise unsupported(f"window frame {user_text(spec, 80)} (supported: {_SUPPORTED})", w)
        if not ordered:
            return "partition" if kind == "RANGE" else "rows"
        return kind.lower()

    def rewrite(self, node: exp.Expression) -> exp.Expression:
        """``node`` over the inner items (``__h<i>``) and the window values (``__win<j>``)."""
        def windows(n):
            return self.window(n) if isinstance(n, exp.Window) else n

        def leaves(n):
            if isinstance(n, exp.Column) and n.name.startswith("__win") and not n.table:
                return n
            if self.aggregating and isinstance(n, exp.AggFunc):
                return exp.column(f"__h{self.hide(n)}")
            if isinstance(n, exp.Column) and not isinstance(n.this, exp.Star):
                return exp.column(f"__h{self.hide(n)}")
            return n
        return node.copy().transform(windows).transform(leaves)

    # -- the query ----------------------------------------------------------------------------
    def run(self) -> WindowQuery:
        sel = self.select
        _check_placement(sel)
        items, columns = [], []
        for item in sel.expressions:
            node = item.this if isinstance(item, exp.Alias) else item
            if isinstance(node, exp.Star) or (isinstance(node, exp.Column) and isinstance(node.this, exp.Star)):
                for n, e in self._star(node):
                    items.append(self.rewrite(e))
                    columns.append(n)
                continue
            items.append(self.rewrite(node))
            columns.append(item.alias if isinstance(item, exp.Alias) else
                           node.name if isinstance(node, exp.Column) else user_text(node, 200))
        qualify = sel.args.get("qualify")
        conds = [self.rewrite(c) for c in conjuncts(qualify.this)] if qualify is not None else []
        if not self.items:
            self.hide(exp.Literal.number(1))  # the rows still count
        inner = sel.copy()
        for key in _DROP:
            inner.set(key, None)
        # named by their SQL (EXPLAIN shows what the windows read); positions are what count
        inner.set("expressions", [exp.alias_(e, _label(e, i, self.dialect), quoted=True)
                                  for i, e in enumerate(self.items)])
        inner_def = self.translate(inner, self.tables, self.dialect)
        if len(definition_columns(inner_def)) != len(self.items):
            raise InternalError("internal: the inner query of a window view has an unexpected width")
        # levels: one per OVER clause, in order of first use
        order: list[tuple] = []
        for key, _f, _v in self.windows:
            if key not in order:
                order.append(key)
        levels = []
        names = [f"__h{i}" for i in range(len(self.items))]
        for key in order:
            fs = [(f, v) for k, f, v in self.windows if k == key]
            levels.append((WindowSpec(key[0], key[1], tuple(f for f, _ in fs), None, _over_text(fs[0][0].text)),
                           [v for _, v in fs]))
        translator = ScalarTranslator(lambda c: c.name, self.dialect)
        exprs = [translator.expr(e) for e in items]
        residual = [translator.expr(c) for c in conds]
        texts = [user_text(c, 120) for c in conjuncts(qualify.this)] if qualify is not None else []
        spec = ProjectionSpec(exprs, columns, residual, texts, distinct=sel.args.get("distinct") is not None,
                              dialect=self.dialect)
        wq = WindowQuery(inner_def, [lv for lv, _ in levels], names + [v for _, vs in levels for v in vs], spec)
        return place_caps(wq)

    def _star(self, node: exp.Expression) -> list[tuple[str, exp.Expression]]:
        try:
            tree = read_from(self.select, self.tables)
        except IVMError:
            raise unsupported("* with window functions over a FROM subquery (list the columns)", node) from None
        if isinstance(node, exp.Column):  # t.*
            a = node.table
            names = {x for x in _aliases(tree)}
            if a not in names:
                raise SQLError(f"unknown table or alias {node.table!r}{position(node)}", sqlstate="42P01")
            table = _aliases(tree)[a]
            return [(c, exp.column(c, a)) for c in self.tables[table]]
        return [(n, _sql_of(e)) for n, e in visible(tree, self.tables, self.dialect)]


def _label(e: exp.Expression, i: int, dialect: str) -> str:
    text = user_text(e, 60)
    return text if text and not text.startswith("__") else f"__h{i}"


def _aliases(tree) -> dict[str, str]:
    from .jointree import leaves

    return {x.alias: x.table for x in leaves(tree)}


def _sql_of(e: tuple) -> exp.Expression:
    if e[0] == "var":
        alias, name = e[1].split(".", 1)
        return exp.column(name, alias)
    return exp.Coalesce(this=_sql_of(e[2][0]), expressions=[_sql_of(x) for x in e[2][1:]])


def _scope(select: exp.Select, tables, dialect: str):
    """A resolver of unqualified columns of a plain FROM (tables and joins), or None."""
    from .jointree import leaves, resolver

    try:
        tree = read_from(select, tables)
    except IVMError:
        return None
    aliases = {x.alias: x.table for x in leaves(tree)}
    return resolver(visible(tree, tables, dialect), set(aliases), aliases, tables)


def _resolved(col: exp.Column, resolve) -> exp.Expression:
    try:
        e = resolve(col)
    except IVMError:
        return col  # a SELECT alias or an error the inner query reports in its own terms
    return _sql_of(e)


def _over_text(text: str) -> str:
    i = text.upper().find(" OVER ")
    return text[i + 1:] if i >= 0 else text


# -- Top-N ------------------------------------------------------------------------------------
def window_query(select: exp.Select, tables, dialect: str, translate) -> WindowQuery:
    """A SELECT with window functions in its SELECT list (or a QUALIFY clause)."""
    return _Builder(select, tables, dialect, translate).run()


def _ranking_vars(wq: WindowQuery) -> dict[str, tuple[int, int]]:
    """var name -> (level, function index) of the ranking functions."""
    out = {}
    base = len(wq.names) - sum(len(lv.funcs) for lv in wq.levels)
    i = base
    for li, lv in enumerate(wq.levels):
        for fi, f in enumerate(lv.funcs):
            if f.func in RANKING:
                out[wq.names[i]] = (li, fi)
            i += 1
    return out


def _bound(tree: tuple, ranks: dict) -> tuple[str, float, float] | None:
    """``rn <= k`` and friends as (var, lo, hi), or None."""
    if not isinstance(tree, tuple) or len(tree) != 3 or tree[0] not in ("<", "<=", "=", ">", ">="):
        return None
    op, a, b = tree
    if b[0] == "var" and a[0] == "const":
        a, b = b, a
        op = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}[op]
    if a[0] != "var" or a[1] not in ranks or b[0] != "const":
        return None
    c = b[1]
    if isinstance(c, bool) or not isinstance(c, (int, float, Decimal)) or (isinstance(c, float) and math.isnan(c)):
        return None
    if op == "<=":
        return a[1], -math.inf, math.floor(c)
    if op == "<":
        return a[1], -math.inf, math.ceil(c) - 1
    if op == ">=":
        return a[1], math.ceil(c), math.inf
    if op == ">":
        return a[1], math.floor(c) + 1, math.inf
    if c != int(c):
        return a[1], 1, 0  # never
    return a[1], int(c), int(c)


def _split_and(tree: tuple) -> list[tuple]:
    if isinstance(tree, tuple) and tree and tree[0] == "and":
        return _split_and(tree[1]) + _split_and(tree[2])
    return [tree]


def place_caps(wq: WindowQuery) -> WindowQuery:
    """Move bounds on one ranking value out of the residual filter onto its level (then the last
    level), so that the level stops at position k."""
    ranks = _ranking_vars(wq)
    spec = wq.projection
    found: dict[str, list] = {}
    rest, texts = [], []
    given = list(spec.texts or [])
    given += [""] * (len(spec.residual) - len(given))
    pieces = [(c, t) for cond, t in zip(spec.residual, given) for c in _split_and(cond)]
    for cond, text in pieces:
        b = _bound(cond, ranks)
        if b is not None and (not found or b[0] in found):
            found.setdefault(b[0], []).append(b)
            continue
        rest.append(cond)
        texts.append(text)
    if not found:
        return wq
    var, bounds = next(iter(found.items()))
    lo = max([1] + [b[1] for b in bounds])
    hi = min(b[2] for b in bounds)
    li, fi = ranks[var]
    levels = list(wq.levels)
    lv = levels[li]
    capped = WindowSpec(lv.partition, lv.order, lv.funcs, (fi, int(lo), hi if hi == math.inf else int(hi)), lv.text)
    # the capped level goes last (its bound filters the final rows; the others see every row)
    base = len(wq.names) - sum(len(x.funcs) for x in levels)
    starts, i = [], base
    for x in levels:
        starts.append(i)
        i += len(x.funcs)
    level_names = [wq.names[s:s + len(x.funcs)] for s, x in zip(starts, levels)]
    order = [j for j in range(len(levels)) if j != li] + [li]
    new_levels = [capped if j == li else levels[j] for j in order]
    names = wq.names[:base] + [n for j in order for n in level_names[j]]
    projection = ProjectionSpec(spec.exprs, spec.columns, rest, texts, spec.distinct, spec.dialect)
    return WindowQuery(wq.inner, new_levels, names, projection)


def _substitute(tree, subst: dict[str, tuple]):
    if isinstance(tree, tuple):
        if len(tree) == 2 and tree[0] == "var" and tree[1] in subst:
            return subst[tree[1]]
        return tuple(_substitute(x, subst) for x in tree)
    return tree


def top_n(select: exp.Select, tables, dialect: str, translate) -> WindowQuery | None:
    """``SELECT … FROM (SELECT … window functions …) s WHERE …``: the outer query folded into the
    window query (bounds on a ranking value become the level's Top-N bound); None for any other
    shape (it is then a nested view)."""
    from_ = select.args.get("from_") or select.args.get("from")
    if from_ is None or select.args.get("joins") or is_aggregate_query(select) or has_window(select):
        return None
    sub = from_.this
    if not isinstance(sub, exp.Subquery) or not isinstance(sub.this, exp.Select) or not has_window(sub.this):
        return None
    if sub.this.args.get("distinct") is not None or any(select.args.get(k) for k in ("order", "limit", "offset")):
        return None
    inner = window_query(sub.this, tables, dialect, translate)
    alias = sub.alias or ""
    cols = list(inner.projection.columns)
    subst = {f"\0s{i}": e for i, e in enumerate(inner.projection.exprs)}

    def column(col: exp.Column) -> str:
        if col.table and col.table != alias:
            raise SQLError(f"unknown table or alias {col.table!r}{position(col)}", sqlstate="42P01")
        hits = [i for i, c in enumerate(cols) if c == col.name]
        if not hits:
            raise SQLError(f"unknown column {col.name!r}{position(col)}", sqlstate="42703")
        if len(hits) > 1:
            raise SQLError(f"column {col.name!r} is ambiguous{position(col)}")
        return f"\0s{hits[0]}"

    tr = ScalarTranslator(column, dialect)
    exprs, columns = [], []
    for item in select.expressions:
        node = item.this if isinstance(item, exp.Alias) else item
        if isinstance(node, exp.Star) or (isinstance(node, exp.Column) and isinstance(node.this, exp.Star)):
            exprs += list(inner.projection.exprs)
            columns += list(inner.projection.columns)
            continue
        exprs.append(_substitute(tr.expr(node), subst))
        columns.append(item.alias if isinstance(item, exp.Alias) else
                       node.name if isinstance(node, exp.Column) else user_text(node, 200))
    where = select.args.get("where")
    residual = list(inner.projection.residual)
    texts = list(inner.projection.texts or [""] * len(residual))
    for c in conjuncts(where.this) if where is not None else []:
        if c.find(exp.Exists, exp.Subquery) is not None:
            return None
        residual.append(_substitute(tr.expr(c), subst))
        texts.append(user_text(c, 120))
    if any("\0" in v for e in exprs + residual for v in tree_vars(e)):
        raise InternalError("internal: an outer column of a Top-N query was not resolved")
    spec = ProjectionSpec(exprs, columns, residual, texts, select.args.get("distinct") is not None, dialect)
    return place_caps(WindowQuery(inner.inner, inner.levels, inner.names, spec))


def order_limit(select: exp.Select, tables, dialect: str, translate) -> WindowQuery:
    """``… ORDER BY keys LIMIT k [OFFSET m]``: a ROW_NUMBER() OVER (ORDER BY keys) bounded to
    ``m+1 … m+k`` (the view holds those rows; their order is not kept)."""
    order, limit, offset = select.args.get("order"), select.args.get("limit"), select.args.get("offset")
    if order is None:
        raise unsupported("LIMIT / OFFSET without ORDER BY (which rows it keeps is unspecified)", limit or offset)
    k = _count(limit, "LIMIT") if limit is not None else None
    m = _count(offset, "OFFSET") if offset is not None else 0
    if k is None and not m:
        raise unsupported("ORDER BY inside an incremental view (a view is an unordered bag: order or limit "
                          "when you read it)", order)
    items = list(select.expressions)
    aliases = {it.alias: it.this for it in items if isinstance(it, exp.Alias)}
    keys = []
    for o in order.expressions:
        e = strip_parens(o.this)
        if isinstance(e, exp.Literal) and not e.is_string and e.this.isdigit():
            n = int(e.this)
            if not 1 <= n <= len(items):
                raise SQLError(f"ORDER BY position {n} is not in the select list{position(o)}")
            item = items[n - 1]
            e = item.this if isinstance(item, exp.Alias) else item
        elif isinstance(e, exp.Column) and not e.table and e.name in aliases:
            e = aliases[e.name]
        key = o.copy()
        key.set("this", e.copy())
        keys.append(key)
    distinct = select.args.get("distinct") is not None
    if distinct:
        return _distinct_order_limit(select, keys, k, m, tables, dialect, translate)
    if any(isinstance(it, exp.Star) or (isinstance(it, exp.Column) and isinstance(it.this, exp.Star))
           for it in (i.this if isinstance(i, exp.Alias) else i for i in items)) and read_from_or_none(select, tables) is None:
        raise unsupported("SELECT * … ORDER BY … LIMIT over a FROM subquery (list the columns)", select)
    new = select.copy()
    for key in ("order", "limit", "offset"):
        new.set(key, None)
    rn = exp.Window(this=exp.RowNumber(), order=exp.Order(expressions=[x.copy() for x in keys]), over="OVER")
    new.append("expressions", exp.alias_(rn, "__rn", quoted=True))
    wq = window_query(new, tables, dialect, translate)
    spec = wq.projection
    rn_tree = spec.exprs[-1]
    bound = ("and", (">=", rn_tree, ("const", m + 1)), ("<=", rn_tree, ("const", m + k))) if k is not None \
        else (">=", rn_tree, ("const", m + 1))
    projection = ProjectionSpec(spec.exprs[:-1], spec.columns[:-1], list(spec.residual) + [bound],
                                list(spec.texts or [""] * len(spec.residual)) + ["LIMIT"], spec.distinct, spec.dialect)
    return place_caps(WindowQuery(wq.inner, wq.levels, wq.names, projection))


def read_from_or_none(select: exp.Select, tables):
    try:
        return read_from(select, tables)
    except IVMError:
        return None


def _distinct_order_limit(select, keys, k, m, tables, dialect: str, translate) -> WindowQuery:
    """``SELECT DISTINCT … ORDER BY … LIMIT``: the DISTINCT rows ranked (ORDER BY must name
    select-list expressions, as in PostgreSQL)."""
    items = list(select.expressions)
    texts = [(it.this if isinstance(it, exp.Alias) else it).sql(dialect=dialect) for it in items]
    inner = select.copy()
    for key in ("order", "limit", "offset"):
        inner.set(key, None)
    inner_def = translate(inner, tables, dialect)
    cols = definition_columns(inner_def)
    order = []
    for o in keys:
        text = o.this.sql(dialect=dialect)
        if text not in texts:
            raise SQLError(f"for SELECT DISTINCT, ORDER BY expressions must appear in the select list "
                           f"({user_text(o.this)}){position(o)}")
        desc = bool(o.args.get("desc"))
        nf = o.args.get("nulls_first")
        if nf is None:
            nf = desc if dialect == "postgres" else False
        order.append((texts.index(text), desc, bool(nf)))
    f = WindowFunc("row_number", None, "rows", text="ORDER BY … LIMIT")
    hi = m + k if k is not None else math.inf
    level = WindowSpec((), tuple(order), (f,), (0, m + 1, hi), "ORDER BY … LIMIT")
    names = [f"__h{i}" for i in range(len(cols))] + ["__rn"]
    spec = ProjectionSpec([("var", f"__h{i}") for i in range(len(cols))], list(cols), [], [], False, dialect)
    return WindowQuery(inner_def, [level], names, spec)


def _count(node: exp.Expression, what: str) -> int:
    e = node.args.get("expression") if isinstance(node, (exp.Limit, exp.Offset)) else node
    v = constant(e) if e is not None else NOT_CONST
    if v is NOT_CONST or not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise unsupported(f"{what} that is not a non-negative integer constant", node)
    return v
