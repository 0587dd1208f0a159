"""``compile_view``: SQL text -> GCQ -> plan -> an empty, ready-to-update :class:`View`."""

from __future__ import annotations

from collections.abc import Iterable

from .engine.aggregates import AggregateView
from .engine.nested import NestedView
from .engine.outerjoin import JoinView
from .engine.project import ProjectView
from .engine.semijoin import SemiJoinView
from .engine.union import SetOpView
from .engine.view import View
from .errors import CyclicQueryError, IVMError
from .planner import plan
from .query import GCQ, Derived, JoinQuery, JoinTree, Predicate, SemiJoin, SetOperation, WindowQuery
from .sql import translate_select
from .sql.constants import constant_inputs
from .identifiers import catalog_key, resolve
from .sql.params import HIDDEN, extract_params, literal_columns
from .sql.setops import translate_definition


def compile_view(sql: str, schema: dict, dialect: str = "duckdb", static: Iterable[str] = (),
                 params: Iterable[str] = (), epsilon: float | None = None) -> View | AggregateView | ProjectView | SetOpView | SemiJoinView | NestedView:
    """Compile a select–from–where(–group by–having) query into an empty incremental view.

    ``schema`` is ``{table: [columns]}`` or ``{table: {column: sql_type}}``; rows passed to
    the view's update methods are tuples in that column order.

    ``static`` names tables that are loaded once (paper 003): they may be loaded until the
    first update of a dynamic table, and the view is planned so that dynamic updates cost O(1)
    when the query allows it (C_lin / C_poly, see ``planner/static.py``). ``params`` names
    output columns that become input parameters (paper 004); placeholders ``col = $name``,
    ``$1``, ``?`` (and ranges ``col > $p``, ``BETWEEN $lo AND $hi``) in the SQL do the same.
    A parameterized view answers ``view.lookup(**inputs)`` (``planner/params.py``,
    ``engine/lookup.py``). ``epsilon`` (in [0, 1]) picks paper 004's heavy/light trade-off for a
    CQAP1 parameterized view: O(N^ε) amortized update, O(N^{1−ε}) lookup delay
    (``planner/heavylight.py``); without it such a view keeps a materialized answer map. Cost:
    parsing and planning, polynomial in the query's size; the view starts empty.

    Examples:
        >>> view = compile_view(
        ...     "SELECT * FROM trans S1, trans S2, trans L "
        ...     "WHERE S1.ts < S2.ts AND S2.ts < L.ts AND L.ts < S1.ts + 3600 "
        ...     "AND S1.acc = S2.acc AND S2.acc = L.acc "
        ...     "AND S1.amnt < 100 AND S2.amnt < 100 AND L.amnt > 400",
        ...     {"trans": ["id", "acc", "ts", "amnt"]})
        >>> view.insert("trans", (1, 7, 100, 50)); view.insert("trans", (2, 7, 200, 60))
        >>> view.diff({"trans": [((3, 7, 300, 500), 1)]})
        [((1, 7, 100, 50, 2, 7, 200, 60, 3, 7, 300, 500), 1)]
        >>> view.query_class, len(view)
        ('free-connex', 1)
    """
    if epsilon is not None:
        from .planner.heavylight import check_epsilon
        epsilon = check_epsilon(epsilon)
    rewritten, constants = constant_inputs(sql, dialect)
    if constants and epsilon is not None:
        raise IVMError("WITH (epsilon = …) is not supported with constant inputs (VALUES, SELECT 1, "
                       "generate_series) yet")
    if constants:  # SELECT 1, VALUES, generate_series(…): static tables loaded once
        return _with_constants(sql, rewritten, constants, schema, dialect, static, params)
    static = _static_names(static, schema, dialect)
    params = [str(p) for p in ([params] if isinstance(params, str) else params)]
    rewritten, placeholders, ranges = extract_params(sql, dialect)
    if (placeholders or ranges) and params:
        raise IVMError("give the parameters either as placeholders in the SQL or as params=, not both")
    if epsilon is not None and not (params or placeholders) or epsilon is not None and (static or ranges):
        raise IVMError("epsilon (paper 004's heavy/light trade-off) applies to views with equality input "
                       "parameters (WHERE col = $name) only, without static tables or range parameters")
    if not (static or params or placeholders or ranges):
        return _build(translate_definition(sql, schema, dialect=dialect), sql)
    if not isinstance(translate_definition(rewritten, schema, dialect=dialect), GCQ):
        raise IVMError("static tables and parameters are supported for select–project–join views only (not "
                       "yet with outer joins, set operations, subquery conditions, FROM subqueries, window "
                       "functions or ORDER BY … LIMIT)")
    consts: list = []
    if placeholders or ranges or params:  # SELECT 1 AS hit … WHERE r.a = $a: a Boolean lookup
        rewritten, consts = literal_columns(rewritten, dialect)
    gcq = translate_select(rewritten, schema, dialect=dialect)
    if gcq.aggregate is not None and placeholders and not static and gcq.projection is None:
        return _param_aggregate(gcq, sql, rewritten, placeholders, schema, dialect)
    if gcq.aggregate is not None and params:
        raise IVMError("params= with GROUP BY / aggregates is not supported; write the inputs as "
                       "placeholders (WHERE col = $name), which makes one group per input value")
    if gcq.aggregate is not None:
        raise IVMError("static tables and parameters are not supported with GROUP BY / aggregates yet")
    if gcq.projection is not None:
        raise IVMError("static tables and parameters are not supported with computed columns or "
                       "cross-table expression filters yet")
    if params or placeholders or ranges:
        if static:
            raise IVMError("static tables and parameters in one view are not supported yet")
        return _param_view(gcq, sql, params, placeholders, ranges, consts, epsilon)
    return _static_view(gcq, sql, static)


