"""Applying a view's replication stream (PostgreSQL sessions): queued transactions → one
engine batch, the materialized table and ``ivm.progress`` in one PostgreSQL transaction,
the checkpoint's change log and acknowledgements (lag and source checks: ``pg_watch``).

Runs on the caller's thread only (``poll``/``sync``/``execute``), so engine reads and writes
need no lock. The slot is acknowledged only up to what is durable: the checkpoint (snapshot
plus fsynced change log) and, for a materialized view, ``ivm.progress`` too.
"""

from __future__ import annotations

import time
import warnings

from ...errors import IVMError
from ...io.postgres import replication as pgc
from ...io.postgres.conninfo import ConnectionLostError
from ...io.postgres.pgoutput import Transaction
from ...maintain.changes import Changes
from .served import apply_change
from .state import (
    SYNC_PREFIX,
    PgContext,
    PgView,
    SourceChangedError,
    ViewStoppedWarning,
)
from ...io.postgres.feed import ReplicationError

BATCH_TRANSACTIONS = 5000



class StreamApplier:
    """Applies the queued transactions of the session's views (see the module docstring)."""

    def __init__(self, ctx: PgContext):
        self.ctx = ctx

    # -- applying ---------------------------------------------------------------------------
    def apply_available(self, vs: PgView, timeout: float) -> int:
        """Take what ``vs``'s feed staged (waiting up to ``timeout`` for the first transaction)
        and apply it as one batch; checkpoint and acknowledge. A feed that failed for good stops
        the view once everything it staged before the failure is applied. Returns the number
        of source-row changes."""
        if vs.error is not None or vs.reader is None:
            return 0
        feed = vs.reader
        txns = feed.drain(BATCH_TRANSACTIONS, timeout)
        n = self.apply(vs, txns) if txns else 0
        if feed.error is not None and not feed.pending() and vs.error is None:
            self.stop(vs, stream_failure(vs, feed.error))
        if vs.error is None:
            self.checkpoint(vs)
        self.acknowledge(vs)
        return n

    def stop(self, vs: PgView, err: BaseException) -> None:
        """Stop one view: its reads raise ``err`` from now on; other views carry on."""
        if not isinstance(err, IVMError):
            err = ReplicationError(f"view {vs.name!r}: applying the stream failed: {type(err).__name__}: {err}")
        vs.error = err
        vs.stop_reader()
        warnings.warn(f"incremental view {vs.name!r} stopped: {err}", ViewStoppedWarning, stacklevel=4)

    def apply(self, vs: PgView, txns: list[Transaction]) -> int:
        """Consolidate ``txns`` (after the view's position) into one batch for ``vs`` — the
        columns it reads, TRUNCATEs relative to its rows — and apply it (:meth:`apply_delta`).
        Returns the source-row changes applied."""
        delta = Changes()
        table_delta = Changes()        # the part a MATERIALIZED view's table does not hold yet
        last = vs.applied_lsn
        n = 0
        stop: BaseException | None = None
        for txn in txns:
            for m in txn.messages:
                if m.prefix == SYNC_PREFIX:
                    vs.seen_tokens.add(m.content.decode())
            try:
                for rel_name, rel in txn.relations.items():
                    self.check_relation(vs, rel_name, rel)
            except SourceChangedError as e:
                stop = e
                break
            if txn.end_lsn <= last:
                continue                       # already in the checkpoint: skip (restart)
            tdelta = Changes()
            for t in txn.truncated:
                if t in vs.used:
                    tdelta.truncate(t, delta.applied_to(vs.base_rows(t), t))
            for t, rows in txn.changes.items():
                if t not in vs.used:
                    continue
                idx = vs.col_index.get(t)
                if idx == []:                          # row count only: one constant column
                    tdelta.add_pairs(t, (((None,), k) for _, k in rows))
                elif idx is None:
                    tdelta.add_pairs(t, rows)
                else:
                    tdelta.add_pairs(t, ((tuple(row[i] for i in idx), k) for row, k in rows))
            delta.merge(tdelta)
            n += tdelta.volume()
            if vs.materialized and txn.end_lsn > vs.table_lsn:
                table_delta.merge(tdelta)
            last = txn.end_lsn
            vs.last_commit_time = txn.commit_time
        if last > vs.applied_lsn or delta:
            try:
                self.apply_delta(vs, delta, table_delta, last)
            except Exception as e:  # noqa: BLE001 - this view stops; the others carry on
                self.stop(vs, e if isinstance(e, IVMError) else
                          ReplicationError(f"view {vs.name!r}: applying changes failed: {type(e).__name__}: {e}"))
                return n
        if stop is not None:
            self.stop(vs, stop)
        return n

    def apply_delta(self, vs: PgView, delta: Changes, table_delta: Changes, lsn: int) -> None:
        """One batch through the view's :class:`~ivm_layer.maintain.viewset.ViewSet` (a write to a
        static table rebuilds the view), then its change to the MATERIALIZED table with
        ``ivm.progress`` (or to the served TEMP table), the subscribers told, the batch in the
        checkpoint log (O(changed rows); a batch larger than the snapshot asks for a new
        snapshot instead)."""
        viewset = vs.viewset
        if vs.materialized and lsn > vs.table_lsn and table_delta != delta:
            # part of this batch is already in the table (restart): the engine catches up with
            # it quietly, and only the rest is the table's change
            viewset.apply(Changes().merge(delta).merge(table_delta.negated()), quiet=True)
            outcome = viewset.apply(table_delta)
        else:
            outcome = viewset.apply(delta)
        change = outcome.get(vs, [])
        if vs in outcome.rebuilt:
            if vs.served is not None:
                vs.served.drop()                   # made again at its next read
        elif change and vs.served is not None and vs.served.wants_changes:
            vs.served.add(change)                  # the TEMP table catches up by the change
        if vs.materialized and lsn > vs.table_lsn:
            self.write_table(vs, change, lsn)
            vs.table_lsn = lsn
        viewset.notify()                           # committed in PostgreSQL already
        if vs.store is not None:
            if vs.snapshot_due or delta.size > max(1000, vs.store.snapshot_rows):
                vs.snapshot_due = True             # cheaper as a new snapshot than in the log
            else:
                viewset.log(lsn, delta)            # O(changed rows); fsynced by checkpoint()
        vs.applied_lsn = lsn
        if delta:
            vs.version += 1

    def write_table(self, vs: PgView, change: list[tuple[tuple, int]], lsn: int) -> None:
        """The view change and ``ivm.progress`` in one PostgreSQL transaction. When the
        connection is lost on the way (server restart), the transaction either committed or
        was rolled back: ``ivm.progress`` tells which, and the write is repeated if needed."""
        ctl = self.ctx.ctl
        deadline = time.monotonic() + self.ctx.reconnect_seconds
        while True:
            try:
                with ctl.transaction():
                    if change:
                        apply_change(ctl, f"public.{pgc.quote_ident(vs.name)}", vs.name, vs.columns,
                                     vs.types, change)
                    ctl.execute("UPDATE ivm.progress SET lsn = %s WHERE slot = %s", [lsn, vs.slot])
                return
            except ConnectionLostError:
                if time.monotonic() > deadline:
                    raise
                done = ctl.execute("SELECT lsn FROM ivm.progress WHERE slot = %s", [vs.slot]).fetchone()
                if done and done[0] >= lsn:
                    return

    def check_relation(self, vs: PgView, table: str, rel) -> None:
        if table not in vs.used:
            return
        if rel.replica_identity != "f":
            raise SourceChangedError(
                f"table {table!r} no longer has REPLICA IDENTITY FULL (now {rel.replica_identity!r}); "
                f"updates and deletes cannot be followed")
        pos = {c.name: (i, c.type_oid) for i, c in enumerate(rel.columns)}
        idx = []
        for col, oid, sqltype in vs.used[table]:
            if col not in pos:
                raise SourceChangedError(f"column {table}.{col} used by view {vs.name!r} was dropped or "
                                         f"renamed (ALTER TABLE); drop and re-create the view")
            i, new_oid = pos[col]
            if new_oid != oid:
                raise SourceChangedError(f"column {table}.{col} used by view {vs.name!r} changed type "
                                         f"(was {sqltype}); drop and re-create the view")
            idx.append(i)
        vs.col_index[table] = idx

    # -- durability ---------------------------------------------------------------------------
    def checkpoint(self, vs: PgView, force: bool = False) -> None:
        """Every ``checkpoint_seconds`` (or when ``force``): fsync the change log (O(changes
        since the last time)), and when the log has outgrown the snapshot, write a new
        snapshot (which starts an empty log)."""
        if vs.store is None:
            return
        if not force and time.monotonic() - vs.last_checkpoint < self.ctx.checkpoint_seconds:
            return
        self.advance_idle(vs)
        if vs.applied_lsn <= vs.checkpoint_lsn:
            return
        if vs.snapshot_due or vs.store.log_bytes > max(vs.store.snapshot_bytes, 1 << 20):
            self.write_snapshot(vs)
            return
        durable = vs.store.sync_log()
        if durable:
            vs.checkpoint_lsn = durable
        vs.last_checkpoint = time.monotonic()

    def advance_idle(self, vs: PgView) -> None:
        """With nothing queued, the WAL the reader has passed holds nothing more for this
        view: record that position (a log entry without changes), so that the slot can be
        acknowledged past other tables' WAL and does not retain it. The reader's position is
        read before the queue is checked: it publishes a position only after queueing every
        transaction before it, so an empty queue then means they were all applied."""
        if vs.materialized or vs.reader is None or vs.snapshot_due:
            return
        pos = vs.reader.position
        if pos > vs.applied_lsn and not vs.reader.pending():
            vs.viewset.log(pos)
            vs.applied_lsn = pos

    def write_snapshot(self, vs: PgView) -> None:
        vs.store.write_snapshot({"slot": vs.slot, "definition": vs.stmt.definition(self.ctx.dialect),
                                 "oids": vs.oids}, {t: vs.base_rows(t).items() for t in vs.used},
                                vs.applied_lsn, columnar=True)
        vs.checkpoint_lsn = vs.applied_lsn
        vs.last_checkpoint = time.monotonic()
        vs.snapshot_due = False

    def acknowledge(self, vs: PgView) -> None:
        if vs.reader is None:
            return
        ack = vs.checkpoint_lsn
        if vs.materialized:
            ack = min(ack, vs.table_lsn)
        vs.reader.commit(ack)


def stream_failure(vs: PgView, err: BaseException) -> IVMError:
    """The error a view's failed feed stops it with, in the session's terms."""
    if isinstance(err, pgc.PostgresError) and err.sqlstate == "42704" and "publication" in str(err):
        return ReplicationError(f"the publication {vs.slot} of view {vs.name!r} was dropped behind the "
                                f"session's back ({err}); DROP VIEW {vs.name} and create it again")
    if isinstance(err, pgc.PostgresError) and err.sqlstate == "42704":
        return ReplicationError(f"the replication slot {vs.slot} of view {vs.name!r} was dropped behind "
                                f"the session's back ({err}); DROP VIEW {vs.name} and create it again")
    if isinstance(err, ReplicationError):
        return ReplicationError(f"view {vs.name!r}: {err}; the view is stopped: reconnect the session when "
                                "the server is back")
    return ReplicationError(f"view {vs.name!r}: the replication stream failed: {type(err).__name__}: {err}")
