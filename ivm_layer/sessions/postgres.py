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
from connectors.pgoutput import PgOutputDecoder, Transaction, ValueDecoder, lsn_str

from ..compile import compile_view
from ..engine.view import View
from ..errors import IVMError, SQLError
from . import reads
from .core import Cursor, SessionBase, ViewStateBase, dedupe_names
from .pg_served import ServedTable, apply_change, copy_rows, star_target, thaw
from .router import route
from ..sql.statements import (
    CreateIncrementalView,
    DropView,
    classify,
)

SYNC_PREFIX = "ivm-layer-sync"
CHECKPOINT_VERSION = 1
QUEUE_TRANSACTIONS = 20_000      # decoded transactions buffered per view before reading pauses


class SourceChangedError(IVMError):
    """A source table changed in a way the view cannot follow (a used column dropped or
    retyped, replica identity lost): the view is stopped; drop and re-create it."""


class LagWarning(UserWarning):
    """A view's replication slot retains more WAL than ``lag_warning_bytes``."""


def connect_postgres(url: str, session: str = "default", state_dir: str | os.PathLike | None = None,
                     set_replica_identity: bool = False, checkpoint_seconds: float = 30.0,
                     lag_warning_bytes: int = 1 << 30) -> PostgresSession:
    """Open a session on a PostgreSQL database (see the module docstring)."""
    return PostgresSession(url, session=session, state_dir=state_dir,
                           set_replica_identity=set_replica_identity,
                           checkpoint_seconds=checkpoint_seconds, lag_warning_bytes=lag_warning_bytes)


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
class _Reader:
    """The background thread owning one view's replication connection."""

    stream: pgc.ReplicationStream
    out: queue.Queue
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    received_lsn: int = 0        # stream position with everything before it queued

    def run(self) -> None:
        dec = PgOutputDecoder()
        try:
            while not self.stop.is_set():
                for lsn, payload in self.stream.read(0.2):
                    txn = dec.feed(payload, lsn)
                    if txn is not None:
                        self._put(txn)
                if not dec.in_transaction:
                    self.received_lsn = self.stream.received_lsn
        except BaseException as e:  # noqa: BLE001 - handed to the consumer thread, which stops the view
            if not self.stop.is_set():
                self.out.put(e)
        finally:
            self.stream.close()

    def _put(self, txn: Transaction) -> None:
        """Queue a transaction; while the consumer is far behind (queue full) stop reading,
        so the server holds the WAL, but keep sending status updates so that the walsender
        does not time the connection out."""
        while not self.stop.is_set():
            try:
                self.out.put(txn, timeout=1.0)
                return
            except queue.Full:
                self.stream.send_status()


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
    reader: _Reader | None = None
    error: BaseException | None = None
    version: int = 0
    served: ServedTable | None = None      # non-materialized: its TEMP table for PostgreSQL reads
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
                 lag_warning_bytes: int = 1 << 30):
        if not re.fullmatch(r"[A-Za-z0-9_]+", session):
            raise IVMError(f"session name {session!r}: use letters, digits and underscores")
        self.url = url
        self.session = session
        self.state_dir = Path(state_dir) if state_dir is not None else default_state_dir(url, session)
        self.set_replica_identity = set_replica_identity
        self.checkpoint_seconds = checkpoint_seconds
        self.lag_warning_bytes = lag_warning_bytes
        self._values = ValueDecoder()
        self._conn = pgc.connect(url)            # the user's statements
        self._ctl = pgc.connect(url)             # catalog, markers, materialized writes, lag
        self._db = self._ctl.execute("SELECT current_database()").fetchone()[0]
        self._views: dict[str, _PgView] = {}
        self._names = reads.ViewNames()
        self._shapes: dict[str, Any] = {}
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
        self._raise_stopped()
        if not self._views:
            return
        token = uuid.uuid4().hex
        with self._ctl.transaction():
            self._ctl.execute("SET LOCAL synchronous_commit TO on")
            self._ctl.execute("SELECT pg_logical_emit_message(true, %s, %s)", [SYNC_PREFIX, token])
        deadline = time.monotonic() + timeout
        pending = list(self._views.values())
        while pending:
            for vs in pending:
                self._apply_available(vs, 0.0)
            self._raise_stopped()
            pending = [vs for vs in pending if token not in vs.seen_tokens]
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
        self._raise_stopped()
        return n

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

        return self._conn.pgconn.transaction_status != pq.TransactionStatus.IDLE

    def _execute_one(self, text: str, params) -> Cursor:
        r = route(text)
        kind = r.kind
        if kind == "create_view":
            st = classify(text, self.dialect)
            if params:
                raise IVMError("CREATE INCREMENTAL VIEW does not take parameters")
            if self._in_user_txn():
                raise IVMError("CREATE INCREMENTAL VIEW inside an explicit transaction is not supported: "
                               "COMMIT or ROLLBACK first")
            self._create_view(st)
            return Cursor()
        if kind == "drop":
            return self._drop(text, params)
        if kind in ("begin", "commit", "rollback"):
            return self._transaction(r, params)
        names = self._names.find(text) if self._views else []
        if names:
            return self._serve(r, names, params)
        cur = self._run(text, params)
        if kind != "read":
            self._dirty = True
        return cur

    def _serve(self, r, names: list[str], params) -> Cursor:
        """A statement that mentions incremental views: apply what has arrived (after the
        session's own writes, wait for them), then answer from the engine where the shape
        allows, else bring the served views' TEMP tables up to date and run it."""
        if self._dirty and not self._in_user_txn():
            self.sync()             # read your own committed writes
        else:
            self.poll()
        for n in names:
            vs = self._views[n]
            if vs.error is not None:
                raise SourceChangedError(f"incremental view {vs.name!r} is stopped: {vs.error}")
        if r.kind == "read" and params is None and len(names) == 1 and not self._views[names[0]].materialized:
            vs = self._views[names[0]]
            if reads.count_target(r.text) == vs.name:
                return Cursor(self._shape(r.text, vs), [(len(vs.view),)], 1)
            star = star_target(r.text)
            if star is not None and star[0] == vs.name:
                rows = list(_expand(vs.view.rows(), star[1], vs.types))
                return Cursor(self._shape(f"SELECT * FROM {pgc.quote_ident(vs.name)}", vs), rows, len(rows))
        for n in names:
            vs = self._views[n]
            if not vs.materialized:
                self._refresh_temp(vs)
        cur = self._run(r.text, params)
        if r.kind != "read":
            self._dirty = True
        return cur

    def _shape(self, text: str, vs: _PgView):
        """PostgreSQL's result description of ``text`` over the view (cached; ``LIMIT 0`` over an
        empty TEMP table of the view's columns: no rows are read)."""
        desc = self._shapes.get(text)
        if desc is None:
            if not vs.served.ready:
                cols = ", ".join(f"{pgc.quote_ident(c)} {t}" for c, t in zip(vs.columns, vs.types))
                self._conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {pgc.quote_ident(vs.name)} ({cols})")
            desc = self._run(f"SELECT * FROM ({text}) AS q LIMIT 0", None).description
            self._shapes[text] = desc
        return desc

    def _transaction(self, r, params) -> Cursor:
        from psycopg import pq

        failed = self._conn.pgconn.transaction_status == pq.TransactionStatus.INERROR
        cur = self._run(r.text, params)
        if r.kind in ("commit", "rollback"):
            committed = r.kind == "commit" and not failed
            for vs in self._views.values():
                if vs.served is not None:
                    vs.served.end_transaction(committed)
            if r.kind == "commit":
                self._dirty = True
        return cur

    def _drop(self, text: str, params) -> Cursor:
        st = classify(text, self.dialect)
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
        if getattr(st, "drop_kind", None) == "TABLE":
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

        try:
            res = self._conn.execute(text, params)
        except psycopg.Error as e:
            raise SQLError(str(e).strip()) from e
        desc = res.description
        rows = res.fetchall() if desc is not None else []
        return Cursor(desc, rows, res.rowcount)

    # -- applying the stream ----------------------------------------------------------------
    def _raise_stopped(self) -> None:
        for vs in self._views.values():
            if vs.error is not None:
                raise SourceChangedError(f"incremental view {vs.name!r} is stopped: {vs.error}") from vs.error

    def _apply_available(self, vs: _PgView, timeout: float) -> int:
        """Drain ``vs``'s queue (waiting up to ``timeout`` for the first item) and apply it as
        one batch: engine, materialized table + progress (one PostgreSQL transaction)."""
        if vs.error is not None or vs.reader is None:
            return 0
        txns: list[Transaction] = []
        q = vs.reader.out
        try:
            item = q.get(timeout=timeout) if timeout > 0 else q.get_nowait()
            while True:
                if isinstance(item, BaseException):
                    self._stop(vs, item)
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
        if (vs.error is None and time.monotonic() - vs.last_checkpoint >= self.checkpoint_seconds
                and vs.applied_lsn > vs.checkpoint_lsn):
            self._write_checkpoint(vs)
        self._acknowledge(vs)
        return n

    def _stop(self, vs: _PgView, err: BaseException) -> None:
        if not isinstance(err, IVMError):
            err = SourceChangedError(f"replication stream failed: {err}")
        vs.error = err
        self._stop_reader(vs)

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
            if txn.end_lsn <= vs.applied_lsn:
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
            with self._ctl.transaction():
                self._write_change(vs, change)
                self._ctl.execute("UPDATE ivm.progress SET lsn = %s WHERE slot = %s", [lsn, vs.slot])
            vs.table_lsn = lsn
        elif batch:
            if vs.served is not None and vs.served.wants_changes:
                vs.served.add(vs.view.diff(batch))
            else:
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
        vs.reader.stream.flushed_lsn = max(vs.reader.stream.flushed_lsn, ack)

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
            self._names.set(self._views)

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
        if not st.materialized:
            vs.served = ServedTable(st.name, columns, types)
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
        self._names.set(self._views)

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
                    copy_rows(self._ctl, f"public.{pgc.quote_ident(vs.name)}", vs.view.rows(), vs.types)
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
        rd = _Reader(stream, queue.Queue(maxsize=QUEUE_TRANSACTIONS))
        rd.received_lsn = vs.applied_lsn
        rd.thread = threading.Thread(target=rd.run, name=f"ivm-pg-{vs.name}", daemon=True)
        vs.reader = rd
        rd.thread.start()

    def _stop_reader(self, vs: _PgView) -> None:
        rd = vs.reader
        if rd is None:
            return
        rd.stop.set()
        if rd.thread is not None and rd.thread is not threading.current_thread():
            rd.thread.join(timeout=10)
        vs.reader = None

    def _drop_view(self, name: str) -> None:
        vs = self._views[name]
        self._stop_reader(vs)
        self._cleanup(vs)
        del self._views[name]
        self._names.set(self._views)

    def _cleanup(self, vs: _PgView) -> None:
        with self._ctl.transaction():
            if vs.materialized:
                self._ctl.execute(f"DROP TABLE IF EXISTS public.{pgc.quote_ident(vs.name)}")
                self._ctl.execute(f"DROP TABLE IF EXISTS pg_temp.{pgc.quote_ident('_ivm_del_' + vs.name)}")
            self._ctl.execute("DELETE FROM ivm.views WHERE session = %s AND name = %s", [self.session, vs.name])
            self._ctl.execute("DELETE FROM ivm.progress WHERE slot = %s", [vs.slot])
        with contextlib.suppress(Exception):
            self._conn.execute(f"DROP TABLE IF EXISTS pg_temp.{pgc.quote_ident(vs.name)}")
        if vs.served is not None:
            vs.served.drop()
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
        vs.served.refresh(self._conn, vs.view.rows(), self._in_user_txn())

    def _write_change(self, vs: _PgView, change: list[tuple[tuple, int]]) -> None:
        """Apply a view change to its table (inside the caller's transaction on ``_ctl``)."""
        if change:
            apply_change(self._ctl, f"public.{pgc.quote_ident(vs.name)}", vs.name, vs.columns, vs.types, change)


def _expand(pairs, limit: int | None, types: list[str]):
    """Rows of ``(row, k)`` pairs (k copies each), at most ``limit``, arrays as lists."""
    arrays = [i for i, t in enumerate(types) if t.endswith("]")]
    n = 0
    for row, k in pairs:
        if arrays:
            row = list(row)
            for i in arrays:
                if row[i] is not None:
                    row[i] = thaw(row[i])
            row = tuple(row)
        for _ in range(k):
            if limit is not None and n >= limit:
                return
            yield row
            n += 1