def _param_view(gcq, sql: str, params: list[str], placeholders: list[str],
                ranges: list[tuple[str, str, str]], consts: list | None = None,
                epsilon: float | None = None) -> View:
    from .engine.lookup import ConstantColumnsView, ParamView
    from .planner.heavylight import cyclic_param_reason
    from .planner.params import describe, plan_params

    params = [resolve(p, gcq.columns) for p in params]    # params=: names of output columns
    names = list(placeholders) if placeholders or ranges else params
    if len(set(names)) != len(names):
        raise IVMError(f"duplicate parameter names in {names}")
    range_cols = [col for _, _, col in ranges]
    range_vars = [gcq.output[gcq.columns.index(col)] for col in range_cols]
    if placeholders or ranges:
        hidden = [HIDDEN + p for p in placeholders]
        param_vars = [gcq.output[gcq.columns.index(h)] for h in hidden]
        keep = [i for i, c in enumerate(gcq.columns) if c not in hidden and c not in range_cols]
    else:
        param_vars = []
        for p in params:
            hits = [i for i, c in enumerate(gcq.columns) if c == p]
            if len(hits) != 1:
                raise IVMError(f"params=: {p!r} must name exactly one output column "
                               f"(columns: {', '.join(gcq.columns)})")
            param_vars.append(gcq.output[hits[0]])
        keep = [i for i, c in enumerate(gcq.columns) if c not in params]
    columns = [gcq.columns[i] for i in keep]
    for v in dict.fromkeys(param_vars + range_vars):  # `col = $p` never matches NULL: neither do rows()
        nn = Predicate(v, "is not null", None, None)
        if nn not in gcq.predicates:
            gcq.predicates.append(nn)
    pp = plan_params(gcq, names, param_vars, [gcq.output[i] for i in keep] + range_vars, range_vars)
    if epsilon is not None:
        return _heavy_light(pp, sql, names, param_vars, [gcq.output[i] for i in keep], columns, consts, epsilon)
    try:
        the_plan = pp.plan if pp.cqap0 else plan(pp.gcq)
    except CyclicQueryError as e:  # say which class the parameters gave, not only "cyclic"
        raise CyclicQueryError(
            f"{e} Parameter analysis (paper 004) with inputs {', '.join(names)}: {cyclic_param_reason(pp.gcq, pp)}",
            e.atoms) from None
    # the range parameters on the indexed column (planner/params.py); rows that differ only in a
    # compared column not among the view's columns are merged at lookup time
    indexed = [k for k, v in enumerate(range_vars) if v == pp.range_var]
    merge = not set(range_vars) <= {gcq.output[i] for i in keep}
    the_plan.notes = (the_plan.notes or []) + describe(
        pp, names, [(n, op, v) for (n, op, _), v in zip(ranges, range_vars)], merge)
    everything = names + [n for n, _, _ in ranges]
    if all(n.startswith("p") and n[1:].isdigit() for n in everything):
        everything.sort(key=lambda n: int(n[1:]))
    rng = [(n, op, len(columns) + k) for k, (n, op, _) in enumerate(ranges)]
    kw = {"eq_params": names, "ranges": rng, "indexed": indexed,
          "range_node": pp.range_node if pp.cqap0 else None, "merge": merge}
    if consts:
        return ConstantColumnsView(the_plan, sql, everything, columns, pp.cqap0, pp.copies if pp.cqap0 else None,
                                   constants=consts, **kw)
    return ParamView(the_plan, sql, everything, columns, pp.cqap0, pp.copies if pp.cqap0 else None, **kw)


