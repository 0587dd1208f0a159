"""Writes to tracked tables through a DuckDB session: capture, apply to the views, undo.

:meth:`DuckWriter.write` runs one routed write so that DuckDB returns the rows it changed
(see :mod:`connectors.duckdb`) and applies them to every view reading the table through the
engine's two-phase update: all views are prepared first (a bad batch changes nothing), then
committed, materialized view tables written and session subscribers' changes collected. Every
applied batch goes into the caller's undo log, which :meth:`DuckWriter.undo` reverses.
"""

from __future__ import annotations

from connectors import duckdb as duck

from .core import Cursor
from .duck_tables import run, write_change
from .duck_views import DuckViews, Rebuilt, quote
from .router import Route


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
            desc, rows, inserted = cap.run_returning(conn, r.text, params, user_returning)
            n = len(inserted)
        elif kind == "delete":
            desc, rows, deleted = cap.run_returning(conn, r.text, params, user_returning)
            n = len(deleted)
        elif kind == "truncate":
            deleted = cap.delete_all(conn)
            n = len(deleted)
        elif kind == "copy_from" and "stdin" not in r.flags:
            inserted = cap.copy_from(conn, r.text, r.target_span, r.columns)
            n = len(inserted)
        elif kind == "update":
            before = cap.preimage(conn, r.text, params)
            if before is None:
                return self._write_unseen(r, params, undo)
            desc, rows, inserted = cap.run_returning(conn, r.text, params, user_returning)
            if len(inserted) != len(before):  # a volatile WHERE: trust only a diff
                self.apply_unseen(cap, undo)
                return self._result(desc, rows, len(inserted))
            deleted = before
            n = len(inserted)
        else:
            return self._write_unseen(r, params, undo)
        cap.note(deleted, -1)
        cap.note(inserted, 1)
        changes = [(row, -1) for row in cap.strip(deleted)] + [(row, 1) for row in cap.strip(inserted)]
        if changes:
            self.apply({r.target: changes}, undo)
        return self._result(desc, rows, n)

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
        changed), then commit all, write materialized view tables, collect subscribers'
        changes. Views that treat a changed table as static are rebuilt instead."""
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
