"""Applying a view's replication stream (PostgreSQL sessions): queued transactions → one
engine batch, the materialized table and ``ivm.progress`` in one PostgreSQL transaction,
the checkpoint's change log and acknowledgements (lag and source checks: ``pg_watch``).

Runs on the caller's thread only (``poll``/``sync``/``execute``), so engine reads and writes
need no lock. The slot is acknowledged only up to what is durable: the checkpoint (snapshot
plus fsynced change log) and, for a materialized view, ``ivm.progress`` too.
"""

from __future__ import annotations

import logging
import queue
import time
import warnings
from collections import Counter

from ...errors import IVMError
from ...io.postgres import replication as pgc
from ...io.postgres.conninfo import ConnectionLostError
from ...io.postgres.pgoutput import Transaction
from ..core import notify
from .compile import compile_engine_view
from .served import apply_change
from .state import (
    SYNC_PREFIX,
    PgContext,
    PgView,
    SourceChangedError,
    ViewStoppedWarning,
)
from .stream import ReplicationError

BATCH_TRANSACTIONS = 5000

log = logging.getLogger("ivm_layer.session")


class StreamApplier:
    """Applies the queued transactions of the session's views (see the module docstring)."""

    def __init__(self, ctx: PgContext):
        self.ctx = ctx

    # -- applying ---------------------------------------------------------------------------
    def apply_available(self, vs: PgView, timeout: float) -> int:
        """Drain ``vs``'s queue (waiting up to ``timeout`` for the first item) and apply it as
        one batch; checkpoint and acknowledge. Returns the number of source-row changes."""
        if vs.error is not None or vs.reader is None:
            return 0
        txns: list[Transaction] = []
        failure: BaseException | None = None
        q = vs.reader.out
        try:
            item = q.get(timeout=timeout) if timeout > 0 else q.get_nowait()
            while True:
                if isinstance(item, BaseException):
                    failure = item
                    break
                txns.append(item)
                if len(txns) >= BATCH_TRANSACTIONS:
                    break
                item = q.get_nowait()
        except queue.Empty:
            pass
        n = self.apply(vs, txns) if txns else 0
        if failure is not None and vs.error is None:
            self.stop(vs, failure)
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
        delta: dict[str, Counter] = {}
        table_delta: dict[str, Counter] = {}
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
            tdelta: dict[str, Counter] = {}
            for t in txn.truncated:
                if t in vs.used:
                    c = tdelta.setdefault(t, Counter())
                    cur = Counter(vs.base_rows(t))
                    cur.update(delta.get(t, Counter()))
                    for r, k in cur.items():
                        if k:
                            c[r] -= k
            for t, rows in txn.changes.items():
                if t not in vs.used:
                    continue
                idx = vs.col_index.get(t)
                c = tdelta.setdefault(t, Counter())
                if idx == []:                          # row count only: one constant column
                    for _, k in rows:
                        c[(None,)] += k
                    continue
                for row, k in rows:
                    c[row if idx is None else tuple(row[i] for i in idx)] += k
            for t, c in tdelta.items():
                d = delta.setdefault(t, Counter())
                d.update(c)
                n += sum(abs(k) for k in c.values())
                if vs.materialized and txn.end_lsn > vs.table_lsn:
                    table_delta.setdefault(t, Counter()).update(c)
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

    def apply_delta(self, vs: PgView, delta: dict[str, Counter], table_delta: dict[str, Counter],
                    lsn: int) -> None:
        batch = {t: [(r, k) for r, k in c.items() if k] for t, c in delta.items()}
        batch = {t: rows for t, rows in batch.items() if rows}
        if vs.static & batch.keys():
            self.rebuild(vs, batch, table_delta, lsn)
        elif vs.materialized and lsn > vs.table_lsn:
            if table_delta == delta:
                change = vs.view.diff(batch) if batch else []
            else:
                # part of this batch is already in the table (restart): apply that part first
                early = {t: [(r, k - table_delta.get(t, Counter())[r]) for r, k in c.items()]
                         for t, c in delta.items()}
                early = {t: [(r, k) for r, k in rows if k] for t, rows in early.items()}
                early = {t: rows for t, rows in early.items() if rows}
                if early:
                    vs.view.apply(early)
                late = {t: [(r, k) for r, k in c.items() if k] for t, c in table_delta.items()}
                late = {t: rows for t, rows in late.items() if rows}
                change = vs.view.diff(late) if late else []
            self.write_table(vs, change, lsn)
            vs.table_lsn = lsn
            notify(vs, change)
        elif batch:
            if (vs.served is not None and vs.served.wants_changes) or vs.subscribers:
                change = vs.view.diff(batch)
                if vs.served is not None and vs.served.wants_changes:
                    vs.served.add(change)              # the TEMP table catches up by the change
                notify(vs, change)                     # committed in PostgreSQL already
            else:
                vs.view.apply(batch)
        if vs.store is not None:
            if vs.snapshot_due or sum(map(len, batch.values())) > max(1000, vs.store.snapshot_rows):
                vs.snapshot_due = True             # cheaper as a new snapshot than in the log
            else:
                vs.store.append(lsn, batch)        # O(changed rows); fsynced by checkpoint()
        vs.applied_lsn = lsn
        if batch:
            vs.version += 1

    def rebuild(self, vs: PgView, batch: dict, table_delta: dict, lsn: int) -> None:
        """A static table of ``vs`` changed: the engine view is compiled again and loaded from
        the base rows after the batch (static tables first), O(N); a MATERIALIZED view's table
        gets the difference, a served view's TEMP table is made again at its next read."""
        old = dict(vs.view.rows())
        base = {t: Counter(vs.base_rows(t)) for t in vs.used}
        for t, rows in batch.items():
            c = base.setdefault(t, Counter())
            for r, k in rows:
                c[r] += k
        view = compile_engine_view(vs.stmt, vs.schema, self.ctx.dialect)
        for first in (True, False):
            part = {t: [(r, k) for r, k in c.items() if k] for t, c in base.items()
                    if (t in vs.static) == first}
            part = {t: rows for t, rows in part.items() if rows}
            if part:
                view.apply(part)
        vs.view = view
        vs.rebuilds += 1
        log.info("incremental view %s rebuilt: a static table changed (rebuild %d)", vs.name, vs.rebuilds)
        if vs.served is not None:
            vs.served.drop()
        new = dict(view.rows())
        change = [(r, k - old.get(r, 0)) for r, k in new.items() if k != old.get(r, 0)]
        change += [(r, -k) for r, k in old.items() if r not in new]
        if vs.materialized and lsn > vs.table_lsn:
            self.write_table(vs, change, lsn)
            vs.table_lsn = lsn
        notify(vs, change)

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
        pos = vs.reader.received_lsn
        if pos > vs.applied_lsn and vs.reader.out.empty():
            vs.store.append(pos, {})
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
        vs.reader.acknowledge(ack)
