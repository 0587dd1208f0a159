"""Reads of served views for one client of an embedded server (a mixin of
:class:`~.duckclient.DuckClient`).

- the engine's own answers (:mod:`ivm_layer.session.pointreads`) under the shared gate,
  streamed as they are enumerated; inside a block with the block's changes applied;
- DuckDB queries that name a served view: the view's rows registered as a lazy Arrow reader on
  the client's own connection for the statement (its ``TEMP VIEW`` made once per connection),
  parameterized views as lookups (:meth:`ViewReads.lookup_read`).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from ..session import pointreads as fastpath
from ..session.duckdb import reads
from ..session.duckdb.views import is_parameterized
from ..identifiers import ascii_lower
from ..session.lookups import plan_lookups
from ..session.router import Route, route
from . import pgtypes
from .results import Column, Result, command_tag, description_columns

if TYPE_CHECKING:
    from .prepared import Prepared

class ViewReads:
    """Needs ``backend``, ``conn``, ``status``, ``txn``, ``_temp``, ``_temp_version`` and the
    client's ``_run``/``_description_columns`` helpers."""

    def _engine_in_block(self, p: Prepared, vs, params) -> Result | None:
        """An engine read inside a transaction block: with the block's own changes applied
        (under the exclusive gate) when it has written tracked tables; the rows are taken
        before the changes are taken back."""
        b = self.backend
        if self.txn is None or not self.txn.wrote_tracked:
            with b.gate.shared(b.lock_timeout):
                res = self._engine(p, vs, params)
                if res is not None:
                    res.rows = iter(list(res.rows))
                return res
        with b.gate.exclusive(b.lock_timeout), self.txn.overlay():
            res = self._engine(p, vs, params)
            if res is not None:
                res.rows = iter(list(res.rows))
            return res

    def _engine(self, p: Prepared, vs, params) -> Result | None:
        sh = p.shape
        columns = self._shape_columns(sh)
        if columns is None:
            return None
        inputs = None
        if is_parameterized(vs.view):
            wanted = list(vs.view.params)
            got = {c: fastpath.bind(v, params) for c, v in sh.conds}
            if sorted(got) != sorted(wanted) or len(got) != len(sh.conds):
                return None
            types = self.backend.input_types(vs)
            inputs = {k: pgtypes.coerce(v, types.get(k)) for k, v in got.items()}
        elif sh.conds:
            return None
        project = None
        if sh.select is not None and sh.count is None:
            lower = [ascii_lower(c) for c in vs.columns]
            project = [lower.index(s) for s in sh.select]
        return Result("SELECT", columns, fastpath.rows(vs.view, sh, params, inputs, project))

    def _shape_columns(self, sh: fastpath.Shape) -> list[Column] | None:
        vs = self.backend.views.get(sh.view)
        if vs is None or vs.error is not None or vs.materialized:
            return None
        if sh.count is not None:
            return [Column.of(sh.count, "BIGINT")]
        cols = list(zip(vs.columns, vs.types))
        if sh.select is not None:
            lower = {ascii_lower(c): (c, t) for c, t in cols}
            if any(s not in lower for s in sh.select):
                return None
            cols = [lower[s] for s in sh.select]
        return [Column.of(c, t) for c, t in cols]

    @contextlib.contextmanager
    def _reading(self, text: str, r: Route, mentions: dict | None = None, empty: bool = False,
                 gate: bool = False):
        """Served views the statement names, readable on this client's connection for the
        statement: the gate shared (exclusive with this block's changes applied when it has
        written tracked tables), each view's rows registered as a lazy Arrow reader (an Arrow
        table when the statement may scan it twice), parameterized views as lookups."""
        b = self.backend
        self._sync_temp_views()
        if mentions is None:
            mentions = b.session.catalog.names.counts(text) if b.views else {}
        served = {n: b.views[n] for n in mentions if b.views[n].error is None and not b.views[n].materialized}
        if not served and not gate:
            yield text
            return
        overlay = self.txn is not None and self.txn.wrote_tracked and not empty
        if overlay:
            b.gate.acquire_exclusive(b.lock_timeout)
        else:
            b.gate.acquire_shared(b.lock_timeout)
        registered: list[str] = []
        try:
            with self.txn.overlay() if overlay else contextlib.nullcontext():
                for n, vs in served.items():
                    if is_parameterized(vs.view):
                        continue
                    self._ensure_temp_view(n, vs)
                    if empty:
                        reader = reads.reader((), vs.schema)
                    else:   # a fresh stream per scan: a statement may scan the view twice
                        reader = reads.LiveRows(b.views, n)
                    self.conn.register(reads.rows_name(n), reader)
                    registered.append(reads.rows_name(n))
                yield text
        finally:
            for name in registered:
                with contextlib.suppress(Exception):
                    self.conn.unregister(name)
            if overlay:
                b.gate.release_exclusive()
            else:
                b.gate.release_shared()

    def _sync_temp_views(self) -> None:
        b = self.backend
        if self._temp_version == b.views_version:
            return
        for n, ident in list(self._temp.items()):
            vs = b.views.get(n)
            if vs is None or id(vs) != ident:
                with contextlib.suppress(Exception):
                    self.conn.execute(f'DROP VIEW IF EXISTS temp."{n}"')
                del self._temp[n]
        self._temp_version = b.views_version

    def _ensure_temp_view(self, n: str, vs) -> None:
        if self._temp.get(n) == id(vs):
            return
        name = reads.rows_name(n)
        self.conn.register(name, reads.reader((), vs.schema))
        try:
            self.conn.execute(reads.view_sql(vs.name, vs.columns, vs.types))
        finally:
            self.conn.unregister(name)
        self._temp[n] = id(vs)

    def lookup_read(self, p: Prepared, params) -> Result:
        """A DuckDB query of parameterized views (``… FROM v WHERE input = …`` with more SQL
        around it): each occurrence becomes the rows of a lookup, as in the session."""
        b = self.backend
        pviews = {n: b.views[n] for n in b.session.catalog.names.counts(p.text)
                  if b.views[n].error is None and is_parameterized(b.views[n].view)}
        sql, lookups, values = plan_lookups(p.text, pviews, params)
        # fetchall: a result fetched with fetchone() stays open, and DuckDB then refuses register()
        inputs = self.conn.execute("SELECT " + ", ".join(v.sql(dialect="duckdb") for v in values),
                                   params).fetchall()[0] if values else ()
        r = route(sql)
        names = []
        with self._reading(sql, r, gate=True):
            try:
                for lk in lookups:
                    vs = pviews[lk.view]
                    types = b.input_types(vs)
                    given = {q: pgtypes.coerce(inputs[i], types.get(q)) for q, i in lk.inputs.items()}
                    self.conn.register(lk.name, reads.reader(vs.view.lookup(**given), vs.schema))
                    names.append(lk.name)
                self.conn.execute(sql)
                desc = self.conn.description
                rows = self.conn.fetchall()
            finally:
                for n in names:
                    with contextlib.suppress(Exception):
                        self.conn.unregister(n)
        return Result(command_tag(p.route), description_columns(desc), iter(rows))
