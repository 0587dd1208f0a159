"""DuckDB sessions: ``ivm_layer.connect()``, incremental end to end.

A :class:`Session` wraps one DuckDB connection. Its cost follows the change, not the data:

- **Routing** (:mod:`.router`): every statement is classified by its leading keywords and
  target table, without a parse. Statements that touch no tracked table go to DuckDB as they
  are and cost what DuckDB costs.
- **Capture** (:mod:`ivm_layer.io.duckdb.capture`): a write to a table an incremental view reads is
  run so that DuckDB returns exactly the rows it changed (``RETURNING``, the pre-image of an
  ``UPDATE``, ``COPY`` through a stage table); those rows are applied to the views reading
  the table through the one road of :class:`~ivm_layer.maintain.viewset.ViewSet` (all views
  or none), and to materialized view tables, in the statement's transaction. Writes DuckDB cannot describe row by row
  (``INSERT OR REPLACE``, ``ON CONFLICT DO UPDATE``, ``MERGE``) and writes made around the
  session (``session.connection``, another connection) are found by a fingerprint check on
  ``sync()``/``poll()`` and after statements the router cannot attribute to one table, then
  diffed (O(table)).
- **Reads** (:mod:`.reads`): a non-materialized view is a ``TEMP VIEW`` over the engine's
  rows, registered once as an Arrow stream that DuckDB enumerates afresh on every scan
  (so ``session.connection.execute("SELECT * FROM v")`` reads it too); ``count(*)`` is the
  engine's O(1) count. Nothing is copied. Results stream: the cursor pulls rows from DuckDB
  as they are fetched (:mod:`ivm_layer.session.results`).
- **DB-API** (:mod:`ivm_layer.session.core`): PEP 249 methods, ``?``/``$1``/``$name``
  placeholders (DuckDB's own), ``executemany`` of an ``INSERT … VALUES`` as one
  ``INSERT … SELECT`` over an Arrow table of the rows (captured like any insert, O(rows));
  DuckDB's replacement scans see the caller's pandas/Arrow/polars objects
  (``python_scan_all_frames``); DuckDB's exceptions come out as :mod:`ivm_layer.errors`
  classes with a SQLSTATE.
- **Transactions**: inside ``BEGIN … COMMIT`` every captured change is applied at once (your
  own writes show in the views) and logged; ``ROLLBACK`` (or a failed ``COMMIT``) undoes the
  engine side, DuckDB rolls back the materialized tables itself. Subscribers — the
  session's and the engine views' own — run after the commit.

View definitions live in ``ivm.views(name, kind, definition)``; a session on a file database
checks every catalog row and recompiles and reloads the views from the current table contents
when it connects; a row that fails the checks stops that view alone.
"""

from __future__ import annotations

import contextlib
import weakref
from typing import TYPE_CHECKING, Any, Self

from ...errors import (
    Error,
    InterfaceError,
    NotSupportedError,
    ProgrammingError,
    from_driver,
)
from ...identifiers import ascii_lower
from ...sql.statements import classify
from .. import placeholders, pointreads
from ..core import Cursor, SessionBase, ViewInfo
from ..results import DuckResult, Result, RowsResult, StreamGuard
from ..router import SESSION_HEADS, Route, first_word, route
from . import reads
from .clients import ClientTransaction
from .ddl import drop_statement, guard_ddl
from .serving import ServedViews
from .tables import run
from .views import (
    CatalogWarning,
    DuckViews,
    SourceGoneError,
    ViewState,
    is_parameterized,
)
from .writes import DuckWriter

if TYPE_CHECKING:  # pragma: no cover
    from ...engine.view import View

__all__ = ["CatalogWarning", "Cursor", "Session", "SourceGoneError", "ViewInfo", "connect_duckdb"]

_PARAMS = "_ivm_params"     # the registered Arrow table of an executemany's rows


def duckdb_error() -> type[BaseException]:
    import duckdb

    return duckdb.Error


