"""Queries of parameterized views in a PostgreSQL session that the engine does not answer alone
(``SELECT count(*) FROM v WHERE acc = ? AND amount > 5``, joins with tables, ORDER BY, …).

The statement is rewritten as in DuckDB sessions (:func:`~ivm_layer.session.lookups.plan_lookups`:
the inputs' conditions are taken out, each occurrence of the view becomes a subquery), the
inputs' values are evaluated by PostgreSQL with the statement's parameters (one ``SELECT``) and
converted as PostgreSQL compares them (:mod:`ivm_layer.session.inputvalues`), and each
occurrence reads the rows of ``view.lookup(**inputs)`` sent as one array parameter per column
(``unnest($1::integer[], $2::text[])``): no TEMP table, nothing kept between statements. Cost:
two round trips plus the lookup's rows. Inside a transaction block that wrote, PostgreSQL
evaluates the view's definition itself for those inputs instead, so the read sees the block's
own uncommitted writes (as served views do there).

The one-row lookup itself (``SELECT … FROM v WHERE acc = ?``) never comes here after its first
run: :class:`~ivm_layer.session.pointreads.PointReads` answers it from the engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...errors import NotSupportedError
from ...io.duckdb.capture import quote
from ..inputvalues import lookup_inputs
from ..pointreads import PointReads
from ..results import Result
from .served import array_columns, thaw
from .state import PgView
from .user import UserConnection

if TYPE_CHECKING:  # pragma: no cover
    from ..lookups import LookupPlans

HIDDEN = "__param_"      # sql.params.HIDDEN (not imported: sqlglot loads with the first view)


class ParamReads:
    """A PostgreSQL session's reads of parameterized views: point reads answered by the engine
    (``points``), everything else through :func:`lookup_read` with the rewrite planned once per
    statement text. ``views``: the session's name → state map."""

    def __init__(self, user: UserConnection, views: dict[str, PgView]):
        self.user = user
        self.views = views
        self.points = PointReads("postgres", count_rows=True)
        self.plans: LookupPlans | None = None

    def cast(self, value, sql_type: str):
        """PostgreSQL's conversion of ``value`` to ``sql_type`` (a string given for a date input)."""
        return self.user.run(f"SELECT CAST($1 AS {sql_type})", [value]).fetchone()[0]

    def point(self, text: str, params) -> Result | None:
        """The engine's answer when ``text`` is a known point read, else ``None``."""
        return self.points.answer(text, params, self.views, self.cast, _thaw)

    def read(self, text: str, params, names: list[str], own_writes: bool) -> Result:
        """Run ``text`` in PostgreSQL over the lookups of the parameterized views among ``names``
        (over their definitions when ``own_writes``), and learn its result description."""
        if self.plans is None:
            # sqlglot: loaded for the first such query
            from ..lookups import LookupPlans

            self.plans = LookupPlans("postgres")
        pviews = {n: self.views[n] for n in names if self.views[n].input_types or
                  getattr(self.views[n].view, "params", None)}
        cur = lookup_read(self.user, self.plans, text, params, pviews, own_writes, self.cast)
        self.points.remember(text, self.views, cur.description)
        return cur


def _thaw(vs: PgView):
    """How a parameterized view's engine rows become psycopg's (array values as lists)."""
    if not array_columns(vs.types):
        return None
    return lambda row: tuple(thaw(v) if isinstance(v, tuple) else v for v in row)   # projected rows too


def lookup_read(user: UserConnection, plans: LookupPlans, text: str, params, views: dict[str, PgView],
                own_writes: bool, cast: Callable[[Any, str], Any]) -> Result:
    """Run the read ``text`` of the parameterized views ``views`` (name → state); ``plans``:
    the session's rewrites, one per statement text."""
    sql, lookups, values, direct = plans.plan(text, views, params)
    if direct is not None:                  # placeholders and literals: no round trip
        from ..lookups import input_values  # loaded with the plan (sqlglot)

        raw = input_values(direct, params)
    else:
        raw = user.run("SELECT " + ", ".join(values), params).fetchone() if values else ()
    args: list = []
    items: dict[str, str] = {}
    for lk in lookups:
        vs = views[lk.view]
        given = lookup_inputs(vs, {p: raw[i] for p, i in lk.inputs.items()}, cast)
        items[lk.name] = definition_rows(vs, given, args) if own_writes else \
            lookup_rows(vs, vs.view.lookup(**given), args)
    for name, item in items.items():
        sql = sql.replace(quote(name), item)
    # never prepared: the array parameters' lengths change with every answer
    return user.run(sql, args, prepare=False)


def lookup_rows(vs: PgView, pairs, args: list) -> str:
    """``unnest($k::type[], …) AS _ivm_lookup(columns)`` over ``(row, k)`` pairs (k copies),
    the arrays appended to ``args``."""
    cols: list[list] = [[] for _ in vs.columns]
    for row, k in pairs:
        for _ in range(k):
            for c, v in zip(cols, row):
                c.append(v)
    items = []
    for c, t, values in zip(vs.columns, vs.types, cols):
        if t.endswith("]"):
            raise NotSupportedError(f"incremental view {vs.name!r}: its column {c!r} is an array ({t}); read it "
                                    f"with SELECT … FROM {vs.name} WHERE <inputs> alone (the engine answers "
                                    "that), not inside a larger query", sqlstate="0A000")
        args.append(values)
        items.append(f"${len(args)}::{t}[]")
    names = ", ".join(quote(c) for c in vs.columns)
    return f"unnest({', '.join(items)}) AS _ivm_lookup({names})"


def definition_rows(vs: PgView, given: dict[str, Any], args: list) -> str:
    """The view's definition evaluated by PostgreSQL for the inputs ``given`` (a transaction
    block's own writes are visible to it), as a FROM item with the view's column names."""
    ops = {name: (hidden, op) for name, op, hidden in vs.ranges}
    conds = []
    for name, value in given.items():
        hidden, op = ops.get(name, (HIDDEN + name, "="))
        args.append(value)
        conds.append(f"{quote(hidden)} {op} ${len(args)}")
    names = ", ".join(quote(c) for c in list(vs.columns) + list(vs.hidden))
    return (f"(SELECT * FROM ({vs.described}) AS _ivm_q({names}) WHERE {' AND '.join(conds) or 'true'}) "
            f"AS _ivm_lookup")
