"""DuckDB sessions: ``ivm_layer.connect()``, incremental end to end.

A :class:`Session` wraps one DuckDB connection. Its cost follows the change, not the data:

- **Routing** (:mod:`.router`): every statement is classified by its leading keywords and
  target table, without a parse. Statements that touch no tracked table go to DuckDB as they
  are and cost what DuckDB costs.
- **Capture** (:mod:`connectors.duckdb`): a write to a table an incremental view reads is
  run so that DuckDB returns exactly the rows it changed (``RETURNING``, the pre-image of an
  ``UPDATE``, ``COPY`` through a stage table); those rows are applied to the views reading
  the table through the engine's two-phase update (all views or none), and to materialized
  view tables, in the statement's transaction. Writes DuckDB cannot describe row by row
  (``INSERT OR REPLACE``, ``ON CONFLICT DO UPDATE``, ``MERGE``) and writes made around the
  session (``session.connection``, another connection) are found by a fingerprint check on
  ``sync()``/``poll()`` and after statements the router cannot attribute to one table, then
  diffed (O(table)).
- **Reads** (:mod:`.reads`): a non-materialized view is a ``TEMP VIEW`` over a lazy Arrow
  reader of the engine's rows registered for the statement that reads it; ``count(*)`` is
  the engine's O(1) count. Nothing is copied.
- **Transactions**: inside ``BEGIN … COMMIT`` every captured change is applied at once (your
  own writes show in the views) and logged; ``ROLLBACK`` (or a failed ``COMMIT``) undoes the
  engine side, DuckDB rolls back the materialized tables itself. Subscribers run after the
  commit.

View definitions live in ``ivm.views(name, kind, definition)``; a session on a file database
checks every catalog row and recompiles and reloads the views from the current table contents
when it connects; a row that fails the checks stops that view alone.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from dataclasses import dataclass, field
from typing import Any

from connectors import duckdb as duck

from ..compile import compile_view
from ..engine.view import View
from ..errors import IVMError, SQLError
from ..progress import Progress
from ..sql.statements import CreateIncrementalView, classify
from . import reads
from .core import Cursor, SessionBase, ViewInfo, ViewStateBase, dedupe_names
from .router import Route, route

__all__ = ["Cursor", "Session", "ViewInfo", "connect", "SourceGoneError", "CatalogWarning"]

quote = duck.quote
log = logging.getLogger("ivm_layer.sessions")
MARKER = "ivm-layer: incremental materialized view"


class SourceGoneError(IVMError):
    """A table an incremental view reads was dropped or replaced behind the session's back."""


class CatalogWarning(UserWarning):
    """A catalog row could not be resumed; its view is stopped, the others work."""


@dataclass(eq=False)
class _ViewState(ViewStateBase):
    stmt: CreateIncrementalView
    view: View | None
    tables: list[str]
    columns: list[str]          # DuckDB column names of the view's rows
    types: list[str]            # DuckDB column types
    schema: Any = None          # Arrow schema of the rows (served views)
    error: IVMError | None = None
    subscribers: list = field(default_factory=list)
    source_types: dict = field(default_factory=dict)  # table -> DuckDB column types at creation
    rebuilds: int = 0           # times a write to a static table rebuilt the view

    @property
    def static(self) -> set[str]:
        return set(getattr(self.stmt, "static", ()) or ())


class _Rebuilt:
    """What a rollback restores after a rebuild: the previous view object."""

    __slots__ = ("view", "rebuilds")

    def __init__(self, view, rebuilds: int):
        self.view, self.rebuilds = view, rebuilds


