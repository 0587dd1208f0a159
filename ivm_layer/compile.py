"""``compile_view``: SQL text -> GCQ -> plan -> an empty, ready-to-update :class:`View`."""

from __future__ import annotations

from collections.abc import Iterable

from .engine.aggregates import AggregateView
from .engine.nested import NestedView
from .engine.project import ProjectView
from .engine.semijoin import SemiJoinView
from .engine.union import SetOpView
from .engine.view import View
from .errors import IVMError
from .planner import plan
from .query import GCQ, Derived, SemiJoin, SetOperation
from .sql.setops import translate_definition


def compile_view(sql: str, schema: dict, dialect: str = "duckdb", static: Iterable[str] = (),
                 params: Iterable[str] = ()) -> View | AggregateView | ProjectView | SetOpView | SemiJoinView | NestedView:
    """Compile a select–from–where(–group by–having) query into an empty incremental view.

    ``schema`` is ``{table: [columns]}`` or ``{table: {column: sql_type}}``; rows passed to
    the view's update methods are tuples in that column order. ``static`` (tables that never
    change) and ``params`` (input parameters of a parameterized view) are reserved for the
    extensions of papers 003/004 and must be empty for now.
    """
    if tuple(static):
        raise IVMError("static tables are not supported yet: pass static=()")
    if tuple(params):
        raise IVMError("parameterized views are not supported yet: pass params=()")
    return _build(translate_definition(sql, schema, dialect=dialect), sql)


def _build(d: GCQ | SetOperation | SemiJoin | Derived, sql: str):
    if isinstance(d, Derived):  # FROM subqueries with GROUP BY / DISTINCT / …: nested views
        return NestedView([(rel, _build(n, "")) for rel, n in d.nested], _build(d.outer, sql), sql)
    if isinstance(d, SemiJoin):  # [NOT] EXISTS / [NOT] IN (SELECT …): per-key counts of the subquery
        return SemiJoinView(d.mode, _build(d.left, ""), _build(d.right, ""), d.nkeys, d.columns, d.distinct,
                            sql, d.text)
    if isinstance(d, SetOperation):  # UNION / EXCEPT / INTERSECT [ALL] of two views
        return SetOpView(d.kind, d.all, _build(d.branches[0], ""), _build(d.branches[1], ""), d.columns, sql)
    if d.projection is not None:  # computed columns / residual filters on top of the join
        return ProjectView(View(plan(d), sql), d.projection, sql)
    if d.aggregate is not None:  # GROUP BY / aggregates: the join plus per-group state
        return AggregateView(d, sql)
    return View(plan(d), sql)
