"""``compile_view``: SQL text -> GCQ -> plan -> an empty, ready-to-update :class:`View`."""

from __future__ import annotations

from typing import Iterable

from .engine.aggregates import AggregateView
from .engine.view import View
from .errors import IVMError
from .planner import plan
from .sql import translate_select


def compile_view(sql: str, schema: dict, dialect: str = "duckdb", static: Iterable[str] = (),
                 params: Iterable[str] = ()) -> View | AggregateView:
    """Compile a select–from–where(–group by–having) query into an empty incremental view.

    ``schema`` is ``{table: [columns]}`` or ``{table: {column: sql_type}}``; rows passed to
    the view's update methods are tuples in that column order. ``static`` (tables that never
    change) and ``params`` (input parameters of a parameterized view) are reserved for the
    extensions of papers 003/004 and must be empty for now.
    """
    static = _static_names(static, schema)
    if tuple(params):
        raise IVMError("parameterized views are not supported yet: pass params=()")
    gcq = translate_select(sql, schema, dialect=dialect)
    if gcq.aggregate is not None:  # GROUP BY / aggregates: the join plus per-group state
        if static:
            raise IVMError("static tables are not supported with GROUP BY / aggregates yet: pass static=()")
        return AggregateView(gcq, sql)
    if static:
        return _static_view(gcq, sql, static)
    return View(plan(gcq), sql)


def _static_names(static: Iterable[str], schema: dict) -> frozenset[str]:
    if isinstance(static, str):
        static = [s for s in static.split(",")]
    names = frozenset(str(s).strip().lower() for s in static if str(s).strip())
    known = {str(t).lower() for t in schema} if isinstance(schema, dict) else set()
    unknown = sorted(names - known)
    if unknown:
        raise IVMError(f"static table {unknown[0]!r} is not in the schema (tables: {', '.join(sorted(known))})")
    return names


def _static_view(gcq, sql: str, static: frozenset[str]) -> View:
    from .engine.static import StaticPart, StaticView
    from .planner.static import describe, plan_static

    sp = plan_static(gcq, static)
    if sp.plan is None:  # not tractable, or inequality joins: the usual plan, load-once tables
        main = plan(gcq)
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