def connect_duckdb(url: str | None = None, progress: bool | None = None, **options: Any) -> Session:
    """A DuckDB session (see :func:`ivm_layer.session.connect` for the URL forms)."""
    import duckdb

    if options:
        raise ProgrammingError(f"options {', '.join(sorted(options))} apply to PostgreSQL sessions only")
    if url is None or url in ("duckdb://", "duckdb:///:memory:", ":memory:", "duckdb:///"):
        path = ":memory:"
    elif url.startswith("duckdb:///"):
        path = url[len("duckdb:///"):]  # duckdb:///rel.duckdb, duckdb:////abs/path.duckdb
    elif url.startswith("duckdb://"):
        path = url[len("duckdb://"):]
    elif "://" not in url and url.endswith((".duckdb", ".db")):
        path = url
    else:
        scheme = url.split("://", 1)[0] if "://" in url else url
        raise InterfaceError(f"database URL {url!r}: {scheme} is not supported (DuckDB: None, "
                             "':memory:', 'duckdb://', 'duckdb:///path/file.duckdb'; PostgreSQL: "
                             "'postgresql://user@host:port/dbname')", sqlstate="08001")
    try:
        conn = duckdb.connect(path)
    except duckdb.Error as e:
        raise from_driver(e, f"cannot open DuckDB database {path!r}: {e}") from e
    return Session(conn, url=url or "duckdb://", progress=progress)


