"""Sessions over PostgreSQL: incremental views kept fresh from logical replication.

``ivm_layer.connect(target)`` returns a :class:`PostgresSession` when ``target`` is a
PostgreSQL URL or a libpq conninfo string (``host=127.0.0.1 port=5432 user=app dbname=shop``;
``PG*`` variables, ``~/.pgpass``, ``sslmode`` … work as in psql: see
:mod:`ivm_layer.io.postgres.conninfo`). It has the same public methods as the DuckDB
:class:`~ivm_layer.session.duckdb.session.Session`. Every statement goes to PostgreSQL unchanged
except ``CREATE [OR REPLACE] INCREMENTAL [MATERIALIZED] VIEW``, ``DROP VIEW`` of an
incremental view, ``SELECT`` from a non-materialized incremental view (answered by
PostgreSQL over a ``TEMP`` table holding the engine's current rows) and ``COPY … FROM
STDIN`` / ``TO STDOUT`` (through psycopg's copy protocol: :meth:`PostgresSession.copy`).

Per view (so views can be created at any time, each with its own consistent start):

- a publication and a logical replication slot, both named ``ivm_<db>_<session>_<view>``
  (lower case, ≤ 63 characters, a hash appended when that spelling loses information, so
  names never collide; a name held by anything else is refused before anything changes);
- creation: ``CREATE_REPLICATION_SLOT … (SNAPSHOT 'export')``, COPY of the base tables under
  that snapshot, then ``START_REPLICATION`` from the slot's consistent point — no gap, no
  duplicate (:mod:`.views`);
- a reader thread per view owns its replication connection (the one replication reader,
  :class:`ivm_layer.io.postgres.feed.ChangeFeed`, the daemon's too): it stages decoded
  committed transactions, answers keepalives at once (a server shutdown is never held up),
  and reconnects after a restart or a dropped connection. The engine is updated
  on the caller's thread, in :meth:`poll`, :meth:`sync` and :meth:`execute` (a SELECT of a
  view first applies what has arrived, and syncs after the session's own writes)
  (:mod:`.apply`). A session is not thread-safe: call it from one thread at a time;
- exactly-once across restarts: a checkpoint per view under ``state_dir`` (a snapshot plus
  an append-only change log, typed JSON that cannot run code: :mod:`ivm_layer.maintain.checkpoint`);
  for a MATERIALIZED view the table rows and ``ivm.progress.lsn`` are written in one
  PostgreSQL transaction. The slot is acknowledged only up to what is durable. On restart
  the session loads the checkpoint and skips transactions at or below its LSN.

Definitions live in ``ivm.views(session, name, kind, definition, slot)`` in the database,
so a later session with the same ``session`` name resumes them; the state directory is
keyed by the server's system identifier and the database OID, whatever the spelling of
the connection target.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import (
    InterfaceError,
    IVMError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
)
from ...io.postgres import conninfo as pgconn
from ...io.postgres import replication as pgc
from ...io.postgres.conninfo import ConnectionLostError, ControlConnection
from ...io.postgres.feed import ReplicationError  # noqa: F401
from ...io.postgres.pgoutput import ValueDecoder
from ...maintain.checkpoint import private_dir
from ...sql.statements import classify
from ..core import SessionBase, unalterable
from ..duckdb import reads
from ..duckdb.views import is_parameterized
from ..results import Result, RowsResult
from ..router import SESSION_HEADS, first_word, may_write, route
from . import lookups as pg_lookups
from .apply import StreamApplier
from .drop import drop_statement
from .state import (  # noqa: F401 - re-exported: the public names of PostgreSQL sessions
    SESSION_PATTERN,
    SYNC_PREFIX,
    LagWarning,
    PgContext,
    PgView,
    SourceChangedError,
    ViewStoppedError,
    ViewStoppedWarning,
    default_state_dir,
    slot_name,
)
from .user import COPY_STDIO, UserConnection, engine_answer
from .views import CatalogError, ViewCatalog  # noqa: F401
from .watch import ViewWatch, describe, view_lag

if TYPE_CHECKING:  # pragma: no cover
    from ...engine.view import View


def connect_postgres(url: str, session: str = "default", state_dir: str | os.PathLike | None = None,
                     set_replica_identity: bool = False, checkpoint_seconds: float = 2.0,
                     lag_warning_bytes: int = 1 << 30, reconnect_seconds: float = 60.0) -> PostgresSession:
    """Open a session on a PostgreSQL database (see the module docstring)."""
    return PostgresSession(url, session=session, state_dir=state_dir,
                           set_replica_identity=set_replica_identity,
                           checkpoint_seconds=checkpoint_seconds, lag_warning_bytes=lag_warning_bytes,
                           reconnect_seconds=reconnect_seconds)


class PostgresSession(SessionBase):
    """A PostgreSQL connection with incremental views. Build it with :func:`ivm_layer.connect`."""

    dialect = "postgres"

    def __init__(self, url: str, session: str = "default", state_dir: str | os.PathLike | None = None,
                 set_replica_identity: bool = False, checkpoint_seconds: float = 2.0,
                 lag_warning_bytes: int = 1 << 30, reconnect_seconds: float = 60.0):
        self._closed = True
        self._views: dict[str, PgView] = {}
        if not isinstance(session, str) or not SESSION_PATTERN.fullmatch(session):
            raise InterfaceError(f"session name {session!r}: use 1-40 letters, digits and underscores",
                                 sqlstate="42602")
        target = pgconn.normalize(url)
        self.url = pgconn.redact(target)          # for display: never holds a password
        self.session = session
        self._target = target
        self._user = UserConnection(target, self.url, reconnect_seconds)     # the user's statements
        self._closed = False
        ctl = None
        try:
            ctl = ControlConnection(lambda: pgc.connect(target), self.url, reconnect_seconds)
            with pgconn.driver_errors(target):
                identity = pgconn.database_identity(ctl)
            self._catalogs = frozenset({identity.database})  # db.t, db.public.t: table t
            sd = Path(state_dir) if state_dir is not None else default_state_dir(identity, session)
            self.ctx = PgContext(target, session, identity, ctl, private_dir(sd), ValueDecoder(),
                                 set_replica_identity, checkpoint_seconds, lag_warning_bytes,
                                 reconnect_seconds, self.dialect, self._views)
            self.applier = StreamApplier(self.ctx)
            self.watch = ViewWatch(self.ctx, self.applier)
            self.catalog = ViewCatalog(self.ctx, self.applier)
            self._names = reads.ViewNames(dialect="postgres")
            self._shapes: dict[str, object] = {}
            self._params = pg_lookups.ParamReads(self._user, self._views)   # parameterized views
            with pgconn.driver_errors(target):
                self.catalog.ensure()
                self.watch.report_closed_slots()
                self.catalog.load()
            self._names.set(self._views)
            # resumed views have not seen what was committed since their checkpoint (a write
            # the previous session made just before it closed, say): the first read waits for it
            self._user.dirty = bool(self._views)
        except BaseException:
            self.close()
            if ctl is not None:
                ctl.close()
            raise

    @property
    def state_dir(self) -> Path:
        return self.ctx.state_dir

    # -- public API -------------------------------------------------------------------------
    @property
    def connection(self):
        """The psycopg connection the session's statements run on (autocommit; writes through
        it, or any other connection, reach the views through the replication stream)."""
        return self._user.conn

    def copy(self, statement: str):
        """``COPY … FROM STDIN`` / ``TO STDOUT`` through psycopg's copy protocol: a context
        manager yielding psycopg's ``Copy`` (``write``, ``write_row``, iterate for output);
        PostgreSQL's errors are raised as :class:`SQLError`. Rows written reach the views
        like any other write (a SELECT of a view syncs after the session's own writes)."""
        self._check_open()
        names = self._names.find(statement) if self._views else []
        if names:               # COPY (SELECT … FROM view) TO STDOUT reads the served TEMP tables
            self._refresh_served(names)
        return self._user.copy(statement)

    def sync(self, timeout: float = 60.0) -> None:
        """Block until every transaction committed before the call is applied to every
        running view (a stopped view reports its error on its own reads).

        Commits a logical decoding message (a marker) and waits until each view's stream has
        delivered and applied it; the stream is in commit order, so everything committed
        earlier is applied too."""
        with pgconn.driver_errors(self._target):
            self._sync(timeout)

    def _sync(self, timeout: float) -> None:
        self._check_open()
        self.watch.check_sources()
        if not any(vs.error is None for vs in self._views.values()):
            return
        token = uuid.uuid4().hex
        for attempt in range(2):
            try:
                with self.ctx.ctl.transaction() as c:
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
                self.applier.apply_available(vs, 0.0)
            pending = [vs for vs in pending if token not in vs.seen_tokens and vs.error is None]
            if not pending:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                raise OperationalError(f"sync() timed out after {timeout:.0f} s waiting for view(s) "
                                       f"{', '.join(v.name for v in pending)}")
            self.applier.apply_available(pending[0], min(left, 0.5))
        for vs in self._views.values():
            vs.seen_tokens.discard(token)
        self._user.dirty = False

    def poll(self, timeout: float = 0.0) -> int:
        """Apply the transactions that have arrived, waiting up to ``timeout`` s for the first
        one; return how many source-row changes were applied."""
        with pgconn.driver_errors(self._target):
            return self._poll(timeout)

    def _poll(self, timeout: float) -> int:
        self._check_open()
        n = 0
        deadline = time.monotonic() + timeout
        views = list(self._views.values())
        while True:
            for vs in views:
                n += self.applier.apply_available(vs, 0.0)
            left = deadline - time.monotonic()
            if n or left <= 0 or not views:
                break
            # wait on one queue at a time, briefly, so any view's arrival ends the wait
            for vs in views:
                n += self.applier.apply_available(vs, min(left, 0.05) / len(views))
            if n:
                break
        self.watch.check_lag()
        return n

    def view(self, name: str) -> View:
        """The engine view ``name``; a stopped view raises :class:`ViewStoppedError`."""
        self._check_open()
        vs = self._state(name)
        self._check_stopped(vs)
        return vs.view

    def explain(self, name: str) -> str:
        """The view's plan plus its replication state (slot, positions, lag)."""
        with pgconn.driver_errors(self._target):
            return self._explain(name)

    def _explain(self, name: str) -> str:
        self._check_open()
        vs = self._state(name)
        return describe(self.ctx, vs)

    def tables(self) -> dict[str, list[str]]:
        """Tables and views of the ``public`` schema and the incremental views, with columns."""
        self._check_open()
        out: dict[str, list[str]] = {}
        with pgconn.driver_errors(self._target):
            rows = self.ctx.ctl.execute(
                "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_schema = 'public' ORDER BY table_name, ordinal_position").fetchall()
        for t, c in rows:
            out.setdefault(t, []).append(c)
        for n, vs in self._views.items():
            out[n] = list(vs.columns)
        return out

    def close(self, drop: bool = False) -> None:
        """Stop streaming and make every view's checkpoint durable. ``drop=True`` also drops
        the views (their slots, publications, tables, catalog rows and checkpoints)."""
        if self._closed:
            return
        self._closed = True
        try:
            for vs in list(self._views.values()):
                if drop:
                    with contextlib.suppress(IVMError), pgconn.driver_errors(self._target):
                        self.catalog.drop(vs.name, self._user)
                    continue
                with contextlib.suppress(Exception):
                    if vs.error is None:
                        self.applier.apply_available(vs, 0.0)
                vs.stop_reader()
                if vs.error is None and vs.store is not None:
                    with contextlib.suppress(OSError, IVMError):
                        self.applier.checkpoint(vs, force=True)
                if vs.store is not None:
                    vs.store.close()
        finally:
            self._user.close()
            if getattr(self, "ctx", None) is not None:
                self.ctx.ctl.close()

    # -- statements -------------------------------------------------------------------------
    def _in_transaction(self) -> bool:
        return self._user.in_txn()

    def _execute_many(self, text: str, seq: list) -> Result:
        """``INSERT … VALUES (…)`` as multi-row inserts, anything else through psycopg's pipelined
        ``executemany`` (:meth:`UserConnection.run_many`); the views see the rows through the
        replication stream, as for any write."""
        r = route(text, dialect="postgres")
        if r.kind in ("create_view", "drop", "begin", "commit", "rollback") or COPY_STDIO.match(text) or (
                self._views and self._names.find(text)):
            return super()._execute_many(text, seq)       # the session's own handling, row by row
        with pgconn.driver_errors(self._target):
            res = self._user.run_many(text, seq, r.target_span[1] if r.kind == "insert" and "values" in r.flags
                                      and r.target_span is not None else None)
        if r.kind not in ("read", "other"):
            self._user.wrote()
        return res

    def _execute_one(self, text: str, params) -> Result:
        with pgconn.driver_errors(self._target):
            return self._dispatch(text, params)

    def _dispatch(self, text: str, params) -> Result:
        name = self._params.points.known(text)   # a point read answered before: no routing, no name scan
        if name in self._views and not (self._user.txn_wrote and self._user.in_txn()):
            self._catch_up([name])
            got = self._params.point(text, params)
            if got is not None:
                return got
        if COPY_STDIO.match(text):
            names = self._names.find(text) if self._views else []
            if names:
                self._refresh_served(names)
            return self._user.copy_statement(text, params)
        if not self._views:
            first = first_word(text)
            if first not in SESSION_HEADS:     # no view to serve or protect: PostgreSQL answers
                cur = self._user.run(text, params)
                if may_write(first):
                    self._user.wrote()
                return cur
        r = route(text, self._catalogs, "postgres")
        kind = r.kind
        if kind == "create_view":
            st = classify(text, self.dialect)
            if params:
                raise ProgrammingError("CREATE INCREMENTAL VIEW does not take parameters", sqlstate="42P02")
            if self._user.in_txn():
                raise NotSupportedError("CREATE INCREMENTAL VIEW inside an explicit transaction is not "
                                        "supported: COMMIT or ROLLBACK first", sqlstate="25001")
            try:
                self.catalog.create(st)
            finally:
                self._names.set(self._views)
            return RowsResult()
        if kind == "drop":
            return self._drop(text, params)
        if kind in ("begin", "commit", "rollback"):
            return self._transaction(r, params)
        if kind == "alter" and r.target in self._views:
            raise ProgrammingError(unalterable(r.target), sqlstate="42809")
        names = self._names.find(text) if self._views else []
        if names:
            return self._serve(r, names, params)
        cur = self._user.run(text, params)
        if kind not in ("read", "other"):
            self._user.wrote()
        return cur

    def _serve(self, r, names: list[str], params) -> Result:
        """A statement that mentions incremental views: apply what has arrived (after the
        session's own writes, wait for them), then answer from the engine where the shape
        allows, else bring the served views' TEMP tables up to date and run it. A read that
        finds the user's connection dropped (server restart) is run again on a new one."""
        if r.kind != "read" or self._user.in_txn():
            return self._serve_once(r, names, params)
        try:
            return self._serve_once(r, names, params)
        except Exception as e:
            if not isinstance(e, ConnectionLostError) and not pgconn.is_dropped(e):
                raise
            if not (self._user.raw.closed or self._user.raw.broken):
                raise
            _ = self._user.conn
            self._user.forget_served(self._views.values())
            return self._serve_once(r, names, params)

    def _catch_up(self, names: list[str]) -> None:
        """Apply what has arrived (after the session's own writes, wait for them) and check
        that the views ``names`` are running."""
        user = self._user
        if user.dirty and not user.in_txn():
            self.sync()             # read your own committed writes
        else:
            self.poll()
        for n in names:
            self._check_stopped(self._views[n])

    def _refresh_served(self, names: list[str]) -> None:
        """Bring the TEMP tables of the served views ``names`` up to date (caught up first)."""
        self._catch_up(names)
        for n in names:
            if self._views[n].input_types or is_parameterized(self._views[n].view):
                raise NotSupportedError(f"COPY of parameterized view {n!r} is not supported: read it with "
                                        f"SELECT … FROM {n} WHERE <inputs> = …", sqlstate="0A000")
        for n in names:
            if not self._views[n].materialized:
                self._user.refresh_temp(self._views[n], self._views.values())

    def _serve_once(self, r, names: list[str], params) -> Result:
        user = self._user
        in_txn = user.in_txn()
        self._catch_up(names)
        if any(is_parameterized(self._views[n].view) for n in names):
            return self._lookup_read(r, names, params, in_txn and user.txn_wrote)
        if not (in_txn and user.txn_wrote) and r.kind == "read" and params is None and len(names) == 1:
            cur = engine_answer(user, self._shapes, r.text, self._views[names[0]])
            if cur is not None:
                return cur
        served = [self._views[n] for n in names if not self._views[n].materialized]
        for vs in served:
            user.refresh_temp(vs, self._views.values())
        # never prepared: a view dropped and created again changes its columns behind psycopg,
        # whose prepared plan would then fail ('cached plan must not change result type')
        cur = user.run(r.text, params, prepare=False)
        if r.kind != "read":
            user.wrote()
        return cur

    def _lookup_read(self, r, names: list[str], params, own_writes: bool) -> Result:
        """A statement naming parameterized views (:class:`.lookups.ParamReads`); the served
        views it also names are brought up to date first."""
        if r.kind != "read":
            raise ProgrammingError("parameterized views are read with SELECT … FROM v WHERE input = …")
        if not own_writes and (got := self._params.point(r.text, params)) is not None:
            return got
        for n in names:
            vs = self._views[n]
            if not vs.materialized and not is_parameterized(vs.view):
                self._user.refresh_temp(vs, self._views.values())
        return self._params.read(r.text, params, names, own_writes)

    def _transaction(self, r, params) -> Result:
        user = self._user
        failed = pgconn.transaction_failed(user.raw)
        cur = user.run(r.text, params)
        if r.kind in ("commit", "rollback"):
            committed = r.kind == "commit" and not failed
            for vs in self._views.values():
                if vs.served is not None:
                    vs.served.end_transaction(committed)
            if committed and user.txn_wrote:
                user.dirty = True
            user.txn_wrote = False
        return cur

    def _drop(self, text: str, params) -> Result:
        if not self._views and not self.catalog.skipped:
            # no incremental view to protect or drop: PostgreSQL answers it (no parse)
            cur = self._user.run(text, params)
            self._user.wrote()
            return cur
        try:
            return drop_statement(classify(text, self.dialect), text, params, self._views, self.catalog,
                                  self._user)
        finally:
            self._names.set(self._views)

    def _view_lag(self, vs: PgView) -> tuple[int, float]:
        with pgconn.driver_errors(self._target):
            return view_lag(vs, pgc.slot_lag(self.ctx.ctl, vs.slot))

    def _view_retained(self, vs: PgView) -> int | None:
        with pgconn.driver_errors(self._target):
            lag = pgc.slot_lag(self.ctx.ctl, vs.slot)
        return None if lag is None else lag.retained_bytes

    @staticmethod
    def _check_stopped(vs: PgView) -> None:
        if vs.error is not None:
            raise ViewStoppedError(f"incremental view {vs.name!r} is stopped: {vs.error}") from vs.error