def _heavy_light(pp, sql: str, names: list[str], param_vars: list[str], column_vars: list[str],
                 columns: list[str], consts: list | None, epsilon: float) -> View:
    """``WITH (epsilon = ε)``: 004's heavy/light construction (``engine/heavylight.py``)."""
    from .engine.heavylight import HeavyLightConstantView, HeavyLightView
    from .engine.lookup import ParamView
    from .planner.heavylight import plan_heavy_light
    from .planner.params import describe

    hl = plan_heavy_light(pp.gcq, names, param_vars, column_vars, epsilon)
    hp = hl.heavy
    heavy = ParamView(hp.plan, "", hp.gcq.columns[:len(hp.param_vars)], hl.heavy_columns, True, hp.copies)
    light = ParamView(plan(pp.gcq), "", names, columns, False)
    g = pp.gcq
    extra = [k for k in hl.key if k not in column_vars]  # a bound key (Boolean lookups): keep it in the
    if extra:                                             # base rows so that they stay free-connex (O(1))
        g = GCQ(g.atoms, g.predicates, list(g.output) + extra, list(g.columns) + [f"__hl_{k}" for k in extra],
                schema=g.schema, distinct=g.distinct)
    base = plan(g)
    base.notes = (base.notes or []) + describe(pp, names)[:2] + hl.notes()
    if consts:
        return HeavyLightConstantView(base, sql, names, columns, hl=hl, heavy=heavy, light=light, hidden=len(extra),
                                      constants=consts)
    return HeavyLightView(base, sql, names, columns, hl=hl, heavy=heavy, light=light, hidden=len(extra))


def _param_aggregate(gcq, sql: str, rewritten: str, placeholders: list[str], schema: dict, dialect: str):
    """``… WHERE col = $p GROUP BY …``: the aggregate grouped by the inputs too, read per
    input value (``engine/paramagg.py``)."""
    import sqlglot
    from sqlglot import exp

    from .engine.paramagg import ParamAggregateView

    if len(set(placeholders)) != len(placeholders):
        raise IVMError(f"duplicate parameter names in {placeholders}")
    original = sqlglot.parse_one(sql, read=dialect)
    if original.args.get("group") is None:  # a global aggregate: SQL gives its row for any input
        empty_sql = sqlglot.parse_one(rewritten, read=dialect)  # the query over no input: SQL's row
        empty_sql.set("expressions", [e for e in empty_sql.expressions
                                      if not (isinstance(e, exp.Alias) and e.alias.startswith(HIDDEN))])
        empty_sql.set("group", None)
        empty = list(_build(translate_definition(empty_sql.sql(dialect=dialect), schema, dialect=dialect),
                            "").rows())
    else:
        empty = []
    inner = AggregateView(gcq, sql, plan)
    order = [c for c in inner.columns if c.startswith(HIDDEN)]
    if [c[len(HIDDEN):] for c in order] != list(placeholders) or inner.columns[-len(order):] != order:
        raise IVMError("internal: the parameter columns of an aggregate view are not last")  # translator bug
    return ParamAggregateView(inner, list(placeholders), empty, sql)


def _with_constants(sql: str, rewritten: str, constants: list, schema: dict, dialect: str,
                    static: Iterable[str], params: Iterable[str]):
    from .engine.constant import ConstantInputs

    full = dict(schema) if isinstance(schema, dict) else {}
    for t in constants:
        full[t.name] = dict(zip(t.columns, t.types))
    names = [t.name for t in constants]
    static = [static] if isinstance(static, str) else list(static)
    try:
        inner = _compile_with(sql, rewritten, full, dialect, static, params, names)
    except IVMError as e:  # speak of what the user wrote, not of the constant tables
        text = str(e)
        for t in constants:
            text = text.replace(f" FROM {t.name}", "") if t.columns == ["__unit"] else text.replace(t.name, t.text)
        raise type(e)(text) from None
    return ConstantInputs(inner, constants, sql)


def _compile_with(sql: str, rewritten: str, full: dict, dialect: str, static: list, params, names: list):
    if static or params:
        inner = compile_view(rewritten, full, dialect, static=[*static, *names], params=params)
    else:
        d = translate_definition(rewritten, full, dialect=dialect)
        if isinstance(d, GCQ) and d.aggregate is None and d.projection is None and len(d.atoms) > 1:
            inner = _static_view(d, sql, _static_names(names, full, dialect))  # 003: constants are static tables
        else:
            inner = _build(d, sql)
    return inner


def _static_names(static: Iterable[str], schema: dict, dialect: str = "duckdb") -> frozenset[str]:
    if isinstance(static, str):
        static = [s for s in static.split(",")]
    known = {catalog_key(str(t), dialect) for t in schema} if isinstance(schema, dict) else set()
    names = frozenset(resolve(str(s).strip(), known) for s in static if str(s).strip())
    unknown = sorted(names - known)
    if unknown:
        raise IVMError(f"static table {unknown[0]!r} is not in the schema (tables: {', '.join(sorted(known))})")
    return names


