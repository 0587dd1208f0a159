"""Sessions over a real database: ``ivm_layer.connect()``.

A :class:`Session` wraps one DuckDB connection. ``CREATE INCREMENTAL [MATERIALIZED] VIEW``
compiles the view with the column types from DuckDB's catalog, starts change capture on its
base tables (``connectors.duckdb``: rowid + row-hash shadows) and bulk-loads their current
contents. Every other statement goes to DuckDB unchanged; after each statement that may
write a tracked table, the session captures the changed rows and applies them to the views
reading that table. Outside an explicit transaction the statement, the capture, the shadow
patch and the writes to materialized view tables run in one DuckDB transaction. Inside
``BEGIN … COMMIT`` changes are captured after every statement too (so the views read your
own writes); the engine-side changes are logged and undone on ``ROLLBACK`` (DuckDB rolls
back the shadows and materialized tables itself).

``SELECT … FROM v`` for a non-materialized incremental view ``v`` is answered by DuckDB
over a temporary table ``v`` holding the view's current rows (multiplicity k → k copies),
refreshed from the engine only when the view changed since the last query; so filters,
ORDER BY, LIMIT and queries mixing views and tables all work.

View definitions live in ``ivm.views(name, kind, definition)``; a session on a file
database recompiles and reloads them from the current table contents when it connects.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from connectors import duckdb as duck

from ..compile import compile_view
from ..engine.view import View
from ..errors import IVMError, SQLError
from .core import Cursor, SessionBase, ViewStateBase, ViewInfo, dedupe_names
from ..sql.statements import (
    CreateIncrementalView,
    DropView,
    Passthrough,
    SelectStatement,
    TransactionControl,
    classify,
)

__all__ = ["Cursor", "Session", "ViewInfo", "connect"]

quote = duck.quote

# Statements that write the tables they name and can run inside a transaction: run together
# with the capture in one transaction when autocommitting.
_WRAPPED_KINDS = {"INSERT", "UPDATE", "DELETE", "MERGE", "TRUNCATETABLE", "COPY"}


@dataclass
class _ViewState(ViewStateBase):
    stmt: CreateIncrementalView
    view: View
    tables: list[str]
    columns: list[str]          # DuckDB column names of the view's rows
    types: list[str]            # DuckDB column types
    version: int = 0            # bumped on every change
    temp_version: int = -1      # version loaded into the TEMP table (non-materialized)
    undo: list = field(default_factory=list)


def connect(url: str | None = None, **options: Any) -> Session:
    """Open a session. ``None``, ``"duckdb://"``, ``":memory:"``: in-memory DuckDB;
    ``"duckdb:///path/file.duckdb"`` or a path ending in ``.duckdb``: a DuckDB file;
    ``"postgresql://…"``: a :class:`~ivm_layer.sessions.postgres.PostgresSession`, with ``options``
    (``session=``, ``state_dir=``, ``set_replica_identity=``, …) passed to
    :func:`~ivm_layer.sessions.postgres.connect_postgres`."""
    import duckdb

    from connectors.pgconn import is_postgres_target

    if is_postgres_target(url):
        from .postgres import connect_postgres

        return connect_postgres(url, **options)
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
    return Session(conn, url=url or "duckdb://")


class Session(SessionBase):
    """A DuckDB connection with incremental views. Build it with :func:`connect`."""

    dialect = "duckdb"

    def __init__(self, conn, url: str = "duckdb://"):
        self.url = url
        self._conn = conn
        self._views: dict[str, _ViewState] = {}
        self._trackers: dict[str, duck.Tracker] = {}
        self._in_txn = False
        self._txn_undo: list[tuple[_ViewState, dict]] = []
        self._txn_fps: dict[str, tuple | None] = {}
        self._closed = False
        self._load_catalog()

    # -- public API ---------------------------------------------------------------------
    def sync(self) -> None:
        """Block until every committed change is applied. Statements run through the session
        are applied as they run; this also captures writes made around the session (through
        :attr:`connection` or another connection to the same database)."""
        self.poll()

    def poll(self, timeout: float = 0.0) -> int:
        """Apply the changes available now; return how many source-row changes were applied.
        DuckDB has no stream to wait on, so ``timeout`` is not used (the shell's ``\\watch`` calls
        this in a loop)."""
        self._check_open()
        if self._in_txn or not self._trackers:
            return 0
        undo: list = []
        fps = {t: tr.fingerprint for t, tr in self._trackers.items()}
        self._conn.execute("BEGIN TRANSACTION")
        try:
            n = self._capture(list(self._trackers), undo)
            self._conn.execute("COMMIT")
        except BaseException:
            self._abort(undo, fps)
            raise
        return n

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

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._conn.close()

    @property
    def connection(self):
        """The underlying DuckDB connection (writes through it bypass change capture until
        the next statement run through the session)."""
        return self._conn

    # -- dispatch -----------------------------------------------------------------------
    def _execute_one(self, text: str, params) -> Cursor:
        st = classify(text, self.dialect)
        if isinstance(st, CreateIncrementalView):
            if params:
                raise IVMError("CREATE INCREMENTAL VIEW does not take parameters")
            self._create_view(st)
            return Cursor()
        if isinstance(st, DropView):
            return self._drop_views(st)
        if isinstance(st, TransactionControl):
            return self._transaction(st)
        if isinstance(st, SelectStatement):
            self._refresh_temp(st.tables)
            return self._run(text, params)
        return self._passthrough(st, params)

    def _run(self, text: str, params) -> Cursor:
        res = self._conn.execute(text, params) if params is not None else self._conn.execute(text)
        desc = res.description
        rows = res.fetchall() if desc is not None else []
        rowcount = -1
        if desc is not None and len(desc) == 1 and desc[0][0] == "Count" and len(rows) == 1:
            rowcount = rows[0][0]
        return Cursor(desc, rows, rowcount)

    def _passthrough(self, st: Passthrough, params) -> Cursor:
        self._guard_ddl(st)
        self._refresh_temp(st.tables)
        if not self._trackers:
            return self._run(st.text, params)
        if st.targets is not None:
            tables = [t for t in st.targets if t in self._trackers]
            if not tables:
                return self._run(st.text, params)
        else:
            tables = list(self._trackers)
        if self._in_txn:
            cur = self._run(st.text, params)
            self._capture(tables, self._txn_undo)
            return cur
        wrap = st.kind in _WRAPPED_KINDS
        undo: list = []
        fps = {t: tr.fingerprint for t, tr in self._trackers.items()}
        if not wrap:  # statements that cannot run inside a transaction go first, on their own
            cur = self._run(st.text, params)
        self._conn.execute("BEGIN TRANSACTION")
        try:
            if wrap:
                cur = self._run(st.text, params)
            self._capture(tables, undo)
            self._conn.execute("COMMIT")
        except BaseException:
            self._abort(undo, fps)
            raise
        return cur

    def _abort(self, undo: list, fps: dict) -> None:
        import duckdb

        try:
            self._conn.execute("ROLLBACK")
        except duckdb.Error:
            pass
        self._undo(undo)
        for t, fp in fps.items():
            if t in self._trackers:
                self._trackers[t].fingerprint = fp

    def _guard_ddl(self, st: Passthrough) -> None:
        if st.kind not in ("DROP", "ALTER") or not st.targets:
            return
        for t in st.targets:
            vs = self._views.get(t)
            if vs is not None and vs.materialized and (st.kind == "ALTER" or st.drop_kind == "TABLE"):
                raise IVMError(f"{t!r} is the table of incremental materialized view {t!r}: use DROP VIEW {t}")
            if t in self._trackers and (st.kind == "ALTER" or st.drop_kind == "TABLE"):
                readers = sorted(v.name for v in self._views.values() if t in v.tables)
                raise IVMError(f"table {t!r} is read by incremental view(s) {', '.join(readers)}: "
                               f"drop them before {'altering' if st.kind == 'ALTER' else 'dropping'} it")

    # -- transactions -------------------------------------------------------------------
    def _transaction(self, st: TransactionControl) -> Cursor:
        import duckdb

        if st.action == "begin":
            cur = self._run(st.text, None)
            self._in_txn = True
            self._txn_undo = []
            self._txn_fps = {t: tr.fingerprint for t, tr in self._trackers.items()}
            return cur
        if not self._in_txn:
            return self._run(st.text, None)
        aborted = False
        if st.action == "commit":
            # DuckDB turns COMMIT of an aborted transaction into a silent rollback: probe first.
            try:
                self._conn.execute("SELECT 1").fetchall()
            except duckdb.Error:
                aborted = True
        try:
            cur = self._run(st.text, None)
        except duckdb.Error:
            aborted = True
            raise
        finally:
            if st.action == "rollback" or aborted:
                self._undo(self._txn_undo)
                for vs in self._views.values():  # TEMP tables built in the transaction are gone
                    vs.temp_version = -1
                for t, fp in self._txn_fps.items():
                    if t in self._trackers:
                        self._trackers[t].fingerprint = fp
            self._in_txn = False
            self._txn_undo = []
            self._txn_fps = {}
        return cur

    def _undo(self, undo: list) -> None:
        for vs, batch in reversed(undo):
            vs.view.apply({t: [(r, -k) for r, k in rows] for t, rows in batch.items()})
            vs.version += 1
        undo.clear()

    # -- change capture -----------------------------------------------------------------
    def _capture(self, tables: list[str], undo: list) -> int:
        changes: dict[str, list[tuple[tuple, int]]] = {}
        for t in tables:
            deleted, inserted = self._trackers[t].capture(self._conn)
            if deleted or inserted:
                changes[t] = [(r, -1) for r in deleted] + [(r, 1) for r in inserted]
        if not changes:
            return 0
        for vs in self._views.values():
            batch = {t: changes[t] for t in vs.tables if t in changes}
            if not batch:
                continue
            if vs.materialized:
                change = vs.view.diff(batch)
                undo.append((vs, batch))
                vs.version += 1
                self._write_change(vs, change)
            else:
                vs.view.apply(batch)
                undo.append((vs, batch))
                vs.version += 1
        return sum(len(c) for c in changes.values())

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
            if st.or_replace:
                self._drop_view(name)
            else:
                raise SQLError(f"incremental view {name!r} already exists")
        if self._object_exists(name):
            raise SQLError(f"cannot create incremental view {name!r}: a table or view of that name exists")
        schema = self._schema_for(st)
        view = compile_view(st.select_sql, schema, dialect=self.dialect)
        self._conn.execute("BEGIN TRANSACTION")
        new_trackers: list[str] = []
        try:
            vs = self._install(st, view, schema, new_trackers)
            self._conn.execute(f"INSERT INTO {duck.SCHEMA}.views VALUES (?, ?, ?)",
                               [name, "materialized" if st.materialized else "incremental",
                                st.definition(self.dialect)])
            self._conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(Exception):
                self._conn.execute("ROLLBACK")
            for t in new_trackers:
                self._trackers.pop(t, None)
            self._views.pop(name, None)
            raise
        self._views[name] = vs

    def _install(self, st: CreateIncrementalView, view: View, schema: dict, new_trackers: list) -> _ViewState:
        """Track the base tables, bulk-load the view, describe (and create) its table."""
        tables = [t for t in view.tables]
        batch: dict[str, list] = {}
        for t in tables:
            tr = self._trackers.get(t)
            if tr is None:
                tr = duck.Tracker(t, list(schema[t]))
                rows = tr.start(self._conn)
                self._trackers[t] = tr
                new_trackers.append(t)
            else:
                rows = self._conn.execute(f"SELECT {', '.join(quote(c) for c in tr.columns)} FROM {tr.shadow}").fetchall()
            batch[t] = [(r, 1) for r in rows]
        view.apply(batch)
        desc = self._conn.execute(f"DESCRIBE {st.select_sql}").fetchall()
        types = [r[1] for r in desc]
        columns = dedupe_names([r[0] for r in desc])
        if st.columns:
            if len(st.columns) != len(types):
                raise SQLError(f"view {st.name!r} names {len(st.columns)} columns but its query has {len(types)}")
            columns = list(st.columns)
        if len(types) != len(view.columns):
            raise IVMError(f"internal: DuckDB sees {len(types)} columns, the engine {len(view.columns)}")
        vs = _ViewState(st, view, tables, columns, types)
        if st.materialized:
            cols = ", ".join(f"{quote(c)} {t}" for c, t in zip(columns, types))
            self._conn.execute(f"CREATE OR REPLACE TABLE main.{quote(st.name)} ({cols})")
            self._bulk_insert(f"main.{quote(st.name)}", types, _expand(view.rows()))
        return vs

    def _drop_views(self, st: DropView) -> Cursor:
        ours = [n for n in st.names if n in self._views]
        if not ours:
            return self._passthrough(Passthrough(st.text, "DROP", st.names, st.names, "VIEW"), None)
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
                self._conn.execute(f"DROP TABLE IF EXISTS main.{quote(name)}")
            self._conn.execute(f"DROP TABLE IF EXISTS temp.{quote(name)}")
            self._conn.execute(f"DELETE FROM {duck.SCHEMA}.views WHERE name = ?", [name])
            still = {t for v in self._views.values() if v is not vs for t in v.tables}
            for t in vs.tables:
                if t not in still and t in self._trackers:
                    self._trackers[t].stop(self._conn)
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        del self._views[name]
        for t in vs.tables:
            if t not in still:
                self._trackers.pop(t, None)

    def _object_exists(self, name: str) -> bool:
        n = self._conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'main' AND lower(table_name) = ?",
            [name]).fetchone()[0]
        return n > 0

    def _load_catalog(self) -> None:
        duck.ensure_catalog(self._conn)
        rows = self._conn.execute(f"SELECT name, kind, definition FROM {duck.SCHEMA}.views ORDER BY name").fetchall()
        for name, kind, definition in rows:
            st = classify(definition, self.dialect)
            if not isinstance(st, CreateIncrementalView):
                raise IVMError(f"catalog entry for view {name!r} is not a CREATE INCREMENTAL VIEW: {definition!r}")
            schema = self._schema_for(st)
            view = compile_view(st.select_sql, schema, dialect=self.dialect)
            self._conn.execute("BEGIN TRANSACTION")
            try:
                vs = self._install(st, view, schema, [])
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._views[name] = vs

    # -- serving and writing view rows --------------------------------------------------
    def _refresh_temp(self, names: list[str]) -> None:
        for n in names:
            vs = self._views.get(n)
            if vs is None or vs.materialized or vs.temp_version == vs.version:
                continue
            cols = ", ".join(f"{quote(c)} {t}" for c, t in zip(vs.columns, vs.types))
            self._conn.execute(f"CREATE OR REPLACE TEMP TABLE {quote(n)} ({cols})")
            self._bulk_insert(f"temp.{quote(n)}", vs.types, _expand(vs.view.rows()))
            vs.temp_version = vs.version

    def _bulk_insert(self, target: str, types: list[str], rows: list[tuple], chunk: int = 200_000) -> None:
        """Insert rows with one statement per chunk: one list parameter per column, UNNESTed."""
        if not rows:
            return
        sel = ", ".join(f"unnest(${i + 1}::{t}[])" for i, t in enumerate(types))
        for start in range(0, len(rows), chunk):
            part = rows[start:start + chunk]
            self._conn.execute(f"INSERT INTO {target} SELECT {sel}", [list(c) for c in zip(*part)])

    def _write_change(self, vs: _ViewState, change: list[tuple[tuple, int]]) -> None:
        """Apply a view change to its materialized table (inside the current transaction)."""
        table = f"main.{quote(vs.name)}"
        dels = [(r, -k) for r, k in change if k < 0]
        ins = _expand((r, k) for r, k in change if k > 0)
        if dels:
            tmp_cols = ", ".join(f"{quote(c)} {t}" for c, t in zip(vs.columns, vs.types))
            self._conn.execute(f"CREATE OR REPLACE TEMP TABLE _ivm_mdel ({tmp_cols}, _ivm_id BIGINT, _ivm_k BIGINT)")
            self._bulk_insert("temp._ivm_mdel", vs.types + ["BIGINT", "BIGINT"],
                              [r + (i, k) for i, (r, k) in enumerate(dels)])
            on = " AND ".join(f"m.{quote(c)} IS NOT DISTINCT FROM d.{quote(c)}" for c in vs.columns)
            self._conn.execute(
                f"DELETE FROM {table} WHERE rowid IN (SELECT rid FROM ("
                f"SELECT m.rowid AS rid, d._ivm_k AS k, "
                f"row_number() OVER (PARTITION BY d._ivm_id ORDER BY m.rowid) AS rn "
                f"FROM {table} m JOIN temp._ivm_mdel d ON {on}) WHERE rn <= k)")
            self._conn.execute("DROP TABLE temp._ivm_mdel")
        if ins:
            self._bulk_insert(table, vs.types, ins)


def _expand(pairs) -> list[tuple]:
    out: list[tuple] = []
    for row, k in pairs:
        if k == 1:
            out.append(row)
        else:
            out.extend([row] * k)
    return out