class Session(SessionBase):
    """A DuckDB connection with incremental views. Build it with :func:`connect`."""

    dialect = "duckdb"

    def __init__(self, conn, url: str = "duckdb://", progress: bool | None = None):
        self.url = url
        self._conn = conn
        self._catalog = DuckViews(conn, progress)
        self._views: dict[str, ViewState] = self._catalog.views
        self._viewset = self._catalog.viewset
        self._writer = DuckWriter(conn, self._catalog)
        self._in_txn = False
        self._txn_undo: list = []
        self._txn_fps: dict[str, tuple | None] = {}
        self._closed = False
        # the database's own name: memory.t, memory.main.t name table t (router.route)
        self._catalogs = frozenset({ascii_lower(conn.execute("SELECT current_database()").fetchone()[0])})
        self._served = ServedViews(conn, self._catalog)
        self._points = pointreads.PointReads("duckdb")   # SELECT … FROM v WHERE input = ?: the engine's
        self._stream = StreamGuard()              # the result DuckDB is streaming, while held
        try:
            # replacement scans find the caller's DataFrames even though the session's own
            # frames stand between the caller and DuckDB
            conn.execute("SET python_scan_all_frames = true")
        except duckdb_error():  # pragma: no cover - DuckDB without the setting
            pass
        try:
            self._catalog.load_catalog()
        except duckdb_error() as e:
            raise from_driver(e) from e
        self._served.sync()
        if self._served.live:
            reads.warm_up(background=True)

    # -- public API ---------------------------------------------------------------------
    def sync(self) -> None:
        """Apply writes made around the session (through :attr:`connection` or another
        connection to the same database); statements run through the session are applied
        as they run."""
        self.poll()

    def poll(self, timeout: float = 0.0) -> int:
        """Apply the changes available now; return how many source-row changes were applied.
        Checks each tracked table's fingerprint (one scan in DuckDB) and diffs only the
        tables that changed. ``timeout`` is not used (the shell's ``\\watch`` calls this in a
        loop)."""
        self._check_open()
        if self._in_txn or not self._catalog.captures:
            return 0
        self._settle()
        try:
            return self._autocommit(self._writer.capture_unseen)
        except duckdb_error() as e:
            raise from_driver(e) from e
        finally:
            self._served.sync()

    def tables(self) -> dict[str, list[str]]:
        """Tables, views and incremental views of the database with their columns (for
        completion and ``\\d``), names lower-cased where the database folds them."""
        self._check_open()
        self._settle()
        out: dict[str, list[str]] = {}
        rows = self._conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema IN ('main', 'temp') AND table_catalog = current_database() "
            "ORDER BY table_name, ordinal_position").fetchall()
        for t, c in rows:
            out.setdefault(t, []).append(c)
        for n, vs in self._views.items():
            out[n] = list(vs.columns)
        return out

    def info(self, name: str | None = None) -> list[ViewInfo]:
        """Describe one view or all (a stopped view reports 0 rows and ``kind`` ``stopped``)."""
        self._check_open()
        names = [self._state(name).name] if name is not None else sorted(self._views)
        out = []
        for n in names:
            vs = self._views[n]
            if vs.error is None:
                out.extend(super().info(n))
                continue
            out.append(ViewInfo(vs.name, "stopped", 0, f"stopped: {vs.error}", tuple(vs.tables),
                                tuple(vs.columns), tuple(vs.types), vs.stmt.definition(self.dialect)))
        return out

    def view(self, name: str) -> View:
        self._check_open()
        return self._catalog.healthy(self._state(name)).view

    def explain(self, name: str) -> str:
        self._check_open()
        return self.view(name).explain()

    def close(self) -> None:
        """Close the session and its DuckDB connection; later calls raise InterfaceError."""
        if not self._closed:
            self._stream.close()
            self._closed = True
            self._conn.close()

    @property
    def catalog(self) -> DuckViews:
        """The views (``catalog.views``: name → state) and the capture of their tables, for a
        driver that runs statements on connections of its own (``ivm serve``)."""
        return self._catalog

    def client_transaction(self, conn) -> ClientTransaction:
        """Capture the transaction that ``conn`` (a ``connection.cursor()``, already in
        ``BEGIN``) runs, and apply it to the views at its commit
        (:class:`~ivm_layer.sessions.duck_clients.ClientTransaction`)."""
        self._check_open()
        return ClientTransaction(self._catalog, conn)

    @property
    def connection(self):
        """The underlying DuckDB connection (served views read through it too). Writes through
        it are seen at the next :meth:`sync`/:meth:`poll`. A result the session was streaming
        is read out first: the connection holds one result at a time."""
        self._check_open()
        self._settle()
        return self._conn

    def register(self, name: str, obj: Any) -> Self:
        """Make a pandas/Arrow/polars object readable as ``name`` (DuckDB's ``register``)."""
        self._check_open()
        self._settle()
        self._conn.register(name, obj)
        return self

    def unregister(self, name: str) -> Self:
        self._check_open()
        self._settle()
        self._conn.unregister(name)
        return self

    # -- DB-API plumbing --------------------------------------------------------------------
    def _in_transaction(self) -> bool:
        return self._in_txn

    def _settle(self) -> None:
        """Free the connection from the result DuckDB is streaming: read out if a cursor still
        holds it (the last ``session.execute`` cursor counts only if the caller kept it), then
        unregister what its statement needed."""
        if not self._stream.active:
            return
        if self._last is not None and self._last.holds(self._stream.current()):
            keep = weakref.ref(self._last)
            self._last = None                 # our reference alone must not keep it alive
            self._last = keep()
        self._stream.settle()

    def _translate(self, exc: BaseException) -> Error | None:
        import duckdb

        if isinstance(exc, duckdb.Error):
            return from_driver(exc)
        return None

    def _execute_many(self, text: str, seq: list) -> Result:
        """An ``INSERT … VALUES (?, …)`` becomes one ``INSERT … SELECT`` over an Arrow table of
        the parameter rows (one capture, O(rows)); anything else runs once per row in one
        transaction."""
        r = route(text, self._catalogs)
        iv = None
        if seq and r.kind == "insert" and "values" in r.flags and r.target_span is not None:
            iv = placeholders.insert_values(text, r.target_span[1])
        plan = placeholders.arrow_params(iv, seq, _PARAMS) if iv is not None else None
        if plan is None:
            return super()._execute_many(text, seq)
        sql, table = plan
        self._conn.register(_PARAMS, table)
        try:
            res = self._execute_one(sql, None)
            res.detach()              # RETURNING rows of an untracked table: read before unregistering
        finally:
            self._stream.settle()
            with contextlib.suppress(Exception):
                self._conn.unregister(_PARAMS)
        return res

    # -- dispatch -----------------------------------------------------------------------
    def _execute_one(self, text: str, params) -> Result:
        res = self._dispatch(text, params)
        if isinstance(res, DuckResult):
            self._stream.track(res)
        return res

    def _dispatch(self, text: str, params) -> Result:
        if self._points.known(text):        # a point read answered before: no routing, no name scan
            got = self._points.answer(text, params, self._views, self._cast)
            if got is not None:
                return got
        if not self._views and not self._catalog.captures and first_word(text) not in SESSION_HEADS:
            return run(self._conn, text, params, lazy=True)   # no view to serve or protect
        r = route(text, self._catalogs)
        kind = r.kind
        if kind in ("begin", "commit", "rollback"):
            return self._transaction(r)
        if kind == "create_view":
            if params:
                raise ProgrammingError("CREATE INCREMENTAL VIEW does not take parameters", sqlstate="42P02")
            if self._in_txn:
                raise NotSupportedError("CREATE INCREMENTAL VIEW inside an explicit transaction is not "
                                        "supported: COMMIT or ROLLBACK first", sqlstate="25001")
            st = classify(text, self.dialect)
            try:
                self._catalog.create(st)
            finally:
                self._served.sync(fresh=(st.name,))
            reads.warm_up(background=True)
            return RowsResult()
        if kind == "drop":
            return drop_statement(self._conn, r, params, self._catalog, self._served, self._in_txn)
        mentions = self._catalog.names.counts(text) if self._views else {}
        found = list(mentions)
        if any(is_parameterized(self._views[n].view) for n in found if self._views[n].error is None):
            return self._lookup_read(r, params, found)
        if kind == "read" and params is None:
            target = reads.count_target(text)
            vs = self._views.get(target) if target is not None else None
            if vs is not None and not vs.materialized:
                return self._served.count(text, self._catalog.healthy(vs))
        if kind in ("alter", "create_table"):
            guard_ddl(r, self._catalog)
        self._served.check(found)
        if kind in ("insert", "update", "delete", "truncate", "copy_from", "merge"):
            if r.target in self._catalog.captures:
                if self._in_txn:
                    return self._writer.write(r, params, self._txn_undo)
                if kind == "insert" and params is None and (done := self._writer.insert_autocommit(r)):
                    cur, seen = done
                    if not seen:
                        self._autocommit(self._writer.capture_unseen)
                    self._viewset.notify()
                    return cur
                if kind in ("update", "delete") and (done := self._writer.write_autocommit(r, params)):
                    cur, seen = done
                    if not seen:
                        self._autocommit(self._writer.capture_unseen)
                    self._viewset.notify()
                    return cur
                return self._autocommit(lambda undo: self._writer.write(r, params, undo))
        elif kind == "unknown_write" and self._catalog.captures:
            cur = run(self._conn, text, params)
            try:
                if self._in_txn:
                    self._writer.capture_unseen(self._txn_undo)
                else:
                    self._autocommit(self._writer.capture_unseen)
            finally:
                self._served.sync()
            return cur
        return run(self._conn, text, params, lazy=True)

    def _lookup_read(self, r: Route, params, found: list[str]) -> Result:
        """A statement naming parameterized views: ``SELECT cols | count(*) FROM v WHERE input
        = ? … [LIMIT n]`` is the engine's lookup and nothing else (:mod:`.pointreads`) once its
        shape's result description is known (the shape's first run goes through DuckDB);
        anything else runs in DuckDB over the lookups' rows (:meth:`ServedViews.lookup_read`)."""
        if r.kind == "read":
            got = self._points.answer(r.text, params, self._views, self._cast)
            if got is not None:
                return got
        res = self._served.lookup_read(r.text, r.kind, params, found, self._stream.after, self._cast)
        if r.kind == "read":
            self._points.remember(r.text, self._views, res.description)
        return res

    def _cast(self, value, sql_type: str):
        """DuckDB's conversion of ``value`` to ``sql_type`` (a string given for a DATE input)."""
        try:
            return run(self._conn, f"SELECT CAST(? AS {sql_type})", [value]).fetchall()[0][0]
        except duckdb_error() as e:
            raise from_driver(e) from e

    def _autocommit(self, body):
        """Run ``body(undo)`` in a transaction of its own with the engine side undone when it
        fails, and the subscribers told after the commit."""
        undo: list = []
        fps = {t: c.mark() for t, c in self._catalog.captures.items()}
        self._conn.begin()
        try:
            out = body(undo)
            self._conn.commit()
        except BaseException:
            self._abort(undo, fps)
            raise
        self._viewset.notify()
        return out

    def _abort(self, undo: list, fps: dict) -> None:
        import duckdb

        with contextlib.suppress(duckdb.Error):
            self._conn.rollback()
        self._writer.undo(undo)
        self._viewset.discard()
        for t, fp in fps.items():
            if t in self._catalog.captures:
                self._catalog.captures[t].restore(fp)

    # -- transactions -------------------------------------------------------------------
    def _transaction(self, r: Route) -> Result:
        import duckdb

        if r.kind == "begin":
            cur = run(self._conn, r.text, None)
            self._in_txn = True
            self._txn_undo = []
            self._txn_fps = {t: c.mark() for t, c in self._catalog.captures.items()}
            return cur
        if not self._in_txn:
            return run(self._conn, r.text, None)
        aborted = False
        if r.kind == "commit":
            # DuckDB turns COMMIT of an aborted transaction into a silent rollback: probe first.
            try:
                self._conn.execute("SELECT 1").fetchall()
            except duckdb.Error:
                aborted = True
        try:
            cur = run(self._conn, r.text, None)
        except duckdb.Error:
            aborted = True
            raise
        finally:
            if r.kind == "rollback" or aborted:
                self._writer.undo(self._txn_undo)
                self._viewset.discard()
                for t, fp in self._txn_fps.items():
                    if t in self._catalog.captures:
                        self._catalog.captures[t].restore(fp)
            self._in_txn = False
            self._txn_undo = []
            self._txn_fps = {}
        self._viewset.notify()
        return cur
