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
- **Reads** (:mod:`.reads`): a non-materialized view is a ``TEMP VIEW`` over a lazy Arrow
  reader of the engine's rows registered for the statement that reads it; ``count(*)`` is
  the engine's O(1) count. Nothing is copied.
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
from collections.abc import Iterable
from typing import Any

from ...engine.view import View
from ...errors import IVMError
from ...io.duckdb import capture as duck
from ...sql.statements import classify
from ..core import Cursor, SessionBase, ViewInfo, unalterable
from ..lookups import plan_lookups
from ..router import Route, route
from . import reads
from .tables import run
from .views import (
    CatalogWarning,
    DuckViews,
    SourceGoneError,
    ViewState,
    is_parameterized,
    quote,
)
from .writes import DuckWriter

__all__ = ["CatalogWarning", "Cursor", "Session", "SourceGoneError", "ViewInfo", "connect"]


def connect(url: str | None = None, **options: Any) -> SessionBase:
    """Open a session. ``None``, ``"duckdb://"``, ``":memory:"``: in-memory DuckDB;
    ``"duckdb:///path/file.duckdb"`` or a path ending in ``.duckdb``: a DuckDB file;
    ``"postgresql://…"``: a :class:`~ivm_layer.session.postgres.session.PostgresSession`, with
    ``options`` (``session=``, ``state_dir=``, ``set_replica_identity=``, …) passed to
    :func:`~ivm_layer.session.postgres.session.connect_postgres`."""
    import duckdb

    from ...io.postgres.conninfo import is_postgres_target

    if is_postgres_target(url):
        from ..postgres.session import connect_postgres

        return connect_postgres(url, **options)
    progress = options.pop("progress", None)
    if options:
        raise IVMError(f"options {', '.join(sorted(options))} apply to PostgreSQL sessions only")
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
        raise IVMError(f"database URL {url!r}: {scheme} is not supported yet (only DuckDB: "
                       "None, ':memory:', 'duckdb://', 'duckdb:///path/file.duckdb')")
    try:
        conn = duckdb.connect(path)
    except duckdb.Error as e:
        raise IVMError(f"cannot open DuckDB database {path!r}: {e}") from e
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
        self._catalogs = frozenset({conn.execute("SELECT current_database()").fetchone()[0].lower()})
        self._count_shapes: dict[str, Any] = {}   # count(*) statement -> DuckDB's description
        self._catalog.load_catalog()   # pyarrow is loaded when a served view needs it, not before

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
        return self._autocommit(self._writer.capture_unseen)

    def tables(self) -> dict[str, list[str]]:
        """Tables, views and incremental views of the database with their columns (for
        completion and ``\\d``), names lower-cased where the database folds them."""
        self._check_open()
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
        return self._catalog.healthy(self._state(name)).view

    def explain(self, name: str) -> str:
        self._check_open()
        return self.view(name).explain()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._conn.close()

    @property
    def connection(self):
        """The underlying DuckDB connection. Writes through it are seen at the next
        :meth:`sync`/:meth:`poll`."""
        return self._conn

    # -- dispatch -----------------------------------------------------------------------
    def _execute_one(self, text: str, params) -> Cursor:
        r = route(text, self._catalogs)
        kind = r.kind
        if kind in ("begin", "commit", "rollback"):
            return self._transaction(r)
        if kind == "create_view":
            if params:
                raise IVMError("CREATE INCREMENTAL VIEW does not take parameters")
            if self._in_txn:
                raise IVMError("CREATE INCREMENTAL VIEW inside an explicit transaction is not supported: "
                               "COMMIT or ROLLBACK first")
            self._catalog.create(classify(text, self.dialect))
            return Cursor()
        if kind == "drop":
            return self._drop(r, params)
        mentions = self._catalog.names.counts(text) if self._views else {}
        found = list(mentions)
        if any(is_parameterized(self._views[n].view) for n in found if self._views[n].error is None):
            return self._lookup_read(r, params, found)
        if kind == "read" and params is None:
            target = reads.count_target(text)
            vs = self._views.get(target) if target is not None else None
            if vs is not None and not vs.materialized:
                return self._count(text, self._catalog.healthy(vs))
        if kind in ("alter", "create_table"):
            self._guard_ddl(r)
        with self._serving(found, [n for n, k in mentions.items()
                                   if not reads.scanned_once(text, kind, r.flags, k)]):
            if kind in ("insert", "update", "delete", "truncate", "copy_from", "merge"):
                if r.target in self._catalog.captures:
                    if self._in_txn:
                        return self._writer.write(r, params, self._txn_undo)
                    if kind in ("update", "delete") and (done := self._writer.write_autocommit(r, params)):
                        cur, seen = done
                        if not seen:
                            self._autocommit(self._writer.capture_unseen)
                        self._viewset.notify()
                        return cur
                    return self._autocommit(lambda undo: self._writer.write(r, params, undo))
            elif kind == "unknown_write" and self._catalog.captures:
                cur = run(self._conn, text, params)
                if self._in_txn:
                    self._writer.capture_unseen(self._txn_undo)
                else:
                    self._autocommit(self._writer.capture_unseen)
                return cur
            return run(self._conn, text, params)

    @contextlib.contextmanager
    def _serving(self, found: list[str], twice: Iterable[str] = ()):
        """Register a lazy reader of the engine's rows for every served view among ``found``
        (the views a statement mentions), for the duration of the statement. Views in
        ``twice`` (the statement may scan them more than once) are read into an Arrow table
        first, O(view): a reader can be scanned only once."""
        names = [n for n in found if not self._views[n].materialized
                 and not (self._views[n].error is None and is_parameterized(self._views[n].view))]
        registered = []
        try:
            for n in names:
                vs = self._catalog.healthy(self._views[n])
                reader = reads.view_reader(vs.view, vs.schema)
                self._conn.register(reads.rows_name(n), reader.read_all() if n in twice else reader)
                registered.append(n)
            yield
        finally:
            for n in registered:
                with contextlib.suppress(Exception):
                    self._conn.unregister(reads.rows_name(n))

    def _lookup_read(self, r: Route, params, found: list[str]) -> Cursor:
        """A query of parameterized views: each occurrence becomes the rows of a lookup."""
        if r.kind != "read":
            raise IVMError("parameterized views are read with SELECT … FROM v WHERE input = …")
        pviews = {n: self._views[n] for n in found if is_parameterized(self._views[n].view)}
        sql, lookups, values = plan_lookups(r.text, pviews, params)
        inputs = run(self._conn, "SELECT " + ", ".join(v.sql(dialect="duckdb") for v in values),
                     params).fetchone() if values else ()
        registered = []
        try:
            for lk in lookups:
                vs = pviews[lk.view]
                rows = vs.view.lookup(**{p: inputs[i] for p, i in lk.inputs.items()})
                self._conn.register(lk.name, reads.reader(rows, vs.schema))
                registered.append(lk.name)
            mentions = self._catalog.names.counts(sql)
            with self._serving(list(mentions), [n for n, k in mentions.items()
                                                if not reads.scanned_once(sql, "read", frozenset(), k)]):
                return run(self._conn, sql, None)
        finally:
            for name in registered:
                with contextlib.suppress(Exception):
                    self._conn.unregister(name)

    def _count(self, text: str, vs: ViewState) -> Cursor:
        """``SELECT count(*) FROM v``: DuckDB's result shape over no rows, the engine's count."""
        desc = self._count_shapes.get(text)
        if desc is None:
            name = reads.rows_name(vs.name)
            self._conn.register(name, reads.reader((), vs.schema))
            try:
                desc = run(self._conn, text, None).description
            finally:
                self._conn.unregister(name)
            if len(self._count_shapes) > 256:
                self._count_shapes.clear()
            self._count_shapes[text] = desc
        return Cursor(desc, [(len(vs.view),)])

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

    # -- DDL ------------------------------------------------------------------------------
    def _guard_ddl(self, r: Route) -> None:
        t = r.target
        if t is None or not (r.kind == "alter" or "or_replace" in r.flags):
            return
        if t in self._views:
            raise IVMError(unalterable(t))
        if t in self._catalog.captures:
            verb = "altering" if r.kind == "alter" else "replacing"
            raise IVMError(f"table {t!r} is read by incremental view(s) {', '.join(self._catalog.readers(t))}: "
                           f"drop them before {verb} it")

    def _drop(self, r: Route, params) -> Cursor:
        if "schema" in r.flags:
            if r.target == duck.SCHEMA and self._views:
                raise IVMError(f"schema {duck.SCHEMA!r} holds the catalog of incremental views "
                               f"{', '.join(sorted(self._views))}: drop those views first")
            return run(self._conn, r.text, params)
        st = classify(r.text, self.dialect)
        if hasattr(st, "names"):  # DROP VIEW
            ours = [n for n in st.names if n in self._views]
            if not ours:
                return run(self._conn, r.text, params)
            if self._in_txn:
                raise IVMError("DROP VIEW of an incremental view inside an explicit transaction is not supported")
            for n in st.names:
                if n in self._views:
                    self._catalog.drop(n)
                else:
                    run(self._conn, f"DROP VIEW {'IF EXISTS ' if st.if_exists else ''}{quote(n)}", None)
            return Cursor()
        if getattr(st, "drop_kind", None) == "TABLE":
            for t in st.targets or []:
                if t in self._views and self._views[t].materialized:
                    raise IVMError(f"{t!r} is the table of incremental materialized view {t!r}: use DROP VIEW {t}")
                if t in self._catalog.captures:
                    raise IVMError(f"table {t!r} is read by incremental view(s) "
                                   f"{', '.join(self._catalog.readers(t))}: drop them before dropping it")
        return run(self._conn, r.text, params)

    # -- transactions -------------------------------------------------------------------
    def _transaction(self, r: Route) -> Cursor:
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
