"""Sessions over PostgreSQL: incremental views kept fresh from logical replication.

``ivm_layer.connect("postgresql://…")`` returns a :class:`PostgresSession`, with the same
public methods as the DuckDB :class:`~ivm_layer.sessions.duckdb.Session`. Every statement goes to
PostgreSQL unchanged except ``CREATE [OR REPLACE] INCREMENTAL [MATERIALIZED] VIEW``,
``DROP VIEW`` of an incremental view, and ``SELECT`` from a non-materialized incremental
view (answered by PostgreSQL over a ``TEMP`` table holding the engine's current rows).

Per view (so views can be created at any time, each with its own consistent start):

- a publication and a logical replication slot, both named ``ivm_<db>_<session>_<view>``
  (sanitized, ≤ 63 characters);
- creation: ``CREATE_REPLICATION_SLOT … (SNAPSHOT 'export')``, COPY of the base tables under
  that snapshot (``connectors.postgres.copy_tables``), then ``START_REPLICATION`` from the
  slot's consistent point — no gap, no duplicate;
- a reader thread that owns the replication connection: it reads, decodes (``pgoutput``)
  and queues committed transactions, answers keepalives and reports the *acknowledged*
  position. It never touches the engine. The engine is updated on the caller's thread, in
  :meth:`poll`, :meth:`sync` and :meth:`execute` (a SELECT first applies what has arrived,
  and syncs after the session's own writes), so engine reads and writes need no lock. A
  session is not thread-safe: call it from one thread at a time. The queue holds at most
  ``QUEUE_TRANSACTIONS`` transactions; when it is full the reader stops reading (the server
  keeps the WAL) but keeps sending status updates so that the connection stays up;
- exactly-once across restarts: a checkpoint file (the view's input rows, projected to the
  columns it uses, and the LSN they are as of) written atomically (temp file, fsync,
  rename) under ``state_dir`` at creation, every ``checkpoint_seconds`` and at close; for a
  MATERIALIZED view, the table rows and ``ivm.progress.lsn`` are written in one PostgreSQL
  transaction. The slot is acknowledged only up to what is durable (the checkpoint LSN; for
  materialized views also ≤ the progress LSN). On restart the session loads the checkpoint,
  streams from the slot and skips transactions at or below the checkpoint LSN for the
  engine, and at or below ``ivm.progress`` for the table. Without a usable checkpoint, the
  view is rebuilt from a fresh slot and snapshot (with a warning).

Definitions live in ``ivm.views(session, name, kind, definition, slot)`` in the PostgreSQL
database, so a later session with the same ``session`` name resumes them.

Source tables must be in the ``public`` schema and have ``REPLICA IDENTITY FULL`` (updates
and deletes must carry the whole old row); ``connect(url, set_replica_identity=True)`` sets
it. ``TRUNCATE`` empties the table in the engine. An ``ALTER TABLE`` that drops or retypes
a column a view uses stops that view with :class:`SourceChangedError` (its other columns,
and other tables, may change freely); so does dropping or re-creating a source table, or
losing its REPLICA IDENTITY FULL. Values are decoded by psycopg's loaders, identically for
the snapshot and the stream (see :mod:`connectors.pgoutput`).

``CREATE_REPLICATION_SLOT`` waits for transactions that are running when it starts, as
PostgreSQL documents: a view is created once concurrent write transactions have finished.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import queue
import re
import sys
import tempfile
import threading
import time
import uuid
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import sqlglot
from sqlglot import exp

from connectors import postgres as pgc
from connectors.pgconn import ConnectionLostError, ControlConnection
from connectors.pgoutput import Transaction, ValueDecoder, lsn_str

from ..compile import compile_view
from ..engine.view import View
from ..errors import IVMError, SQLError
from .core import Cursor, SessionBase, ViewStateBase, dedupe_names
from .pg_stream import ReplicationError, StreamReader
from ..sql.statements import (
    CreateIncrementalView,
    DropView,
    SelectStatement,
    TransactionControl,
    classify,
)

SYNC_PREFIX = "ivm-layer-sync"
CHECKPOINT_VERSION = 1


class SourceChangedError(IVMError):
    """A source table changed in a way the view cannot follow (a used column dropped or
    retyped, replica identity lost): the view is stopped; drop and re-create it."""


class ViewStoppedError(IVMError):
    """A read of a view that was stopped (its cause is chained and in the message)."""


class ViewStoppedWarning(UserWarning):
    """A view stopped while the session applied changes; its own reads raise from now on."""


class LagWarning(UserWarning):
    """A view's replication slot retains more WAL than ``lag_warning_bytes``."""


def connect_postgres(url: str, session: str = "default", state_dir: str | os.PathLike | None = None,
                     set_replica_identity: bool = False, checkpoint_seconds: float = 30.0,
                     lag_warning_bytes: int = 1 << 30, reconnect_seconds: float = 60.0) -> PostgresSession:
    """Open a session on a PostgreSQL database (see the module docstring)."""
    return PostgresSession(url, session=session, state_dir=state_dir,
                           set_replica_identity=set_replica_identity,
                           checkpoint_seconds=checkpoint_seconds, lag_warning_bytes=lag_warning_bytes,
                           reconnect_seconds=reconnect_seconds)


