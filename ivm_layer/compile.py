"""``compile_view``: SQL text -> GCQ -> plan -> an empty, ready-to-update :class:`View`."""

from __future__ import annotations

from typing import Iterable

from .engine.aggregates import AggregateView
from .engine.project import ProjectView
from .engine.view import View
from .errors import IVMError
from .planner import plan
from .sql import translate_select


def compile_view(sql: str, schema: dict, dialect: str = "duckdb", static: Iterable[str] = (),
                 params: Iterable[str] = ()) -> View | AggregateView | ProjectView:
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
    gcq = translate_select(sql, schema, dialect=dialect)
    if gcq.projection is not None:  # computed columns / residual filters on top of the join
        return ProjectView(View(plan(gcq), sql), gcq.projection, sql)
    if gcq.aggregate is not None:  # GROUP BY / aggregates: the join plus per-group state
        return AggregateView(gcq, sql)
    return View(plan(gcq), sql)
