"""Transactions of other connections to a DuckDB session's database, applied to its views at COMMIT.

A driver that serves many clients (``ivm serve``) gives each client a connection of its own
(``session.connection.cursor()``), so each has its own DuckDB transaction. Inside a client's
``BEGIN … COMMIT`` its writes to tracked tables run on that connection and are captured exactly
as the session captures its own (``RETURNING``, pre-images; :class:`~.writes.DuckWriter`),
but the views are **not** changed until the client commits: other clients never see an
uncommitted change. :meth:`ClientTransaction.commit` (with the caller holding the views
exclusively) prepares every view, writes MATERIALIZED view tables in the client's transaction,
commits it in DuckDB and then in the engine, all or nothing; :meth:`ClientTransaction.overlay`
applies the pending changes for the length of one read and takes them back (read-your-writes
inside the block, O(pending changes) per read).

Writes DuckDB cannot describe row by row (``MERGE``, upserts on tables with several keys) would
need a diff of the table against the views, which a transaction that is not yet committed
cannot have: they are refused inside a block (run them outside ``BEGIN … COMMIT``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ...errors import UnsupportedSQLError
from ...maintain.changes import Changes
from ..core import Cursor
from ..router import Route
from .views import DuckViews
from .writes import DuckWriter


class _Detached:
    """The session's views as a client transaction sees them: the same views, captures that
    do no fingerprint accounting."""

    def __init__(self, views: DuckViews):
        self._views = views
        self._caps: dict = {}

    @property
    def captures(self) -> dict:
        live = self._views.captures
        for t in [t for t in self._caps if t not in live]:
            del self._caps[t]
        for t, cap in live.items():
            if t not in self._caps:
                self._caps[t] = cap.detached()
        return self._caps

    def __getattr__(self, name):
        return getattr(self._views, name)


class _Collecting(DuckWriter):
    """A writer whose captured changes are kept for the commit instead of applied."""

    def __init__(self, conn, views: DuckViews, kept: list):
        super().__init__(conn, _Detached(views))
        self.kept = kept

    def apply(self, changes, undo) -> None:
        self.kept.append(changes)

    def apply_unseen(self, cap, undo) -> int:
        raise UnsupportedSQLError(
            f"this write to {cap.table!r} cannot be captured row by row (MERGE, an upsert on a table "
            "with several keys, a volatile UPDATE): inside a transaction block it cannot be applied to "
            "the incremental views; ROLLBACK and run it outside BEGIN … COMMIT")


class ClientTransaction:
    """One client transaction on ``conn`` (already in ``BEGIN``) over the views of ``views``."""

    def __init__(self, views: DuckViews, conn):
        self.views = views
        self.conn = conn
        self._kept: list[Changes] = []
        self._writer = _Collecting(conn, views, self._kept)

    @property
    def wrote_tracked(self) -> bool:
        return any(self._kept)

    def write(self, r: Route, params) -> Cursor:
        """Run a write to a tracked table in the transaction and keep what it changed."""
        return self._writer.write(r, params, [])

    def changes(self) -> Changes:
        """What the block changed so far, consolidated. O(its changes)."""
        out = Changes()
        for batch in self._kept:
            out.merge(batch)
        return out

    @contextlib.contextmanager
    def overlay(self) -> Iterator[None]:
        """The views with this transaction's changes applied, for one read (the caller holds
        the views exclusively). Views that treat a changed table as static keep their
        committed contents until the COMMIT rebuilds them."""
        changes = self.changes()
        undo: list = []
        if changes:
            vset = self.views.viewset
            tables = set(changes)
            keep = [m for m in vset.members.values() if not (m.static and not m.static.isdisjoint(tables))]
            vset.commit(vset.prepare(changes, only=keep), undo, quiet=True)   # told to no one
        try:
            yield
        finally:
            DuckWriter.undo(undo)

    def commit(self) -> None:
        """COMMIT: views prepared, MATERIALIZED tables written in the transaction, DuckDB commit,
        engine commit; on any error nothing is applied and the transaction is rolled back (the
        caller holds the views exclusively). Subscribers are told after the commit."""
        import duckdb

        changes = self.changes()
        vset = self.views.viewset
        writer = DuckWriter(self.conn, self.views)
        undo: list = []
        try:
            if changes:   # every view prepared (static-table readers rebuilt aside), then committed
                writer.commit(vset.prepare(changes), undo)
            self.conn.commit()
        except BaseException:
            DuckWriter.undo(undo)
            vset.discard()
            with contextlib.suppress(duckdb.Error):
                self.conn.rollback()
            raise
        finally:
            self._kept.clear()
        for t, rows in changes.items():
            cap = self.views.captures.get(t)
            if cap is not None and cap.lazy:
                cap.note([r for r, k in rows.items() for _ in range(k)], 1, False)
                cap.note([r for r, k in rows.items() for _ in range(-k)], -1, False)
        vset.notify()            # subscribers are told after DuckDB committed

    def rollback(self) -> None:
        import duckdb

        self._kept.clear()
        with contextlib.suppress(duckdb.Error):
            self.conn.rollback()