def default_state_dir(url: str, session: str) -> Path:
    """``$XDG_STATE_HOME/ivm-layer/<host>_<port>_<db>/<session>`` (``~/.local/state`` by default)."""
    u = urlparse(url)
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    key = f"{u.hostname or 'local'}_{u.port or 5432}_{(u.path or '/').lstrip('/') or 'postgres'}"
    return base / "ivm-layer" / _sanitize(key) / _sanitize(session)


def _sanitize(s: str) -> str:
    return re.sub(r"[^a-z0-9_]", "_", s.lower())


def slot_name(db: str, session: str, view: str) -> str:
    """A replication slot / publication name for a view: ``ivm_<db>_<session>_<view>``."""
    name = _sanitize(f"ivm_{db}_{session}_{view}")
    if len(name) > 63:
        h = hashlib.sha1(name.encode()).hexdigest()[:8]
        name = name[:54] + "_" + h
    return name


@dataclass
class _PgView(ViewStateBase):
    stmt: CreateIncrementalView
    view: View
    tables: list[str]                       # engine table names
    used: dict[str, list[tuple[str, int, str]]]   # table → [(column, type_oid, sql_type)] kept
    columns: list[str]
    types: list[str]
    slot: str
    base: dict[str, Counter] = field(default_factory=dict)
    applied_lsn: int = 0                    # end LSN of the last transaction in the engine
    checkpoint_lsn: int = 0                 # durable in the checkpoint file
    table_lsn: int = 0                      # materialized: durable in ivm.progress
    last_checkpoint: float = 0.0
    reader: StreamReader | None = None
    error: BaseException | None = None
    version: int = 0
    temp_version: Any = -1
    seen_tokens: set = field(default_factory=set)
    last_commit_time: Any = None
    pending_since: Any = None
    col_index: dict[str, list[int]] = field(default_factory=dict)   # relation column positions
    oids: dict[str, int] = field(default_factory=dict)              # source table OIDs


