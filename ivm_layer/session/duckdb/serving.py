"""The served (non-materialized) views of a DuckDB session as DuckDB sees them.

- :meth:`ServedViews.sync`: one :class:`~.reads.LiveRows` registered per served view, kept in
  step with the catalog (O(views), after statements that may change it). DuckDB asks it for a
  fresh Arrow stream on every scan, so views read the same through the session, through
  ``session.connection`` and twice in one statement.
- :meth:`ServedViews.check`: a statement naming a stopped view raises that view's error.
- :meth:`ServedViews.count`: ``SELECT count(*) FROM v`` answered by the engine in O(1), with
  DuckDB's own result description (read once per statement text over no rows).
- :meth:`ServedViews.lookup_read`: a query of parameterized views (paper 004): each occurrence
  becomes the rows of a lookup, registered for as long as the statement's result streams.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from ...errors import InternalError, ProgrammingError
from ..inputvalues import lookup_inputs
from ..results import DuckResult, Result, RowsResult
from . import reads
from .tables import run
from .views import DuckViews, ViewState, is_parameterized


class ServedViews:
    """The registered rows of one session's served views."""

    def __init__(self, conn, catalog: DuckViews):
        self.conn = conn
        self.catalog = catalog
        self.live: dict[str, reads.LiveRows] = {}       # served view -> its registered rows
        self._count_shapes: dict[str, Any] = {}        # count(*) statement -> DuckDB's description
        self.plans = None                               # queries of parameterized views, rewritten

    def sync(self, fresh: tuple[str, ...] = ()) -> None:
        """Register rows for every healthy served view, unregister the others (``fresh``: names
        whose registration the catalog replaced while creating a view)."""
        views = self.catalog.views
        want = {n for n, vs in views.items() if vs.error is None and not vs.materialized
                and vs.schema is not None and not is_parameterized(vs.view)}
        for n in list(self.live):
            if n not in want or n in fresh:
                del self.live[n]
                with contextlib.suppress(Exception):
                    self.conn.unregister(reads.rows_name(n))
        for n in want - self.live.keys():
            live = reads.LiveRows(views, n)
            self.conn.register(reads.rows_name(n), live)
            self.live[n] = live

    def check(self, found: list[str]) -> None:
        """Raise the error of a stopped served view among ``found`` (the views a statement
        names); its registered rows would raise inside DuckDB, in DuckDB's words."""
        for n in found:
            vs = self.catalog.views[n]
            if not vs.materialized:
                self.catalog.healthy(vs)

    def count(self, text: str, vs: ViewState) -> Result:
        """``SELECT count(*) FROM v``: DuckDB's result shape over no rows, the engine's count."""
        desc = self._count_shapes.get(text)
        if desc is None:
            live = self.live.get(vs.name)
            if live is None:
                raise InternalError(f"internal: served view {vs.name!r} has no registered rows")
            live.empty = True
            try:
                desc = run(self.conn, text, None).description
            finally:
                live.empty = False
            if len(self._count_shapes) > 256:
                self._count_shapes.clear()
            self._count_shapes[text] = desc
        return RowsResult(desc, [(len(vs.view),)])

    def lookup_read(self, text: str, kind: str, params, found: list[str],
                    after_result: Callable[[Callable[[], None]], None],
                    cast: Callable[[Any, str], Any]) -> Result:
        """Run a read of parameterized views: each occurrence is replaced by the rows of a
        lookup (``view.lookup(**inputs)``, registered under a name of its own), its inputs
        converted as DuckDB compares them (:func:`~ivm_layer.session.inputvalues.lookup_inputs`;
        ``cast`` reads a string as the input's type). The lookups stay registered while the
        result streams: ``after_result(unregister)`` hands their removal to the session."""
        if kind != "read":
            raise ProgrammingError("parameterized views are read with SELECT … FROM v WHERE input = …")
        # sqlglot: loaded for the first lookup read
        from ..lookups import LookupPlans, input_values

        if self.plans is None:
            self.plans = LookupPlans("duckdb")
        views = self.catalog.views
        pviews = {n: views[n] for n in found if is_parameterized(views[n].view)}
        sql, lookups, values, direct = self.plans.plan(text, pviews, params)
        if direct is not None:                  # placeholders and literals: no round trip
            inputs = input_values(direct, params)
            # the connection may still hold the result of a statement whose cursor was dropped
            # unread; DuckDB refuses register() until another statement replaces it
            self.conn.execute("SELECT 1").fetchall()
        else:
            inputs = run(self.conn, "SELECT " + ", ".join(values), params).fetchone() if values else ()
        registered: list[str] = []

        def unregister() -> None:
            for name in registered:
                with contextlib.suppress(Exception):
                    self.conn.unregister(name)

        try:
            for lk in lookups:
                vs = pviews[lk.view]
                given = lookup_inputs(vs, {p: inputs[i] for p, i in lk.inputs.items()}, cast)
                rows = vs.view.lookup(**given)
                self.conn.register(lk.name, reads.reader(rows, vs.schema))
                registered.append(lk.name)
            self.check(list(self.catalog.names.counts(sql)))
            res = run(self.conn, sql, None, lazy=True)
        except BaseException:
            unregister()
            raise
        if isinstance(res, DuckResult):
            after_result(unregister)          # the stream reads the lookups as it goes
        else:
            unregister()
        return res
