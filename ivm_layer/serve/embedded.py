"""``ivm serve FILE.duckdb``: one DuckDB session, many wire clients.

How clients share the one session (the session is not thread-safe; DuckDB connections are):

- **Each client has its own DuckDB connection** (``session.connection.cursor()``: the same
  database, its own transaction). Statements that touch no tracked table run there, in
  parallel with every other client (DuckDB releases the GIL while it executes).
- **Views are behind one gate** (:class:`.gate.Gate`). Engine reads — ``count(*)``,
  parameterized lookups, scans, and DuckDB queries that read a served view through its lazy
  Arrow reader registered on the client's own connection — hold it *shared*, so they run
  concurrently. Everything that changes the views holds it *exclusive*, one at a time, each
  such section a new commit (the SUBSCRIBE progress): autocommit writes to tracked tables
  and DDL run through the session itself; a client's ``BEGIN … COMMIT`` that wrote tracked
  tables is captured on its own connection and applied at COMMIT
  (:class:`~ivm_layer.session.duckdb.clients.ClientTransaction`).
- Every client therefore sees every committed write in the views; inside its own block a
  client sees its own writes too (the block's changes are applied for the length of each of
  its reads, O(changes), under the exclusive gate) and nobody else does. Tables follow
  DuckDB's snapshot isolation; views show the latest commit (read committed).
- **A slow reader never holds a writer up.** A reader that still has rows to send when a
  writer arrives copies the rest of its result into a spool (memory, then a temporary file:
  :class:`.results.Spool`) and releases the gate; the writer waits only for that copy.
- **Writers of tracked tables take turns.** DuckDB's optimistic concurrency does not catch
  every write–write conflict between two open transactions (a ``DELETE`` or ``UPDATE`` of a row
  another transaction updated or deleted since its snapshot commits, returning the old row),
  and a captured change must be exactly what the table lost and gained. So a client's block
  holds the *write slot* from its first write to a tracked table until COMMIT/ROLLBACK, and
  autocommit writes to tracked tables take it for their statement; a block whose snapshot is
  older than the last commit that changed tracked tables fails its first such write with
  40001 (retry the transaction), as PostgreSQL's REPEATABLE READ does. Other writers wait
  for the slot up to ``--lock-timeout`` (then 55P03). Writes to other tables and all reads
  do not take it.
- MATERIALIZED views are real tables: reading them is a plain DuckDB read.

The per-connection statement logic is :mod:`.duckclient`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import weakref

import ivm_layer

from ..session.duckdb.views import is_parameterized
from ..identifiers import ascii_lower, resolve
from . import catalog as cat
from .gate import Gate
from .settings import version_string
from .subscribe import Hub

log = logging.getLogger("ivm_layer.serve")


class EmbeddedBackend:
    """The server's state over one DuckDB session."""

    kind = "duckdb"

    def __init__(self, database: str | None, *, lock_timeout: float = 60.0, spool_rows: int = 100_000,
                 log_rows: int = 100_000, max_backlog: int = 100_000):
        import duckdb

        url = database
        if url is not None and "://" not in url and not url.endswith((".duckdb", ".db")) and url != ":memory:":
            url = "duckdb:///" + url
        self.session = ivm_layer.connect(url)
        self.path = database or ":memory:"
        self.engine = f"DuckDB {duckdb.__version__}"
        self.gate = Gate()
        self.hub = Hub(log_rows)
        self.lock_timeout = lock_timeout
        self.spool_rows = spool_rows
        self.max_backlog = max_backlog
        self.catalog_db = cat.CatalogDB(version_string(self.engine))
        self.schema_version = 0
        self.views_version = 0
        self._view_ids = self._view_identity()
        self.epoch = self._next_epoch()
        self.counter = 0
        # one writer of tracked tables at a time (see "Writers" in the module docstring)
        self.write_slot = threading.Lock()
        self.write_commits = 0
        self._input_types: dict[int, dict[str, str]] = {}
        self.param_cache: dict = {}       # (statement text, declared OIDs) -> parameter OIDs
        self._meta = self.session.connection.cursor()
        self._meta_lock = threading.Lock()
        self.users: set[str] = set()
        self.clients: weakref.WeakSet = weakref.WeakSet()
        self.closed = False
        self.on_commit = None            # metrics: seconds each commit held the views

    def describe(self) -> str:
        return f"DuckDB file {self.path}"

    # -- progress and commits ------------------------------------------------------------------
    def _next_epoch(self) -> int:
        conn = self.session.connection
        conn.execute("CREATE TABLE IF NOT EXISTS ivm.serve_epoch (epoch BIGINT)")
        epoch = int(conn.execute("SELECT coalesce(max(epoch), 0) + 1 FROM ivm.serve_epoch").fetchone()[0])
        conn.execute("DELETE FROM ivm.serve_epoch")
        conn.execute("INSERT INTO ivm.serve_epoch VALUES (?)", [epoch])
        return epoch

    def progress(self, view: str | None = None) -> int:
        """The current commit position (monotone across restarts; the same for every view)."""
        return (self.epoch << 32) | self.counter

    def watch(self, view: str, vs) -> None:
        """Log ``view``'s changes for SUBSCRIBE (published at each commit with its position)."""
        self.hub.watch(self.session, view, self.progress, vs)

    def take_write_slot(self) -> None:
        if not self.write_slot.acquire(timeout=self.lock_timeout):
            from .sqlstate import ServeError

            raise ServeError("55P03", f"could not obtain the write slot within {self.lock_timeout:g} s: another "
                                      "client's open transaction block has written tables that incremental views read",
                             hint="COMMIT or ROLLBACK that block; --lock-timeout sets the wait")

    @contextlib.contextmanager
    def commit_section(self, timeout: float | None = None):
        """Exclusive access to the session and the views: one commit."""
        t0 = time.perf_counter()
        self.gate.acquire_exclusive(self.lock_timeout if timeout is None else timeout)
        try:
            self.counter += 1
            yield
        finally:
            self.gate.release_exclusive()
            if self.on_commit is not None:
                self.on_commit(time.perf_counter() - t0)

    # -- views -------------------------------------------------------------------------------
    @property
    def views(self) -> dict:
        return self.session.states

    def _view_identity(self) -> dict[str, int]:
        return {n: id(vs) for n, vs in self.views.items()}

    def schema_changed(self) -> None:
        """A statement may have changed tables or types: the catalog and the parameter types
        are read again."""
        self.schema_version += 1
        self.param_cache.clear()
        self._input_types.clear()

    def after_ddl(self) -> None:
        """A statement may have changed the schema or the views (call with the gate exclusive)."""
        self.schema_changed()
        now = self._view_identity()
        if now != self._view_ids:
            for name, ident in self._view_ids.items():
                if now.get(name) != ident:
                    self.hub.forget(name)
            self._view_ids = now
            self.views_version += 1

    def input_types(self, vs) -> dict[str, str]:
        """``{input: DuckDB type}`` of a parameterized view (typed once per view object)."""
        key = id(vs.view)
        got = self._input_types.get(key)
        if got is None:
            from ..sql.params import HIDDEN, extract_params

            sql = extract_params(vs.sql or vs.stmt.select_sql, "duckdb")[0]
            with self._meta_lock:
                desc = self._meta.execute(f"DESCRIBE {sql}").fetchall()
            got = {ascii_lower(r[0][len(HIDDEN):]): r[1] for r in desc if r[0].startswith(HIDDEN)}
            self._input_types[key] = got
        return got

    def columns_of(self, table: str) -> dict[str, str] | None:
        """``{column: type}`` of a table, view or incremental view (for parameter typing)."""
        vs = self.views.get(resolve(table, self.views))
        if vs is not None and vs.error is None:
            out = dict(zip(vs.columns, vs.types))
            if is_parameterized(vs.view):
                out.update(self.input_types(vs))
            return out
        from ..io.duckdb.capture import table_columns

        with self._meta_lock:
            try:
                return table_columns(self._meta, table)
            except Exception:  # noqa: BLE001 - a name DuckDB cannot look up: untyped
                return None

    def view_infos(self) -> list:
        """``session.info()`` under the gate (metrics, SHOW INCREMENTAL VIEWS)."""
        with self.gate.shared(self.lock_timeout):
            return self.session.info()

    # -- the emulated catalog ----------------------------------------------------------------
    def catalog_cursor(self, database: str, settings: list[tuple[str, str]]):
        """A cursor of the emulated catalog, refreshed if the schema changed since."""
        db = self.catalog_db
        with db.lock:
            if db.version != self.schema_version:
                version = self.schema_version
                db.refresh(version, database, self._relations(), self._schemas(),
                           self.users or {"ivm"}, settings)
            return db.cursor()

    def _schemas(self) -> list[tuple[int, str]]:
        with self._meta_lock:
            rows = self._meta.execute(
                "SELECT oid, schema_name FROM duckdb_schemas() WHERE database_name = current_database() "
                "AND NOT internal AND schema_name <> 'main'").fetchall()
        return [(int(o), n) for o, n in rows]

    def _relations(self) -> list[cat.Relation]:
        from ..session.duckdb.views import MARKER

        with self._meta_lock:
            m = self._meta
            tables = m.execute("SELECT table_oid, schema_name, table_name, comment FROM duckdb_tables() "
                               "WHERE database_name = current_database() AND NOT temporary").fetchall()
            views = m.execute("SELECT view_oid, schema_name, view_name, sql FROM duckdb_views() "
                              "WHERE database_name = current_database() AND NOT internal AND NOT temporary").fetchall()
            cols = m.execute("SELECT table_oid, column_name, data_type, NOT is_nullable, column_default "
                             "FROM duckdb_columns() WHERE database_name = current_database() AND NOT internal "
                             "ORDER BY table_oid, column_index").fetchall()
            keys = m.execute("SELECT table_oid, constraint_type, constraint_name, constraint_column_names "
                             "FROM duckdb_constraints() WHERE database_name = current_database() "
                             "AND constraint_type IN ('PRIMARY KEY', 'UNIQUE')").fetchall()
        by_oid: dict[int, list] = {}
        for oid, name, typ, notnull, default in cols:
            by_oid.setdefault(oid, []).append((name, typ, bool(notnull), default))
        key_by: dict[int, list] = {}
        for oid, ctype, cname, cnames in keys:
            key_by.setdefault(oid, []).append(("p" if ctype == "PRIMARY KEY" else "u", cname, list(cnames)))
        served = self.views
        out = []
        for oid, schema, name, comment in tables:
            schema = "public" if schema == "main" else schema
            vs = served.get(ascii_lower(name)) if schema == "public" else None
            kind = "m" if vs is not None and vs.materialized and comment == MARKER else "r"
            out.append(cat.Relation(name, kind, schema, by_oid.get(oid, []),
                                    vs.stmt.definition("duckdb") if kind == "m" else None, int(oid),
                                    comment if kind == "r" else "incremental materialized view",
                                    key_by.get(oid, [])))
        for oid, schema, name, sql in views:
            out.append(cat.Relation(name, "v", "public" if schema == "main" else schema,
                                    by_oid.get(oid, []), sql, int(oid)))
        for name, vs in sorted(served.items()):
            if vs.materialized or vs.error is not None:
                continue
            out.append(cat.Relation(name, "v", "public", [(c, t, False, None) for c, t in zip(vs.columns, vs.types)],
                                    vs.stmt.definition("duckdb"), None, "incremental view"))
        return out

    # -- clients -------------------------------------------------------------------------------
    def client(self, user: str, database: str, pid: int):
        from .duckclient import DuckClient

        self.users.add(user)
        client = DuckClient(self, user, database, pid)
        self.clients.add(client)
        return client

    def close(self) -> None:
        """Make the session's state durable and close it (waits for the running commit)."""
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(Exception):
            self.gate.acquire_exclusive(self.lock_timeout)
        try:
            with contextlib.suppress(Exception):
                self._meta.close()
            with contextlib.suppress(Exception):
                self.session.connection.execute("CHECKPOINT")
            self.session.close()
        finally:
            if self.gate.held_exclusive():
                self.gate.release_exclusive()
