"""Writes to tracked tables through a DuckDB session: capture, apply to the views, undo.

:meth:`DuckWriter.write` runs one routed write so that DuckDB returns the rows it changed
(see :mod:`ivm_layer.io.duckdb.capture`) and applies them to every view reading the table through the
engine's two-phase update: all views are prepared first (a bad batch changes nothing), then
committed, materialized view tables written and session subscribers' changes collected. Every
applied batch goes into the caller's undo log, which :meth:`DuckWriter.undo` reverses.
"""

from __future__ import annotations

from itertools import repeat

from ...errors import UpdateError
from ...io.duckdb import capture as duck
from ...io.duckdb.capture import SETTLE_AT as duck_settle_at
from ..core import Cursor
from ..router import Route
from .tables import run, write_change
from .views import DuckViews, Rebuilt, quote


class DuckWriter:
    """Captured changes → views, for one session."""

    def __init__(self, conn, views: DuckViews, pending: dict):
        self.conn = conn
        self.views = views
        self.pending = pending          # view state -> {row: Δk} for the subscribers
        self._count_desc = None

    def write(self, r: Route, params, undo: list) -> Cursor:
        """Run a write to a tracked table and apply what it changed."""
        cap = self.views.captures[r.target]
        kind = r.kind
        user_returning = "returning" in r.flags
        conn = self.conn
        desc, rows, deleted, inserted = None, [], [], []
        if kind == "insert" and "upsert" not in r.flags:
            few = "values" in r.flags
            desc, rows, inserted = cap.run_returning(conn, r.text, params, user_returning, 1,
                                                     hashed=not few, many=not few)
            n = len(inserted)
        elif kind == "insert" and (got := cap.upsert(conn, r.text, params, user_returning)) is not None:
            desc, rows, deleted, inserted = got
            n = len(inserted)
        elif kind == "delete":
            desc, rows, deleted = cap.run_returning(conn, r.text, params, user_returning, -1)
            n = len(deleted)
        elif kind == "truncate":
            deleted = cap.delete_all(conn)
            n = len(deleted)
        elif kind == "copy_from" and "stdin" not in r.flags:
            inserted = cap.copy_from(conn, r.text, r.target_span, r.columns)
            n = len(inserted)
        elif kind == "update" and not user_returning and \
                (got := cap.update_rows(conn, r.text, params)) is not None:
            deleted, inserted = got
            n = cap.run_update(conn, r.text, params, deleted, inserted)
            if n != len(deleted):  # a write raced the statement: trust only a diff
                self.apply_unseen(cap, undo)
                return self._result(None, [], n)
        elif kind == "update":
            before = None if cap.volatile(conn, r.text) else cap.preimage(conn, r.text, params)
            if before is None:
                return self._write_unseen(r, params, undo)
            desc, rows, inserted = cap.run_returning(conn, r.text, params, user_returning, 1)
            if len(inserted) != len(before):  # a volatile WHERE: trust only a diff
                self.apply_unseen(cap, undo)
                return self._result(desc, rows, len(inserted))
            deleted = cap.note(before, -1, True)
            n = len(inserted)
        else:
            return self._write_unseen(r, params, undo)
        cap.settle(conn, duck_settle_at)
        changes = list(zip(deleted, repeat(-1))) + list(zip(inserted, repeat(1)))
        if changes:
            self.apply({r.target: changes}, undo)
        return self._result(desc, rows, n)

    def write_autocommit(self, r: Route, params) -> tuple[Cursor, bool] | None:
        """An UPDATE or DELETE outside a transaction, when every view reading its table is
        served (no table of its own to write in the same transaction) and none treats the
        table as static: the statement runs alone (DuckDB commits it) and the views are
        committed after it, with no explicit ``BEGIN``/``COMMIT`` around them (they cost
        0.15–0.3 ms a statement).

        - UPDATE: its rows are read and every view prepared first, then it runs; a failing
          UPDATE leaves the views as they were (nothing was committed).
        - DELETE: it runs with ``RETURNING``, then the views are prepared and committed. A
          delete cannot fail the views' checks on values (its rows passed them when they were
          inserted); if the views do not hold a deleted row (a write around the session), the
          table is diffed instead.

        Returns the cursor and whether the views are up to date (False: the count DuckDB
        reports differs from the rows read; the caller diffs the table). ``None``: not of
        this kind (nothing ran); the caller takes the transactional path."""
        cap = self.views.captures[r.target]
        readers = [vs for vs in self.views.views.values() if vs.error is None and r.target in vs.tables]
        if any(vs.materialized or r.target in vs.static for vs in readers):
            return None
        if r.kind == "delete":
            desc, rows, deleted = cap.run_returning(self.conn, r.text, params, "returning" in r.flags, -1)
            try:
                prepared, _ = self.prepare({r.target: list(zip(deleted, repeat(-1)))} if deleted else {})
            except UpdateError:
                self.apply_unseen(cap, [])
                return self._result(desc, rows, len(deleted)), True
            self.commit(prepared, [], [])
            return self._result(desc, rows, len(deleted)), True
        got = None if "returning" in r.flags else cap.update_rows(self.conn, r.text, params)
        if got is None:
            return None
        old, new = got
        changes = list(zip(old, repeat(-1))) + list(zip(new, repeat(1)))
        prepared, _ = self.prepare({r.target: changes} if changes else {})   # no static readers
        n = cap.run_update(self.conn, r.text, params, old, new)
        if n != len(old):          # a write raced the statement: the caller diffs the table
            return self._result(None, [], n), False
        self.commit(prepared, [], [])        # nothing to undo: DuckDB committed the UPDATE
        cap.settle(self.conn, duck_settle_at)
        return self._result(None, [], n), True

    def _result(self, desc, rows, n: int) -> Cursor:
        """What DuckDB would have returned: the user's RETURNING rows, or the row count."""
        if desc is not None:
            return Cursor(desc, rows, len(rows))
        if self._count_desc is None:
            self._count_desc = self.conn.execute('SELECT 0::BIGINT AS "Count" WHERE false').description
        return Cursor(self._count_desc, [(n,)], n)

    def _write_unseen(self, r: Route, params, undo: list) -> Cursor:
        """A write DuckDB cannot describe row by row: run it, then diff its table."""
        cur = run(self.conn, r.text, params)
        self.apply_unseen(self.views.captures[r.target], undo)
        return cur

    def apply_unseen(self, cap: duck.TableCapture, undo: list) -> int:
        deleted, inserted = cap.diff_against(self.conn, self.views.stored(cap.table))
        changes = [(row, -1) for row in deleted] + [(row, 1) for row in inserted]
        if changes:
            self.apply({cap.table: changes}, undo)
        return len(changes)

    def capture_unseen(self, undo: list) -> int:
        """The fallback for writes the session did not see: tables whose fingerprint moved are
        diffed; a table that vanished or changed shape stops the views that read it (each
        alone)."""
        n = 0
        for t in list(self.views.captures):
            cap = self.views.captures.get(t)
            if cap is None:
                continue
            if duck.table_columns(self.conn, t) != self.views.source_columns(t):
                self.views.source_gone(t)
                continue
            if cap.changed(self.conn):
                n += self.apply_unseen(cap, undo)
        return n

    def apply(self, changes: dict[str, list[tuple[tuple, int]]], undo: list) -> None:
        """Apply captured changes to every view reading them: prepare all (any error: nothing
        changed), then commit all (:meth:`commit`)."""
        self.commit(*self.prepare(changes), undo)

    def prepare(self, changes: dict[str, list[tuple[tuple, int]]]) -> tuple[list, list]:
        """Phase one for every view reading ``changes``: ``(prepared, to rebuild)``; views that
        treat a changed table as static are rebuilt instead. Raises before anything changed."""
        prepared = []
        rebuild = []
        for vs in self.views.views.values():
            if vs.error is not None:
                continue
            batch = {t: changes[t] for t in vs.tables if t in changes}
            if not batch:
                continue
            if vs.static & batch.keys():
                rebuild.append(vs)
            else:
                prepared.append((vs, batch, vs.view.prepare(batch)))
        return prepared, rebuild

    def commit(self, prepared: list, rebuild: list, undo: list) -> None:
        """Phase two (cannot fail): rebuild, commit every prepared view, write materialized
        view tables, collect subscribers' changes; every step goes into ``undo``."""
        for vs in rebuild:
            self.views.rebuild(vs, undo)
        for vs, batch, p in prepared:
            change = vs.view.commit(p, want_change=vs.materialized or bool(vs.subscribers))
            undo.append((vs, batch))
            if change:
                if vs.materialized:
                    write_change(self.conn, f"main.{quote(vs.name)}", vs.columns, vs.types, change)
                if vs.subscribers:
                    acc = self.pending.setdefault(vs, {})
                    for row, k in change:
                        acc[row] = acc.get(row, 0) + k

    @staticmethod
    def undo(undo: list) -> None:
        """Reverse an undo log (newest first): batches applied negated, rebuilt views restored."""
        for vs, entry in reversed(undo):
            if isinstance(entry, Rebuilt):
                vs.view, vs.rebuilds = entry.view, entry.rebuilds
                continue
            vs.view.apply({t: [(r, -k) for r, k in rows] for t, rows in entry.items()})
        undo.clear()