def connect(url: str | None = None, **options: Any) -> SessionBase:
    """Open a session. ``None``, ``"duckdb://"``, ``":memory:"``: in-memory DuckDB;
    ``"duckdb:///path/file.duckdb"`` or a path ending in ``.duckdb``: a DuckDB file;
    ``"postgresql://…"``: a :class:`~ivm_layer.sessions.postgres.PostgresSession`, with
    ``options`` (``session=``, ``state_dir=``, ``set_replica_identity=``, …) passed to
    :func:`~ivm_layer.sessions.postgres.connect_postgres`."""
    import duckdb

    if url is not None and url.startswith(("postgresql://", "postgres://")):
        from .postgres import connect_postgres

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
    notify_after_commit = True

    def __init__(self, conn, url: str = "duckdb://", progress: bool | None = None):
        self.url = url
        self._conn = conn
        self._views: dict[str, _ViewState] = {}
        self._captures: dict[str, duck.TableCapture] = {}
        self._names = reads.ViewNames()
        self._in_txn = False
        self._txn_undo: list = []
        self._txn_fps: dict[str, tuple | None] = {}
        self._pending: dict = {}
        self._closed = False
        self._progress = progress
        self._count_desc = None
        self._count_shapes: dict[str, Any] = {}   # count(*) statement -> DuckDB's description
        self._load_catalog()

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
        if self._in_txn or not self._captures:
            return 0
        return self._autocommit(lambda undo: self._capture_unseen(list(self._captures), undo))

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
        return self._healthy(self._state(name)).view

    def explain(self, name: str) -> str:
        self._check_open()
        return self._healthy(self._state(name)).view.explain()

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
        r = route(text)
        kind = r.kind
        if kind in ("begin", "commit", "rollback"):
            return self._transaction(r)
        if kind == "create_view":
            if params:
                raise IVMError("CREATE INCREMENTAL VIEW does not take parameters")
            self._create_view(classify(text, self.dialect))
            return Cursor()
        if kind == "drop":
            if "schema" in r.flags and r.target == duck.SCHEMA and self._views:
                raise IVMError(f"schema {duck.SCHEMA!r} holds the catalog of incremental views "
                               f"{', '.join(sorted(self._views))}: drop those views first")
            return self._drop(text, params)
        if kind == "read" and params is None:
            target = reads.count_target(text)
            vs = self._views.get(target) if target is not None else None
            if vs is not None and not vs.materialized:
                return self._count(text, self._healthy(vs))
        if kind in ("alter", "create_table"):
            self._guard_ddl(r)
        with self._serving(text):
            if kind in ("insert", "update", "delete", "truncate", "copy_from", "merge"):
                if r.target in self._captures:
                    return self._write(r, params)
            elif kind == "unknown_write" and self._captures:
                cur = self._run(text, params)
                if self._in_txn:
                    self._capture_unseen(list(self._captures), self._txn_undo)
                else:
                    self._autocommit(lambda undo: self._capture_unseen(list(self._captures), undo))
                return cur
            return self._run(text, params)

    def _run(self, text: str, params) -> Cursor:
        res = self._conn.execute(text, params) if params is not None else self._conn.execute(text)
        desc = res.description
        rows = res.fetchall() if desc is not None else []
        rowcount = -1
        if desc is not None and len(desc) == 1 and desc[0][0] == "Count" and len(rows) == 1:
            rowcount = rows[0][0]
        return Cursor(desc, rows, rowcount)

    @contextlib.contextmanager
    def _serving(self, text: str):
        """Register a lazy reader of the engine's rows for every served view ``text``
        mentions, for the duration of the statement."""
        names = [n for n in self._names.find(text) if not self._views[n].materialized]
        registered = []
        try:
            for n in names:
                vs = self._healthy(self._views[n])
                self._conn.register(reads.rows_name(n), reads.reader(vs.view.rows(), vs.schema))
                registered.append(n)
            yield
        finally:
            for n in registered:
                with contextlib.suppress(Exception):
                    self._conn.unregister(reads.rows_name(n))

    def _count(self, text: str, vs: _ViewState) -> Cursor:
        """``SELECT count(*) FROM v``: DuckDB's result shape over no rows, the engine's count."""
        desc = self._count_shapes.get(text)
        if desc is None:
            name = reads.rows_name(vs.name)
            self._conn.register(name, reads.reader((), vs.schema))
            try:
                res = self._conn.execute(text)
                desc = res.description
                res.fetchall()
            finally:
                self._conn.unregister(name)
            if len(self._count_shapes) > 256:
                self._count_shapes.clear()
            self._count_shapes[text] = desc
        return Cursor(desc, [(len(vs.view),)])

    # -- writes to tracked tables ---------------------------------------------------------
    def _write(self, r: Route, params) -> Cursor:
        if self._in_txn:
            return self._capture_write(r, params, self._txn_undo)
        return self._autocommit(lambda undo: self._capture_write(r, params, undo))

    def _autocommit(self, body):
        """Run ``body(undo)`` in a transaction of its own with the engine side undone when it
        fails, and the subscribers told after the commit."""
        undo: list = []
        fps = {t: c.fingerprint for t, c in self._captures.items()}
        self._conn.execute("BEGIN TRANSACTION")
        try:
            out = body(undo)
            self._conn.execute("COMMIT")
        except BaseException:
            self._abort(undo, fps)
            raise
        self._notify(self._pending)
        return out

    def _capture_write(self, r: Route, params, undo: list) -> Cursor:
        cap = self._captures[r.target]
        kind = r.kind
        user_returning = "returning" in r.flags
        desc = None
        rows: list = []
        deleted: list = []
        inserted: list = []
        if kind == "insert" and "upsert" not in r.flags:
            desc, rows, inserted = cap.run_returning(self._conn, r.text, params, user_returning)
            n = len(inserted)
        elif kind == "delete":
            desc, rows, deleted = cap.run_returning(self._conn, r.text, params, user_returning)
            n = len(deleted)
        elif kind == "truncate":
            deleted = cap.delete_all(self._conn)
            n = len(deleted)
        elif kind == "copy_from" and "stdin" not in r.flags:
            inserted = cap.copy_from(self._conn, r.text, r.target_span, r.columns)
            n = len(inserted)
        elif kind == "update":
            before = cap.preimage(self._conn, r.text, params)
            if before is None:
                return self._write_unseen(r, params, undo)
            desc, rows, inserted = cap.run_returning(self._conn, r.text, params, user_returning)
            if len(inserted) != len(before):  # a volatile WHERE: trust only a diff
                self._apply_unseen(cap, undo)
                return self._result(desc, rows, len(inserted))
            deleted = before
            n = len(inserted)
        else:
            return self._write_unseen(r, params, undo)
        cap.note(deleted, -1)
        cap.note(inserted, 1)
        changes = [(row, -1) for row in cap.strip(deleted)] + [(row, 1) for row in cap.strip(inserted)]
        if changes:
            self._apply({r.target: changes}, undo)
        return self._result(desc, rows, n)

    def _result(self, desc, rows, n: int) -> Cursor:
        if desc is not None:
            return Cursor(desc, rows, len(rows))
        if self._count_desc is None:
            self._count_desc = self._conn.execute('SELECT 0::BIGINT AS "Count" WHERE false').description
        return Cursor(self._count_desc, [(n,)], n)

    def _write_unseen(self, r: Route, params, undo: list) -> Cursor:
        """A write DuckDB cannot describe row by row: run it, then diff its table."""
        cur = self._run(r.text, params)
        self._apply_unseen(self._captures[r.target], undo)
        return cur

    def _apply_unseen(self, cap: duck.TableCapture, undo: list) -> int:
        deleted, inserted = cap.diff_against(self._conn, self._stored(cap.table))
        changes = [(row, -1) for row in deleted] + [(row, 1) for row in inserted]
        if changes:
            self._apply({cap.table: changes}, undo)
        return len(changes)

    def _capture_unseen(self, tables: list[str], undo: list) -> int:
        """The fallback: tables whose fingerprint moved are diffed; a vanished table stops the
        views that read it (each alone)."""
        n = 0
        for t in tables:
            cap = self._captures.get(t)
            if cap is None:
                continue
            if duck.table_columns(self._conn, t) != dict(zip(cap.columns, self._types_of(t))):
                self._source_gone(t)
                continue
            if cap.changed(self._conn):
                n += self._apply_unseen(cap, undo)
        return n

    def _types_of(self, table: str) -> list[str]:
        for vs in self._views.values():
            if table in vs.tables and vs.error is None:
                return vs.source_types[table]
        return []

    def _stored(self, table: str):
        for vs in self._views.values():
            if vs.error is None and table in vs.tables:
                return vs.view.base_rows(table)
        return {}

    def _apply(self, changes: dict[str, list[tuple[tuple, int]]], undo: list) -> None:
        """Apply captured changes to every view reading them: prepare all (any error: nothing
        changed), then commit all and write materialized view tables."""
        prepared = []
        rebuild = []
        for vs in self._views.values():
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
            self._rebuild(vs, undo)
        for vs, batch, p in prepared:
            want = vs.materialized or bool(vs.subscribers)
            change = vs.view.commit(p, want_change=want)
            undo.append((vs, batch))
            if change:
                if vs.materialized:
                    self._write_change(vs, change)
                if vs.subscribers:
                    acc = self._pending.setdefault(vs, {})
                    for row, k in change:
                        acc[row] = acc.get(row, 0) + k

    def _abort(self, undo: list, fps: dict) -> None:
        import duckdb

        with contextlib.suppress(duckdb.Error):
            self._conn.execute("ROLLBACK")
        self._undo(undo)
        self._pending.clear()
        for t, fp in fps.items():
            if t in self._captures:
                self._captures[t].fingerprint = fp

    def _undo(self, undo: list) -> None:
        for vs, batch in reversed(undo):
            if isinstance(batch, _Rebuilt):
                vs.view, vs.rebuilds = batch.view, batch.rebuilds   # a rebuild: the old view back
                continue
            vs.view.apply({t: [(r, -k) for r, k in rows] for t, rows in batch.items()})
        undo.clear()

    def _compile(self, st: CreateIncrementalView, schema: dict):
        static = tuple(getattr(st, "static", ()) or ())
        if static:
            return compile_view(st.select_sql, schema, dialect=self.dialect, static=static)
        return compile_view(st.select_sql, schema, dialect=self.dialect)

    def _rebuild(self, vs: _ViewState, undo: list) -> None:
        """A static table of ``vs`` changed: recompile and reload the view from the tables as
        they are now (O(N), inside the statement's transaction; undone by a rollback)."""
        schema = {t: dict(zip(self._captures[t].columns, vs.source_types[t])) for t in vs.tables}
        old = _Rebuilt(vs.view, vs.rebuilds)
        view = self._compile(vs.stmt, schema)
        self._load_view(vs.name, view, sorted(vs.tables, key=lambda t: t not in vs.static))
        undo.append((vs, old))
        vs.view = view
        vs.rebuilds += 1
        if vs.materialized:
            self._fill_table(vs, fresh=False)
        log.info("incremental view %s rebuilt: a static table changed (rebuild %d)", vs.name, vs.rebuilds)

    # -- DDL guards -----------------------------------------------------------------------
    def _guard_ddl(self, r: Route) -> None:
        t = r.target
        if t is None:
            return
        vs = self._views.get(t)
        if vs is not None and (r.kind == "alter" or "or_replace" in r.flags):
            raise IVMError(f"{t!r} is incremental view {t!r}: use DROP VIEW {t} first")
        if t in self._captures and (r.kind == "alter" or "or_replace" in r.flags):
            verb = "altering" if r.kind == "alter" else "replacing"
            raise IVMError(f"table {t!r} is read by incremental view(s) {', '.join(self._readers(t))}: "
                           f"drop them before {verb} it")

    def _readers(self, table: str) -> list[str]:
        return sorted(v.name for v in self._views.values() if table in v.tables)

    def _drop(self, text: str, params) -> Cursor:
        st = classify(text, self.dialect)
        kind = getattr(st, "drop_kind", None)
        names = getattr(st, "names", None) or getattr(st, "targets", None) or []
        if kind is None and hasattr(st, "names"):  # DROP VIEW
            return self._drop_views(st)
        if kind == "TABLE":
            for t in names:
                if t in self._views and self._views[t].materialized:
                    raise IVMError(f"{t!r} is the table of incremental materialized view {t!r}: use DROP VIEW {t}")
                if t in self._captures:
                    raise IVMError(f"table {t!r} is read by incremental view(s) {', '.join(self._readers(t))}: "
                                   "drop them before dropping it")
        return self._run(text, params)

    # -- transactions -------------------------------------------------------------------
    def _transaction(self, r: Route) -> Cursor:
        import duckdb

        if r.kind == "begin":
            cur = self._run(r.text, None)
            self._in_txn = True
            self._txn_undo = []
            self._txn_fps = {t: c.fingerprint for t, c in self._captures.items()}
            return cur
        if not self._in_txn:
            return self._run(r.text, None)
        aborted = False
        if r.kind == "commit":
            # DuckDB turns COMMIT of an aborted transaction into a silent rollback: probe first.
            try:
                self._conn.execute("SELECT 1").fetchall()
            except duckdb.Error:
                aborted = True
        try:
            cur = self._run(r.text, None)
        except duckdb.Error:
            aborted = True
            raise
        finally:
            if r.kind == "rollback" or aborted:
                self._undo(self._txn_undo)
                self._pending.clear()
                for t, fp in self._txn_fps.items():
                    if t in self._captures:
                        self._captures[t].fingerprint = fp
            self._in_txn = False
            self._txn_undo = []
            self._txn_fps = {}
        self._notify(self._pending)
        return cur

    # -- views --------------------------------------------------------------------------
    def _schema_for(self, st: CreateIncrementalView) -> dict[str, dict[str, str]]:
        schema: dict[str, dict[str, str]] = {}
        for t in st.tables:
            if t in self._views:
                raise SQLError(f"incremental view {st.name!r} reads incremental view {t!r}: "
                               "views over views are not supported yet")
            cols = duck.table_columns(self._conn, t)
            if cols is not None:
                schema[t] = cols
        if not schema:
            raise SQLError(f"unknown table {st.tables[0]!r} in the definition of {st.name!r}"
                           if st.tables else f"incremental view {st.name!r} reads no table")
        return schema

    def _create_view(self, st: CreateIncrementalView) -> None:
        if self._in_txn:
            raise IVMError("CREATE INCREMENTAL VIEW inside an explicit transaction is not supported: "
                           "COMMIT or ROLLBACK first")
        name = st.name
        if name in self._views:
            if st.if_not_exists:
                return
            if not st.or_replace:
                raise SQLError(f"incremental view {name!r} already exists")
            self._drop_view(name)
        if self._object_exists(name):
            raise SQLError(f"cannot create incremental view {name!r}: a table or view of that name exists")
        schema = self._schema_for(st)
        view = self._compile(st, schema)
        self._conn.execute("BEGIN TRANSACTION")
        try:
            vs = self._install(st, view, schema, fresh_table=True)
            self._conn.execute(f"INSERT INTO {duck.SCHEMA}.views VALUES (?, ?, ?)",
                               [name, "materialized" if st.materialized else "incremental",
                                st.definition(self.dialect)])
            self._conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(Exception):
                self._conn.execute("ROLLBACK")
            self._forget_unused()
            raise
        self._register(vs)

    def _register(self, vs: _ViewState) -> None:
        self._views[vs.name] = vs
        self._names.set(self._views)

    def _install(self, st: CreateIncrementalView, view: View, schema: dict, fresh_table: bool) -> _ViewState:
        """Track the base tables, bulk-load the view, describe (and fill) its table."""
        desc = self._conn.execute(f"DESCRIBE {st.select_sql}").fetchall()
        types = [r[1] for r in desc]
        columns = dedupe_names([r[0] for r in desc])
        if st.columns:
            if len(st.columns) != len(types):
                raise SQLError(f"view {st.name!r} names {len(st.columns)} columns but its query has {len(types)}")
            columns = list(st.columns)
        if len(types) != len(view.columns):
            raise IVMError(f"internal: DuckDB sees {len(types)} columns, the engine {len(view.columns)}")
        vs = _ViewState(st, view, list(view.tables), columns, types)
        vs.source_types = {t: list(schema[t].values()) for t in vs.tables}
        self._load(vs, schema)
        if st.materialized:
            self._fill_table(vs, fresh_table)
        else:
            import pyarrow as pa

            reads.warm_up()
            vs.schema = pa.schema([pa.field(c, _arrow_type(self._conn, t)) for c, t in zip(columns, types)])
            rows_name = reads.rows_name(st.name)
            self._conn.register(rows_name, reads.reader((), vs.schema))
            try:
                self._conn.execute(reads.view_sql(st.name, columns, types))
            finally:
                self._conn.unregister(rows_name)
        return vs

    def _load(self, vs: _ViewState, schema: dict) -> None:
        """Track the view's tables and bulk-load it from their current rows."""
        for t in vs.tables:
            if t not in self._captures:
                cap = duck.TableCapture(t, list(schema[t]))
                cap.fingerprint = cap.current_fingerprint(self._conn)
                self._captures[t] = cap
        self._load_view(vs.name, vs.view, sorted(vs.tables, key=lambda t: t not in vs.static))

    def _load_view(self, name: str, view, tables: list[str]) -> None:
        """Apply the tables' rows to ``view`` in batches (static tables first), with a progress
        bar on a terminal."""
        total = sum(self._captures[t].fingerprint[0] for t in tables)
        bar = Progress(total, f"loading {name}", enabled=self._progress)
        for t in tables:
            for rows in self._captures[t].scan(self._conn):
                view.apply({t: [(r, 1) for r in rows]})
                bar.advance(len(rows))
        bar.close()

    def _fill_table(self, vs: _ViewState, fresh: bool) -> None:
        table = f"main.{quote(vs.name)}"
        if fresh:
            cols = ", ".join(f"{quote(c)} {t}" for c, t in zip(vs.columns, vs.types))
            self._conn.execute(f"CREATE TABLE {table} ({cols})")
            self._conn.execute(f"COMMENT ON TABLE {table} IS '{MARKER}'")
        else:
            self._conn.execute(f"DELETE FROM {table}")
        self._bulk_insert(table, vs.types, vs.view.rows())

    def _drop_views(self, st) -> Cursor:
        ours = [n for n in st.names if n in self._views]
        if not ours:
            return self._run(st.text, None)
        if self._in_txn:
            raise IVMError("DROP VIEW of an incremental view inside an explicit transaction is not supported")
        for n in st.names:
            if n in self._views:
                self._drop_view(n)
            else:
                self._run(f"DROP VIEW {'IF EXISTS ' if st.if_exists else ''}{quote(n)}", None)
        return Cursor()

    def _drop_view(self, name: str) -> None:
        vs = self._views[name]
        self._conn.execute("BEGIN TRANSACTION")
        try:
            if vs.materialized:
                if duck.table_comment(self._conn, name) == MARKER:
                    self._conn.execute(f"DROP TABLE IF EXISTS main.{quote(name)}")
            else:
                self._conn.execute(f"DROP VIEW IF EXISTS temp.{quote(name)}")
            self._conn.execute(f"DELETE FROM {duck.SCHEMA}.views WHERE name = ?", [name])
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        del self._views[name]
        self._names.set(self._views)
        self._forget_unused()

    def _forget_unused(self) -> None:
        used = {t for v in self._views.values() if v.error is None for t in v.tables}
        for t in [t for t in self._captures if t not in used]:
            del self._captures[t]

    def _source_gone(self, table: str) -> None:
        for vs in self._views.values():
            if table in vs.tables and vs.error is None:
                self._stop(vs, SourceGoneError(
                    f"incremental view {vs.name!r} stopped: its table {table!r} was dropped, replaced or "
                    f"altered outside the session; DROP VIEW {vs.name} and create it again"))
        self._forget_unused()

    def _stop(self, vs: _ViewState, err: IVMError) -> None:
        vs.error = err
        vs.view = None

    def _healthy(self, vs: _ViewState) -> _ViewState:
        if vs.error is not None:
            raise vs.error
        return vs

    def _object_exists(self, name: str) -> bool:
        n = self._conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema IN ('main', 'temp') "
            "AND lower(table_name) = ?", [name]).fetchall()[0][0]
        return n > 0

    def _load_catalog(self) -> None:
        duck.ensure_catalog(self._conn)
        duck.drop_legacy_shadows(self._conn)
        rows = self._conn.execute(f"SELECT name, kind, definition FROM {duck.SCHEMA}.views ORDER BY name").fetchall()
        for name, kind, definition in rows:
            try:
                vs = self._resume(name, kind, definition)
            except Exception as e:  # one bad row must not make the database unopenable
                err = e if isinstance(e, IVMError) else IVMError(f"{type(e).__name__}: {e}")
                stmt = _stub_statement(name, kind, definition)
                vs = _ViewState(stmt, None, [], [], [], error=IVMError(
                    f"incremental view {name!r} could not be resumed from the catalog: {err}"))
                warnings.warn(CatalogWarning(str(vs.error)), stacklevel=3)
            self._register(vs)

    def _resume(self, name: str, kind: str, definition: str) -> _ViewState:
        """Recompile and reload one catalog row after checking it describes only itself."""
        if kind not in ("incremental", "materialized"):
            raise IVMError(f"unknown kind {kind!r}")
        st = classify(definition, self.dialect)
        if not isinstance(st, CreateIncrementalView):
            raise IVMError("its definition is not a CREATE INCREMENTAL VIEW statement")
        if st.name != name or st.materialized != (kind == "materialized") or st.or_replace:
            raise IVMError(f"its definition ({st.definition(self.dialect)[:80]}…) does not match the "
                           f"name {name!r} and kind {kind!r} it is stored under")
        exists = self._object_exists(name)
        if st.materialized and exists and duck.table_comment(self._conn, name) != MARKER:
            raise IVMError(f"table {name!r} was not created by ivm-layer; it was left untouched")
        if not st.materialized and self._conn.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'main' "
                "AND lower(table_name) = ?", [name]).fetchall()[0][0]:
            raise IVMError(f"a table or view {name!r} exists in the database; it was left untouched")
        schema = self._schema_for(st)
        view = self._compile(st, schema)
        self._conn.execute("BEGIN TRANSACTION")
        try:
            vs = self._install(st, view, schema, fresh_table=not exists)
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            self._forget_unused()
            raise
        return vs

    # -- writing view rows --------------------------------------------------------------
    def _bulk_insert(self, target: str, types: list[str], pairs, chunk: int = 100_000) -> None:
        """Insert ``(row, k)`` pairs (k copies each) with one statement per chunk: one list
        parameter per column, UNNESTed."""
        sel = ", ".join(f"unnest(${i + 1}::{t}[])" for i, t in enumerate(types))
        buf: list[tuple] = []
        for row, k in pairs:
            buf.extend([row] * k) if k != 1 else buf.append(row)
            if len(buf) >= chunk:
                self._conn.execute(f"INSERT INTO {target} SELECT {sel}", [list(c) for c in zip(*buf)])
                buf = []
        if buf:
            self._conn.execute(f"INSERT INTO {target} SELECT {sel}", [list(c) for c in zip(*buf)])

    def _write_change(self, vs: _ViewState, change: list[tuple[tuple, int]]) -> None:
        """Apply a view change to its materialized table (inside the current transaction)."""
        table = f"main.{quote(vs.name)}"
        dels = [(r, -k) for r, k in change if k < 0]
        if dels:
            tmp_cols = ", ".join(f"{quote(c)} {t}" for c, t in zip(vs.columns, vs.types))
            self._conn.execute(f"CREATE OR REPLACE TEMP TABLE _ivm_mdel ({tmp_cols}, _ivm_id BIGINT, _ivm_k BIGINT)")
            self._bulk_insert("temp._ivm_mdel", vs.types + ["BIGINT", "BIGINT"],
                              ((r + (i, k), 1) for i, (r, k) in enumerate(dels)))
            on = " AND ".join(f"m.{quote(c)} IS NOT DISTINCT FROM d.{quote(c)}" for c in vs.columns)
            self._conn.execute(
                f"DELETE FROM {table} WHERE rowid IN (SELECT rid FROM ("
                f"SELECT m.rowid AS rid, d._ivm_k AS k, "
                f"row_number() OVER (PARTITION BY d._ivm_id ORDER BY m.rowid) AS rn "
                f"FROM {table} m JOIN temp._ivm_mdel d ON {on}) WHERE rn <= k)")
            self._conn.execute("DROP TABLE temp._ivm_mdel")
        ins = [(r, k) for r, k in change if k > 0]
        if ins:
            self._bulk_insert(table, vs.types, ins)


def _arrow_type(conn, sql_type: str):
    """The Arrow type DuckDB uses for a column type."""
    return conn.sql(f"SELECT NULL::{sql_type} AS x").to_arrow_table().schema.field(0).type


def _stub_statement(name: str, kind: str, definition: str) -> CreateIncrementalView:
    return CreateIncrementalView(text=str(definition), name=str(name), select_sql=str(definition),
                                 materialized=kind == "materialized")

