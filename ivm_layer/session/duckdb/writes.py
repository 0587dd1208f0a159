"""Writes to tracked tables through a DuckDB session: capture, apply to the views, undo.

:meth:`DuckWriter.write` runs one routed write so that DuckDB returns the rows it changed
(see :mod:`ivm_layer.io.duckdb.capture`), as one :class:`~ivm_layer.maintain.changes.Changes`,
and hands them to the session's :class:`~ivm_layer.maintain.viewset.ViewSet` (all views
reading the table prepared, then committed, static-table readers rebuilt; the change of a
MATERIALIZED view written to its table here, in the statement's transaction). Every applied
batch goes into the caller's undo log, which :meth:`DuckWriter.undo` reverses; the
subscribers are told by the session after DuckDB committed.
"""

from __future__ import annotations

import re

from ...errors import UpdateError
from ...io.duckdb import capture as duck
from ...io.duckdb import literals
from ...io.duckdb.capture import SETTLE_AT as duck_settle_at
from ...maintain.changes import Changes
from ...maintain.viewset import Prepared, ViewSet
from ..results import RowsResult as Cursor
from ..router import Route
from . import ranges
from .tables import run, write_change
from .views import DuckViews, quote

#: ``INSERT INTO`` and nothing else before the target (no ``OR IGNORE``/``OR REPLACE``)
_PLAIN_INSERT = re.compile(r"\s*INSERT\s+INTO\s+", re.IGNORECASE)


class DuckWriter:
    """Captured changes → views, for one session."""

    def __init__(self, conn, views: DuckViews):
        self.conn = conn
        self.views = views
        self.viewset: ViewSet = views.viewset
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
            text = r.text
            if few and params is None and not user_returning and cap.types is not None and \
                    (got := literals.rewrite(text, r.target_span[1], cap.columns, cap.types)) is not None:
                text, params = got      # the same rows, one list per column (no per-cell binding)
            desc, rows, inserted = cap.run_returning(conn, text, params, user_returning, 1,
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
        changes = Changes.from_rows(r.target, deleted, inserted)
        if changes:
            self.apply(changes, undo)
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
                prepared = self.viewset.prepare(Changes.from_rows(r.target, deleted))
            except UpdateError:
                self.apply_unseen(cap, [])
                return self._result(desc, rows, len(deleted)), True
            self.commit(prepared, None)
            return self._result(desc, rows, len(deleted)), True
        got = None if "returning" in r.flags else cap.update_rows(self.conn, r.text, params)
        if got is None:
            return None
        old, new = got
        prepared = self.viewset.prepare(Changes.from_rows(r.target, old, new))   # no static readers
        n = cap.run_update(self.conn, r.text, params, old, new)
        if n != len(old):          # a write raced the statement: the caller diffs the table
            return self._result(None, [], n), False
        self.commit(prepared, None)          # nothing to undo: DuckDB committed the UPDATE
        cap.settle(self.conn, duck_settle_at)
        return self._result(None, [], n), True

    def insert_autocommit(self, r: Route) -> tuple[Cursor, bool] | None:
        """A plain ``INSERT INTO t VALUES (…), …`` of literals naming every column, outside a
        transaction, when every view reading ``t`` is served and none treats it as static: the
        rows are read from the statement (:mod:`~ivm_layer.io.duckdb.literals`, which takes only
        cells whose stored value is certain), every view is prepared with them, the INSERT runs
        alone as one typed list per column (DuckDB commits it) and the views are committed after
        it — no ``BEGIN``/``COMMIT`` and no ``RETURNING`` (together 0.5–1 ms of a 200-row
        statement). A view check that fails raises before anything ran; a failing INSERT (a
        constraint) leaves the views as they were. Returns the cursor and whether the views are
        up to date (False: DuckDB's count differs; the caller diffs the table); ``None``: not of
        this kind (nothing ran)."""
        if "upsert" in r.flags or "returning" in r.flags or "values" not in r.flags \
                or r.target_span is None or not _PLAIN_INSERT.fullmatch(r.text, 0, r.target_span[0]):
            return None
        cap = self.views.captures[r.target]
        if not cap.lazy or r.text[r.target_span[1]:].lstrip().startswith("("):
            return None     # values hashed later only for lazy types; a column list: defaults
        readers = [vs for vs in self.views.views.values() if vs.error is None and r.target in vs.tables]
        if any(vs.materialized or r.target in vs.static for vs in readers):
            return None
        got = literals.rewrite(r.text, r.target_span[1], cap.columns, cap.types)
        if got is None:
            return None
        sql, cols = got
        rows = list(zip(*cols))
        prepared = self.viewset.prepare(Changes.from_rows(r.target, (), rows))
        n = int(self.conn.execute(sql, cols).fetchall()[0][0])
        if n != len(rows):
            return self._result(None, [], n), False
        cap.note(rows, 1, False)
        self.commit(prepared, None)          # nothing to undo: DuckDB committed the INSERT
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
        changes = Changes.from_rows(cap.table, deleted, inserted)
        if changes:
            self.apply(changes, undo)
        return len(deleted) + len(inserted)

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

    def apply(self, changes: Changes, undo: list) -> None:
        """Apply captured changes to every view reading them, all or none (the ViewSet), and
        write the MATERIALIZED views' changes to their tables."""
        self.commit(self.viewset.prepare(changes), undo)

    def commit(self, prepared: Prepared, undo: list | None) -> None:
        """Phase two (the views cannot fail; a table write that fails aborts the statement and
        the caller undoes ``undo``): commit every prepared view, write materialized tables."""
        for vs, change in self.viewset.commit(prepared, undo).items():
            if vs.bounds:
                ranges.check(vs.name, vs.columns, vs.bounds, change)
            if vs.materialized:
                write_change(self.conn, f"main.{quote(vs.name)}", vs.columns, vs.types, change)

    @staticmethod
    def undo(undo: list) -> None:
        """Reverse an undo log (newest first): batches applied negated, rebuilt views restored."""
        ViewSet.undo(undo)