def _static_view(gcq, sql: str, static: frozenset[str]) -> View:
    from .engine.static import StaticPart, StaticView
    from .planner.static import describe, plan_static

    sp = plan_static(gcq, static)
    if sp.plan is None:  # not tractable, or inequality joins: the usual plan, load-once tables
        try:
            main = plan(gcq)
        except CyclicQueryError as e:  # say what the static analysis found, not only "cyclic"
            names = ", ".join(sorted(static & {a.relation for a in gcq.atoms})) or "none"
            raise CyclicQueryError(
                f"{e} Static analysis (paper 003) with static tables {{{names}}}: {sp.klass}: {sp.reason}; "
                "only C_lin and C_poly views (well-behaved) may be cyclic, through static tables alone, "
                "and this one is not, so it has no generalized join tree", e.atoms) from None
        if main.core is None:
            main.static_atoms = sp.static_atoms
        parts = []
    else:
        main = sp.plan
        main.static_atoms = sp.static_atoms
        parts = [StaticPart(p.relation, View(plan(p.gcq)), " ⋈ ".join(a.alias for a in p.gcq.atoms))
                 for p in sp.parts if p.relation is not None]
    main.notes = (main.notes or []) + describe(sp, static & {a.relation for a in gcq.atoms}, gcq)
    return StaticView(main, sql, static, parts)


def _build(d: GCQ | SetOperation | SemiJoin | Derived, sql: str):
    if isinstance(d, Derived):  # FROM subqueries with GROUP BY / DISTINCT / …: nested views
        return NestedView([(rel, _build(n, "")) for rel, n in d.nested], _build(d.outer, sql), sql)
    if isinstance(d, SemiJoin):  # [NOT] EXISTS / [NOT] IN (SELECT …): per-key counts of the subquery
        return SemiJoinView(d.mode, _build(d.left, ""), _build(d.right, ""), d.nkeys, d.columns, d.distinct,
                            sql, d.text)
    if isinstance(d, WindowQuery):  # window functions, Top-N, ORDER BY … LIMIT
        return _window(d, sql)
    if isinstance(d, JoinQuery):  # outer joins over several tables: a tree of join nodes
        return ProjectView(_join_tree(d.tree), d.projection, sql)
    if isinstance(d, SetOperation):  # UNION / EXCEPT / INTERSECT [ALL] of two views
        return SetOpView(d.kind, d.all, _build(d.branches[0], ""), _build(d.branches[1], ""), d.columns, sql)
    if d.projection is not None:  # computed columns / residual filters on top of the join
        return ProjectView(View(plan(d), sql), d.projection, sql)
    if d.aggregate is not None:  # GROUP BY / aggregates: the join plus per-group state
        return AggregateView(d, sql, plan)
    return View(plan(d), sql)


def _join_tree(t: JoinTree) -> JoinView:
    from .engine.outerjoin import key_function
    from .engine.scalar import compile_condition, compile_scalar

    left = _join_tree(t.left) if isinstance(t.left, JoinTree) else _build(t.left, "")
    right = _join_tree(t.right) if isinstance(t.right, JoinTree) else _build(t.right, "")
    lpos = {v: i for i, v in enumerate(t.left_vars)}
    rpos = {v: i for i, v in enumerate(t.right_vars)}
    keys = []
    for exprs, cond, pos in ((t.left_keys, t.left_cond, lpos), (t.right_keys, t.right_cond, rpos)):
        keys.append(key_function([compile_scalar(e, pos, t.dialect) for e in exprs],
                                 compile_condition(cond, pos, t.dialect) if cond is not None else None))
    both = {v: i for i, v in enumerate(t.vars)}
    residual = compile_condition(t.residual, both, t.dialect) if t.residual is not None else None
    return JoinView(t.kind, left, right, (keys[0], keys[1]), residual, t.vars, t.text)


def _window(d: WindowQuery, sql: str):
    """The inner view, one WindowView per OVER clause, and the SELECT list on top: read lazily
    when it only reorders the columns and keeps every inner column (the rows stay distinct),
    else through a ProjectView (which keeps the count of each output row)."""
    from .engine.window import WindowView

    view = _build(d.inner, "")
    spec = d.projection
    width = len(view.columns)
    lazy = None
    if not spec.residual and not spec.distinct and all(e[0] == "var" for e in spec.exprs):
        picked = [d.names.index(e[1]) for e in spec.exprs]
        if set(range(width)) <= set(picked):
            lazy = picked
    end = width
    for i, level in enumerate(d.levels):
        end += len(level.funcs)
        last = i == len(d.levels) - 1
        view = WindowView(view, level, d.names[:end], spec.dialect, output=lazy if last else None,
                          labels=spec.columns if last and lazy is not None else None, sql=sql if last else "")
    if lazy is not None:
        return view
    return ProjectView(view, spec, sql)