class PostgresSession(SessionBase):
    """A PostgreSQL connection with incremental views. Build it with :func:`ivm_layer.connect`."""

    dialect = "postgres"

    def __init__(self, url: str, session: str = "default", state_dir: str | os.PathLike | None = None,
                 set_replica_identity: bool = False, checkpoint_seconds: float = 30.0,
                 lag_warning_bytes: int = 1 << 30, reconnect_seconds: float = 60.0):
        if not re.fullmatch(r"[A-Za-z0-9_]+", session):
            raise IVMError(f"session name {session!r}: use letters, digits and underscores")
        self.url = url
        self.session = session
        self.state_dir = Path(state_dir) if state_dir is not None else default_state_dir(url, session)
        self.set_replica_identity = set_replica_identity
        self.checkpoint_seconds = checkpoint_seconds
        self.lag_warning_bytes = lag_warning_bytes
        self.reconnect_seconds = reconnect_seconds
        self._values = ValueDecoder()
        self._conn = pgc.connect(url)            # the user's statements
        self._conn_generation = 0                # bumped when _conn is re-opened (TEMP tables gone)
        # catalog, markers, materialized writes, lag: re-opened when the server restarts
        self._ctl = ControlConnection(lambda: pgc.connect(url), url, reconnect_seconds)
        self._db = self._ctl.execute("SELECT current_database()").fetchone()[0]
        self._views: dict[str, _PgView] = {}
        self._dirty = False
        self._closed = False
        self._last_lag_check = 0.0
        try:
            self._ensure_catalog()
            self._load_catalog()
        except BaseException:
            self.close()
            raise

    # -- public API -------------------------------------------------------------------------
    @property
    def connection(self):
        """The psycopg connection the session's statements run on (autocommit; writes through
        it, or any other connection, reach the views through the replication stream)."""
        return self._conn

    def sync(self, timeout: float = 60.0) -> None:
        """Block until every transaction committed before the call is applied to every view.

        Commits a logical decoding message (a marker) and waits until each view's stream has
        delivered and applied it; the stream is in commit order, so everything committed
        earlier is applied too."""
        self._check_open()
        self._check_sources()
        if not any(vs.error is None for vs in self._views.values()):
            return
        token = uuid.uuid4().hex
        for attempt in range(2):
            try:
                with self._ctl.transaction() as c:
                    c.execute("SET LOCAL synchronous_commit TO on")
                    c.execute("SELECT pg_logical_emit_message(true, %s, %s)", [SYNC_PREFIX, token])
                break
            except ConnectionLostError:
                if attempt:
                    raise
        deadline = time.monotonic() + timeout
        pending = [vs for vs in self._views.values() if vs.error is None]
        while pending:
            for vs in pending:
                self._apply_available(vs, 0.0)
            # a view that stops on the way reports it on its own reads (ViewStoppedWarning now)
            pending = [vs for vs in pending if token not in vs.seen_tokens and vs.error is None]
            if not pending:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                raise IVMError(f"sync() timed out after {timeout:.0f} s waiting for view(s) "
                               f"{', '.join(v.name for v in pending)}")
            self._apply_available(pending[0], min(left, 0.5))
        for vs in self._views.values():
            vs.seen_tokens.discard(token)
        self._dirty = False

    def poll(self, timeout: float = 0.0) -> int:
        """Apply the transactions that have arrived, waiting up to ``timeout`` s for the first
        one; return how many source-row changes were applied."""
        self._check_open()
        n = 0
        deadline = time.monotonic() + timeout
        views = list(self._views.values())
        while True:
            for vs in views:
                n += self._apply_available(vs, 0.0)
            left = deadline - time.monotonic()
            if n or left <= 0 or not views:
                break
            # wait on one queue at a time, briefly, so any view's arrival ends the wait
            for vs in views:
                n += self._apply_available(vs, min(left, 0.05) / len(views))
            if n:
                break
        self._check_lag()
        return n

    def view(self, name: str) -> View:
        """The engine view ``name``; a stopped view raises :class:`ViewStoppedError`."""
        vs = self._state(name)
        self._check_stopped(vs)
        return super().view(name)

    def _view_lag(self, vs: _PgView) -> tuple[int, float]:
        return self._lag(vs, pgc.slot_lag(self._ctl, vs.slot))

    def explain(self, name: str) -> str:
        """The view's plan plus its replication state (slot, positions, lag)."""
        self._check_open()
        vs = self._state(name)
        lag = pgc.slot_lag(self._ctl, vs.slot)
        lag_b, lag_s = self._lag(vs, lag)
        lines = [vs.view.explain(), "", f"replication slot {vs.slot}"
                 + (f" (active: {lag.active}, WAL retained: {lag.retained_bytes:,} bytes, "
                    f"acknowledged {lsn_str(lag.confirmed_flush_lsn)})" if lag else " (missing!)"),
                 f"applied through {lsn_str(vs.applied_lsn)}; checkpoint {lsn_str(vs.checkpoint_lsn)}"
                 + (f"; table {lsn_str(vs.table_lsn)}" if vs.materialized else ""),
                 f"lag: {lag_b:,} bytes, {lag_s:.3f} s"]
        if vs.error is not None:
            lines.append(f"STOPPED: {vs.error}")
        return "\n".join(lines)

    def tables(self) -> dict[str, list[str]]:
        """Tables and views of the ``public`` schema and the incremental views, with columns."""
        self._check_open()
        out: dict[str, list[str]] = {}
        rows = self._ctl.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'public' ORDER BY table_name, ordinal_position").fetchall()
        for t, c in rows:
            out.setdefault(t, []).append(c)
        for n, vs in self._views.items():
            out[n] = list(vs.columns)
        return out

    def close(self, drop: bool = False) -> None:
        """Stop streaming and checkpoint every view. ``drop=True`` also drops the views (their
        slots, publications, tables, catalog rows and checkpoints)."""
        if self._closed:
            return
        self._closed = True
        try:
            for vs in list(self._views.values()):
                if drop:
                    self._drop_view(vs.name)
                else:
                    with contextlib.suppress(Exception):
                        if vs.error is None:
                            self._apply_available(vs, 0.0)
                    self._stop_reader(vs)
                    if vs.error is None:
                        with contextlib.suppress(OSError):
                            self._write_checkpoint(vs)
        finally:
            for c in (getattr(self, "_conn", None), getattr(self, "_ctl", None)):
                if c is not None:
                    with contextlib.suppress(Exception):
                        c.close()

    def _in_user_txn(self) -> bool:
        from psycopg import pq

        return self._conn.pgconn.transaction_status not in (pq.TransactionStatus.IDLE,
                                                            pq.TransactionStatus.UNKNOWN)

    def _user_conn(self):
        """The user's connection, re-opened if the server restarted or dropped it (psql does
        the same: a transaction that was open is gone, and so are TEMP tables and SETs)."""
        if self._conn.closed or self._conn.broken:
            with contextlib.suppress(Exception):
                self._conn.close()
            ctl = ControlConnection(lambda: pgc.connect(self.url), self.url, self.reconnect_seconds)
            self._conn = ctl.conn
            self._conn_generation += 1
        return self._conn

    def _execute_one(self, text: str, params) -> Cursor:
        st = classify(text, self.dialect)
        if isinstance(st, CreateIncrementalView):
            if params:
                raise IVMError("CREATE INCREMENTAL VIEW does not take parameters")
            if self._in_user_txn():
                raise IVMError("CREATE INCREMENTAL VIEW inside an explicit transaction is not supported: "
                               "COMMIT or ROLLBACK first")
            self._create_view(st)
            return Cursor()
        if isinstance(st, DropView):
            ours = [n for n in st.names if n in self._views]
            if ours:
                if self._in_user_txn():
                    raise IVMError("DROP VIEW of an incremental view inside an explicit transaction is not supported")
                for n in st.names:
                    if n in self._views:
                        self._drop_view(n)
                    else:
                        self._run(f"DROP VIEW {'IF EXISTS ' if st.if_exists else ''}{pgc.quote_ident(n)}", None)
                return Cursor()
            return self._run(text, params)
        if isinstance(st, SelectStatement):
            served = [self._views[t] for t in st.tables if t in self._views and not self._views[t].materialized]
            read = [self._views[t] for t in st.tables if t in self._views]
            if read:
                if self._dirty and not self._in_user_txn():
                    self.sync()             # read your own committed writes
                else:
                    self.poll()
                for vs in read:
                    self._check_stopped(vs)
            for vs in served:
                self._refresh_temp(vs)
            if not served or self._in_user_txn():
                return self._run(text, params)
            try:
                return self._run(text, params)
            except ConnectionLostError:
                # a read of served views only: reload them on the new connection and read again
                for vs in served:
                    self._refresh_temp(vs)
                return self._run(text, params)
        if isinstance(st, TransactionControl):
            cur = self._run(text, params)
            if st.action == "commit":
                self._dirty = True
            return cur
        if st.kind in ("DROP",) and st.drop_kind == "TABLE":
            for t in st.targets or []:
                readers = sorted(v.name for v in self._views.values() if t in v.tables)
                if readers:
                    raise IVMError(f"table {t!r} is read by incremental view(s) {', '.join(readers)}: "
                                   "drop them before dropping it")
                if t in self._views and self._views[t].materialized:
                    raise IVMError(f"{t!r} is the table of incremental materialized view {t!r}: use DROP VIEW {t}")
        cur = self._run(text, params)
        self._dirty = True
        return cur

    def _run(self, text: str, params) -> Cursor:
        import psycopg

        conn = self._user_conn()
        try:
            res = conn.execute(text, params)
        except psycopg.Error as e:
            if conn.closed or conn.broken:
                raise ConnectionLostError(
                    f"the connection to PostgreSQL was lost while running the statement ({str(e).strip()}); "
                    "it may not have run, and an open transaction was rolled back; the session "
                    "reconnects on the next statement") from None
            raise SQLError(str(e).strip()) from None
        desc = res.description
        rows = res.fetchall() if desc is not None else []
        return Cursor(desc, rows, res.rowcount)

    # -- applying the stream ----------------------------------------------------------------
    @staticmethod
    def _check_stopped(vs: _PgView) -> None:
        if vs.error is not None:
            raise ViewStoppedError(f"incremental view {vs.name!r} is stopped: {vs.error}") from vs.error

    def _apply_available(self, vs: _PgView, timeout: float) -> int:
        """Drain ``vs``'s queue (waiting up to ``timeout`` for the first item) and apply it as
        one batch: engine, materialized table + progress (one PostgreSQL transaction)."""
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
                if len(txns) >= 5000:
                    break
                item = q.get_nowait()
        except queue.Empty:
            pass
        n = 0
        if txns:
            n = self._apply(vs, txns)
        if failure is not None and vs.error is None:
            self._stop(vs, failure)
        if (vs.error is None and time.monotonic() - vs.last_checkpoint >= self.checkpoint_seconds
                and vs.applied_lsn > vs.checkpoint_lsn):
            self._write_checkpoint(vs)
        self._acknowledge(vs)
        return n

    def _stop(self, vs: _PgView, err: BaseException) -> None:
        """Stop one view: its reads raise ``err`` from now on; other views carry on."""
        if not isinstance(err, IVMError):
            err = ReplicationError(f"view {vs.name!r}: applying the stream failed: {type(err).__name__}: {err}")
        vs.error = err
        self._stop_reader(vs)
        warnings.warn(f"incremental view {vs.name!r} stopped: {err}", ViewStoppedWarning, stacklevel=4)

    def _apply(self, vs: _PgView, txns: list[Transaction]) -> int:
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
                    self._check_relation(vs, rel_name, rel)
            except SourceChangedError as e:
                stop = e
                break
            if txn.end_lsn <= last:
                continue                       # already in the checkpoint: skip (restart)
            tdelta: dict[str, Counter] = {}
            for t in txn.truncated:
                if t in vs.used:
                    c = tdelta.setdefault(t, Counter())
                    cur = Counter(vs.base.get(t, ()))
                    for prev in (delta.get(t, Counter()),):
                        cur.update(prev)
                    for r, k in cur.items():
                        if k:
                            c[r] -= k
            for t, rows in txn.changes.items():
                if t not in vs.used:
                    continue
                idx = vs.col_index.get(t)
                c = tdelta.setdefault(t, Counter())
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
                self._apply_delta(vs, delta, table_delta, last)
            except BaseException as e:
                self._stop(vs, e if isinstance(e, IVMError) else IVMError(f"applying changes failed: {e}"))
                raise
        if stop is not None:
            self._stop(vs, stop)
        return n

    def _apply_delta(self, vs: _PgView, delta: dict[str, Counter], table_delta: dict[str, Counter],
                     lsn: int) -> None:
        batch = {t: [(r, k) for r, k in c.items() if k] for t, c in delta.items()}
        batch = {t: rows for t, rows in batch.items() if rows}
        if vs.materialized and lsn > vs.table_lsn:
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
            self._write_table(vs, change, lsn)
            vs.table_lsn = lsn
        elif batch:
            vs.view.apply(batch)
        for t, rows in batch.items():
            base = vs.base.setdefault(t, Counter())
            for r, k in rows:
                v = base[r] + k
                if v:
                    base[r] = v
                else:
                    del base[r]
        vs.applied_lsn = lsn
        if batch:
            vs.version += 1

    def _write_table(self, vs: _PgView, change: list[tuple[tuple, int]], lsn: int) -> None:
        """The view change and ``ivm.progress`` in one PostgreSQL transaction. When the
        connection is lost on the way (server restart), the transaction either committed or
        was rolled back: ``ivm.progress`` tells which, and the write is repeated if needed."""
        deadline = time.monotonic() + self.reconnect_seconds
        while True:
            try:
                with self._ctl.transaction():
                    self._write_change(vs, change)
                    self._ctl.execute("UPDATE ivm.progress SET lsn = %s WHERE slot = %s", [lsn, vs.slot])
                return
            except ConnectionLostError:
                if time.monotonic() > deadline:
                    raise
                done = self._ctl.execute("SELECT lsn FROM ivm.progress WHERE slot = %s", [vs.slot]).fetchone()
                if done and done[0] >= lsn:
                    return

    def _check_relation(self, vs: _PgView, table: str, rel) -> None:
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

    def _acknowledge(self, vs: _PgView) -> None:
        if vs.reader is None:
            return
        ack = vs.checkpoint_lsn
        if vs.materialized:
            ack = min(ack, vs.table_lsn)
        vs.reader.acknowledge(ack)

    # -- lag --------------------------------------------------------------------------------
    def _lag(self, vs: _PgView, slot: pgc.SlotLag | None) -> tuple[int, float]:
        """(bytes, seconds) behind. Bytes: the server's WAL position minus ours, where ours is
        the last applied transaction or, with nothing queued, how far the walsender has
        decoded (WAL of other tables counts as consumed). Seconds: the age of the oldest
        received but unapplied transaction."""
        if slot is None:
            return 0, 0.0
        q = vs.reader.out if vs.reader else None
        pos = vs.applied_lsn
        if q is not None and q.empty() and vs.reader is not None:
            pos = max(pos, vs.reader.received_lsn, slot.sent_lsn or 0)
        lag_b = max(0, slot.current_lsn - pos)
        lag_s = 0.0
        if q is not None and not q.empty():
            with contextlib.suppress(IndexError, AttributeError):
                first = q.queue[0]
                import datetime as _dt
                lag_s = max(0.0, (_dt.datetime.now(_dt.UTC) - first.commit_time).total_seconds())
        return lag_b, lag_s

    def _check_lag(self) -> None:
        now = time.monotonic()
        if now - self._last_lag_check < 10.0 or not self._views:
            return
        self._last_lag_check = now
        self._check_sources()
        for vs in self._views.values():
            lag = pgc.slot_lag(self._ctl, vs.slot)
            if lag is not None and lag.retained_bytes > self.lag_warning_bytes:
                warnings.warn(f"replication slot {vs.slot} of view {vs.name!r} retains "
                              f"{lag.retained_bytes / 2**20:,.0f} MiB of WAL: the view is falling "
                              "behind (call poll()/sync() more often, or DROP VIEW it)", LagWarning,
                              stacklevel=3)

    def _check_sources(self) -> None:
        """Stop views whose source table was dropped or replaced (the stream says nothing
        about a dropped table: it just leaves the publication)."""
        live = [vs for vs in self._views.values() if vs.error is None]
        names = sorted({t for vs in live for t in vs.oids})
        if not names:
            return
        rows = self._ctl.execute("SELECT n, to_regclass(quote_ident(n))::oid::int FROM unnest(%s::text[]) AS n",
                                 [names]).fetchall()
        now = dict(rows)
        for vs in live:
            for t, oid in vs.oids.items():
                if now.get(t) != oid:
                    self._stop(vs, SourceChangedError(
                        f"source table {t!r} of view {vs.name!r} was dropped or replaced; "
                        "drop and re-create the view"))
                    break

    # -- views ------------------------------------------------------------------------------
    def _ensure_catalog(self) -> None:
        import psycopg

        for stmt in ("CREATE SCHEMA IF NOT EXISTS ivm",
                     ("CREATE TABLE IF NOT EXISTS ivm.views (session text NOT NULL, name text NOT NULL, "
                      "kind text NOT NULL, definition text NOT NULL, slot text NOT NULL, "
                      "PRIMARY KEY (session, name))"),
                     "CREATE TABLE IF NOT EXISTS ivm.progress (slot text PRIMARY KEY, lsn bigint NOT NULL)"):
            with contextlib.suppress(psycopg.errors.UniqueViolation, psycopg.errors.DuplicateObject):
                self._ctl.execute(stmt)

    def _load_catalog(self) -> None:
        rows = self._ctl.execute("SELECT name, definition, slot FROM ivm.views WHERE session = %s ORDER BY name",
                                 [self.session]).fetchall()
        for name, definition, slot in rows:
            st = classify(definition, self.dialect)
            if not isinstance(st, CreateIncrementalView):
                raise IVMError(f"catalog entry for view {name!r} is not a CREATE INCREMENTAL VIEW: {definition!r}")
            self._views[name] = self._resume(st, slot)

    def _used_columns(self, st: CreateIncrementalView) -> dict[str, list[tuple[str, int, str]]]:
        tree = sqlglot.parse_one(st.select_sql, read=self.dialect)
        star = any(True for _ in tree.find_all(exp.Star))
        # every identifier (columns, JOIN … USING names, and harmlessly table names/aliases):
        # a superset of the columns the view reads
        names = {i.name.lower() for i in tree.find_all(exp.Identifier)}
        used: dict[str, list[tuple[str, int, str]]] = {}
        for t in st.tables:
            if t in self._views:
                raise SQLError(f"incremental view {st.name!r} reads incremental view {t!r}: "
                               "views over views are not supported yet")
            cols = pgc.table_columns(self._ctl, t)
            if cols is None:
                raise SQLError(f"unknown table {t!r} in the definition of {st.name!r} "
                               "(source tables must be in the public schema)")
            used[t] = [(c, oid, typ) for c, typ, oid in cols if star or c.lower() in names]
        if not used:
            raise SQLError(f"incremental view {st.name!r} reads no table")
        return used

    def _check_identity(self, tables: list[str]) -> None:
        for t in tables:
            if pgc.replica_identity(self._ctl, t) != "f":
                if self.set_replica_identity:
                    pgc.set_replica_identity_full(self._ctl, t)
                else:
                    raise IVMError(
                        f"table {t!r} needs REPLICA IDENTITY FULL so that updates and deletes carry the "
                        f"whole old row: run ALTER TABLE {t} REPLICA IDENTITY FULL, or connect with "
                        "ivm_layer.connect(url, set_replica_identity=True) to let the session do it")

    def _compile(self, st: CreateIncrementalView) -> _PgView:
        used = self._used_columns(st)
        schema = {t: {c: typ for c, _, typ in cols} for t, cols in used.items()}
        view = compile_view(st.select_sql, schema, dialect=self.dialect)
        cur = self._ctl.execute(f"SELECT * FROM ({st.select_sql}) AS q LIMIT 0")
        columns = dedupe_names([d.name for d in cur.description])
        types = [self._ctl.execute("SELECT format_type(%s, NULL)", [d.type_code]).fetchone()[0]
                 for d in cur.description]
        if st.columns:
            if len(st.columns) != len(types):
                raise SQLError(f"view {st.name!r} names {len(st.columns)} columns but its query has {len(types)}")
            columns = list(st.columns)
        if len(types) != len(view.columns):
            raise IVMError(f"internal: PostgreSQL sees {len(types)} columns, the engine {len(view.columns)}")
        vs = _PgView(st, view, list(used), used, columns, types, slot_name(self._db, self.session, st.name))
        vs.oids = {t: self._ctl.execute("SELECT to_regclass(quote_ident(%s))::oid::int", [t]).fetchone()[0]
                   for t in used}
        return vs

    def _create_view(self, st: CreateIncrementalView) -> None:
        name = st.name
        if name in self._views:
            if st.if_not_exists:
                return
            if not st.or_replace:
                raise SQLError(f"incremental view {name!r} already exists")
            self._drop_view(name)
        exists = self._ctl.execute("SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                                   "WHERE n.nspname = 'public' AND c.relname = %s", [name]).fetchone()
        if exists:
            raise SQLError(f"cannot create incremental view {name!r}: a table or view of that name exists")
        other = self._ctl.execute("SELECT session FROM ivm.views WHERE name = %s", [name]).fetchone()
        if other and st.materialized:
            raise SQLError(f"view {name!r} already exists in session {other[0]!r}")
        vs = self._compile(st)
        self._check_identity(vs.tables)
        try:
            self._initialize(vs, new=True)
        except BaseException:
            self._stop_reader(vs)
            with contextlib.suppress(Exception):
                self._cleanup(vs)
            raise
        self._views[name] = vs

    def _initialize(self, vs: _PgView, new: bool) -> None:
        """Slot with exported snapshot → COPY → (table, catalog, progress) → checkpoint → stream."""
        pgc.ensure_publication(self._ctl, vs.slot, vs.tables)
        pgc.drop_slot(self._ctl, vs.slot)          # a leftover of an interrupted creation
        stream = pgc.ReplicationStream(self.url)
        try:
            slot = stream.create_slot(vs.slot)
            rows = pgc.copy_tables(self.url, slot.snapshot,
                                   {t: [(c, oid) for c, oid, _ in cols] for t, cols in vs.used.items()},
                                   self._values, pgc.stderr_progress if sys.stderr.isatty() else None)
            vs.base = {t: Counter(r) for t, r in rows.items()}
            vs.view.apply({t: list(c.items()) for t, c in vs.base.items()})
            vs.applied_lsn = vs.checkpoint_lsn = vs.table_lsn = slot.consistent_lsn
            with self._ctl.transaction():
                if vs.materialized:
                    cols = ", ".join(f"{pgc.quote_ident(c)} {t}" for c, t in zip(vs.columns, vs.types))
                    self._ctl.execute(f"DROP TABLE IF EXISTS public.{pgc.quote_ident(vs.name)}")
                    self._ctl.execute(f"CREATE TABLE public.{pgc.quote_ident(vs.name)} ({cols})")
                    self._copy_in(self._ctl, f"public.{pgc.quote_ident(vs.name)}", vs.view.rows(), vs.types)
                self._ctl.execute("INSERT INTO ivm.progress VALUES (%s, %s) ON CONFLICT (slot) "
                                  "DO UPDATE SET lsn = excluded.lsn", [vs.slot, slot.consistent_lsn])
                if new:
                    self._ctl.execute("INSERT INTO ivm.views VALUES (%s, %s, %s, %s, %s)",
                                      [self.session, vs.name, "materialized" if vs.materialized else "incremental",
                                       vs.stmt.definition(self.dialect), vs.slot])
            self._write_checkpoint(vs)
            stream.start(vs.slot, vs.slot, slot.consistent_lsn)
        except BaseException:
            stream.close()
            raise
        vs.version += 1
        self._start_reader(vs, stream)

    def _resume(self, st: CreateIncrementalView, slot: str) -> _PgView:
        vs = self._compile(st)
        vs.slot = slot
        ck = self._read_checkpoint(vs)
        lag = pgc.slot_lag(self._ctl, slot)
        progress = self._ctl.execute("SELECT lsn FROM ivm.progress WHERE slot = %s", [slot]).fetchone()
        table_lsn = progress[0] if progress else 0
        reason = None
        if ck is None:
            reason = "no checkpoint file"
        elif lag is None:
            reason = "its replication slot is missing"
        elif lag.confirmed_flush_lsn > ck["lsn"]:
            reason = (f"the slot was acknowledged up to {lsn_str(lag.confirmed_flush_lsn)}, after the "
                      f"checkpoint ({lsn_str(ck['lsn'])})")
        elif ck.get("oids") != vs.oids:
            reason = "a source table was dropped and re-created"
        elif vs.materialized and table_lsn < ck["lsn"]:
            reason = "the view table is older than the checkpoint"
        if reason is not None:
            warnings.warn(f"incremental view {vs.name!r}: {reason} in {self.state_dir}; rebuilding it from "
                          "a fresh snapshot", stacklevel=4)
            self._check_identity(vs.tables)
            self._initialize(vs, new=False)
            return vs
        vs.base = {t: Counter(dict(rows)) for t, rows in ck["tables"].items()}
        vs.view.apply({t: list(c.items()) for t, c in vs.base.items()})
        vs.applied_lsn = vs.checkpoint_lsn = ck["lsn"]
        vs.table_lsn = table_lsn
        vs.last_checkpoint = time.monotonic()
        self._start_reader(vs, self._open_stream(slot, ck["lsn"]))
        return vs

    def _open_stream(self, slot: str, lsn: int, wait: float = 15.0) -> pgc.ReplicationStream:
        """START_REPLICATION on an existing slot; waits while the walsender of a previous
        (e.g. killed) consumer still holds the slot."""
        deadline = time.monotonic() + wait
        while True:
            stream = pgc.ReplicationStream(self.url)
            try:
                stream.start(slot, slot, lsn)
                return stream
            except pgc.PostgresError as e:
                stream.close()
                if "is active for PID" not in str(e):
                    raise
                if time.monotonic() > deadline:
                    raise IVMError(f"replication slot {slot} is in use by another process: is session "
                                   f"{self.session!r} open elsewhere? ({e})") from e
                time.sleep(0.2)
            except BaseException:
                stream.close()
                raise

    def _start_reader(self, vs: _PgView, stream: pgc.ReplicationStream) -> None:
        slot = vs.slot

        def reopen(lsn: int) -> pgc.ReplicationStream:
            st = pgc.ReplicationStream(self.url)
            try:
                st.start(slot, slot, lsn)
            except BaseException:
                st.close()
                raise
            return st

        vs.reader = StreamReader(reopen, stream, vs.name, slot, vs.applied_lsn,
                                 reconnect_seconds=self.reconnect_seconds).start()

    def _stop_reader(self, vs: _PgView) -> None:
        if vs.reader is not None:
            vs.reader.close()
            vs.reader = None

    def _drop_view(self, name: str) -> None:
        vs = self._views[name]
        self._stop_reader(vs)
        self._cleanup(vs)
        del self._views[name]

    def _cleanup(self, vs: _PgView) -> None:
        with self._ctl.transaction():
            if vs.materialized:
                self._ctl.execute(f"DROP TABLE IF EXISTS public.{pgc.quote_ident(vs.name)}")
                self._ctl.execute(f"DROP TABLE IF EXISTS pg_temp.{pgc.quote_ident('_ivm_del_' + vs.name)}")
            self._ctl.execute("DELETE FROM ivm.views WHERE session = %s AND name = %s", [self.session, vs.name])
            self._ctl.execute("DELETE FROM ivm.progress WHERE slot = %s", [vs.slot])
        with contextlib.suppress(Exception):
            self._conn.execute(f"DROP TABLE IF EXISTS pg_temp.{pgc.quote_ident(vs.name)}")
        pgc.drop_slot(self._ctl, vs.slot)
        pgc.drop_publication(self._ctl, vs.slot)
        with contextlib.suppress(FileNotFoundError):
            self._checkpoint_path(vs).unlink()

    # -- checkpoints ------------------------------------------------------------------------
    def _checkpoint_path(self, vs: _PgView) -> Path:
        return self.state_dir / f"{vs.slot}.ckpt"

    def _write_checkpoint(self, vs: _PgView) -> None:
        """Atomically replace the view's checkpoint: its input rows as of ``applied_lsn``."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        data = {"version": CHECKPOINT_VERSION, "slot": vs.slot, "definition": vs.stmt.definition(self.dialect),
                "lsn": vs.applied_lsn, "oids": vs.oids,
                "tables": {t: list(c.items()) for t, c in vs.base.items()}}
        path = self._checkpoint_path(vs)
        fd, tmp = tempfile.mkstemp(dir=self.state_dir, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(data, f, protocol=pickle.HIGHEST_PROTOCOL)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            dfd = os.open(self.state_dir, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        vs.checkpoint_lsn = vs.applied_lsn
        vs.last_checkpoint = time.monotonic()

    def _read_checkpoint(self, vs: _PgView) -> dict | None:
        path = self._checkpoint_path(vs)
        try:
            with open(path, "rb") as f:
                data = pickle.load(f)
        except FileNotFoundError:
            return None
        except Exception as e:  # noqa: BLE001 - a corrupt file means: rebuild, with a warning
            warnings.warn(f"unreadable checkpoint {path}: {e}", stacklevel=4)
            return None
        if (data.get("version") != CHECKPOINT_VERSION or data.get("slot") != vs.slot
                or data.get("definition") != vs.stmt.definition(self.dialect)):
            return None
        return data

    # -- serving and writing view rows --------------------------------------------------------
    def _refresh_temp(self, vs: _PgView) -> None:
        self._user_conn()
        in_txn = self._in_user_txn()
        if vs.temp_version == (vs.version, self._conn_generation) and not in_txn:
            return
        import psycopg

        cols = ", ".join(f"{pgc.quote_ident(c)} {t}" for c, t in zip(vs.columns, vs.types))
        q = pgc.quote_ident(vs.name)
        for attempt in range(2):
            try:
                self._conn.execute(f"DROP TABLE IF EXISTS pg_temp.{q}")
                break
            except psycopg.OperationalError:
                if attempt or not (self._conn.closed or self._conn.broken) or in_txn:
                    raise
                self._user_conn()              # dropped since the last statement: re-open
        self._conn.execute(f"CREATE TEMP TABLE {q} ({cols})")
        self._copy_in(self._conn, f"pg_temp.{q}", vs.view.rows(), vs.types)
        # inside a transaction block a ROLLBACK may undo the refresh: reload next time
        vs.temp_version = -1 if in_txn else (vs.version, self._conn_generation)

    @staticmethod
    def _copy_in(conn, target: str, pairs, types: list[str]) -> None:
        """COPY ``(row, k)`` pairs (k copies each) into ``target``; array values, tuples in
        the engine, go back as lists."""
        arrays = [i for i, t in enumerate(types) if t.endswith("]")]
        with conn.cursor().copy(f"COPY {target} FROM STDIN") as cp:
            for row, k in pairs:
                if arrays:
                    row = list(row)
                    for i in arrays:
                        if row[i] is not None:
                            row[i] = _thaw(row[i])
                for _ in range(k):
                    cp.write_row(row)

    def _write_change(self, vs: _PgView, change: list[tuple[tuple, int]]) -> None:
        """Apply a view change to its table (inside the caller's transaction on ``_ctl``)."""
        if not change:
            return
        table = f"public.{pgc.quote_ident(vs.name)}"
        dels = [(r, -k) for r, k in change if k < 0]
        ins = [(r, k) for r, k in change if k > 0]
        if dels:
            # rows to delete (with how many copies) go to a per-view temp table, then one DELETE
            # picks that many physical rows per value; rows match on their text form
            # (IS NOT DISTINCT FROM semantics, and a hash join)
            cols = ", ".join(f"{pgc.quote_ident(c)} {t}" for c, t in zip(vs.columns, vs.types))
            tmp = "pg_temp." + pgc.quote_ident(f"_ivm_del_{vs.name}")
            self._ctl.execute(f"CREATE TEMP TABLE IF NOT EXISTS {tmp} ({cols}, _ivm_id bigint, _ivm_k bigint) "
                              "ON COMMIT DELETE ROWS")
            self._copy_in(self._ctl, tmp, [(r + (i, k), 1) for i, (r, k) in enumerate(dels)],
                          vs.types + ["bigint", "bigint"])
            rec_m = "ROW(" + ", ".join(f"m.{pgc.quote_ident(c)}" for c in vs.columns) + ")::text"
            rec_d = "ROW(" + ", ".join(f"d.{pgc.quote_ident(c)}" for c in vs.columns) + ")::text"
            self._ctl.execute(
                f"DELETE FROM {table} WHERE ctid IN (SELECT rid FROM ("
                f"SELECT m.ctid AS rid, d._ivm_k AS k, "
                f"row_number() OVER (PARTITION BY d._ivm_id ORDER BY m.ctid) AS rn "
                f"FROM {table} m JOIN {tmp} d ON {rec_m} = {rec_d}) x WHERE rn <= k)")
        if ins:
            self._copy_in(self._ctl, table, ins, vs.types)


def _thaw(v):
    """An array value as the engine holds it (nested tuples) → lists for psycopg."""
    if isinstance(v, tuple):
        return [_thaw(x) for x in v]
    return v
