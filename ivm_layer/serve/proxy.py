"""``ivm serve postgresql://…``: a proxy in front of PostgreSQL that serves incremental views.

- **Statements are forwarded per client.** Each wire client gets its own connection to the
  PostgreSQL behind (its own transactions, settings, temp tables); statements, parameters
  and results pass through as bytes (libpq's extended protocol, chunked rows, COPY in and
  out), PostgreSQL's errors keep their SQLSTATE and position.
- **Views are maintained by one session** (:class:`~ivm_layer.session.postgres.session.PostgresSession`,
  logical replication) and served by the engine: ``count(*)``, ``SELECT * FROM v [LIMIT n]``
  straight from it, other reads of a view through the session's TEMP table kept in step by the
  view's changes. An applier thread applies what the replication streams bring, each apply a
  commit under the views' gate; a client's read after its own committed write first waits
  for the stream to bring that write (``sync()``).
- **The catalog** is PostgreSQL's own. The server keeps a plain view ``ivm_<session>.<v>``
  (schema ``ivm_serve`` by default) with each served view's definition and puts that schema at
  the end of every client's ``search_path``, so ``\\dv``, ``\\d v``, tab completion and
  SQLAlchemy reflection show the served views with their columns and definition, and a
  statement inside a transaction block that reads a view is evaluated by PostgreSQL over the
  block's own uncommitted writes (read-your-writes inside the block; outside blocks the engine
  answers). A client that bypasses the server reads the same view, recomputed.
- SUBSCRIBE's progress is the commit LSN of the last transaction in each batch.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import weakref

import ivm_layer

from ..session.duckdb import reads
from .gate import Gate
from .subscribe import Hub

log = logging.getLogger("ivm_layer.serve")


class ProxyBackend:
    kind = "postgres"

    def __init__(self, url: str, *, session: str = "serve", state_dir: str | None = None,
                 set_replica_identity: bool = False, lock_timeout: float = 60.0, spool_rows: int = 100_000,
                 log_rows: int = 100_000, max_backlog: int = 100_000, apply_interval: float = 0.002):
        from ..io.postgres import conninfo as pgconn

        self.target = pgconn.normalize(url)
        self.session = ivm_layer.connect(url, session=session, state_dir=state_dir,
                                         set_replica_identity=set_replica_identity)
        self.url = self.session.url
        self.lock = threading.RLock()              # the session is not thread-safe
        self.gate = Gate()
        self.hub = Hub(log_rows)
        self.lock_timeout = lock_timeout
        self.spool_rows = spool_rows
        self.max_backlog = max_backlog
        self.apply_interval = apply_interval
        with self.lock:
            ver = self.session.connection.execute("SHOW server_version").fetchone()[0]
        self.engine = f"PostgreSQL {ver}"
        self.names = reads.ViewNames()
        self.views_version = 0
        self._view_ids: dict = {}
        self.schema = f"ivm_{session}".lower()
        self._shown: dict[str, str] = {}          # view -> definition kept in self.schema
        self._pending: list = []
        self.clients: weakref.WeakSet = weakref.WeakSet()
        self.users: set[str] = set()
        self.on_commit = None
        self.closed = False
        self.write_epoch = 0
        self.synced_epoch = 0
        self._epoch_lock = threading.Lock()
        self._refresh_views()
        self._stop = threading.Event()
        self._applier = threading.Thread(target=self._apply_loop, name="ivm-serve-applier", daemon=True)
        self._applier.start()

    def describe(self) -> str:
        return f"proxy for {self.url}"

    # -- views -----------------------------------------------------------------------------------
    @property
    def views(self) -> dict:
        return self.session.states

    def _refresh_views(self) -> None:
        ids = {n: id(vs) for n, vs in self.views.items()}
        if ids != self._view_ids:
            for name, ident in self._view_ids.items():
                if ids.get(name) != ident:
                    self.hub.forget(name)
            self._view_ids = ids
            self.names.set(self.views)
            self.views_version += 1
            self._show_views()

    def _show_views(self) -> None:
        """Keep ``<schema>.<view>`` = the view's definition for every served view (the
        catalog's view of them); views that are gone are dropped."""
        from ..io.postgres.replication import quote_ident

        want = {n: catalog_sql(vs) for n, vs in self.views.items() if not vs.materialized}
        if want == self._shown:
            return
        sch = quote_ident(self.schema)
        try:
            with self.session.connection.transaction():
                c = self.session.connection
                c.execute(f"CREATE SCHEMA IF NOT EXISTS {sch}")
                for name in [n for n in self._shown if n not in want]:
                    c.execute(f"DROP VIEW IF EXISTS {sch}.{quote_ident(name)}")
                for name, sql in want.items():
                    if self._shown.get(name) != sql:
                        c.execute(f"DROP VIEW IF EXISTS {sch}.{quote_ident(name)}")
                        c.execute(f"CREATE VIEW {sch}.{quote_ident(name)} AS {sql}")
                c.execute(f"COMMENT ON SCHEMA {sch} IS 'ivm serve: the incremental views it serves, as plain "
                          "views for catalogs'")
            self._shown = want
        except Exception as e:  # noqa: BLE001 - the views are served all the same
            log.warning("cannot show the served views in schema %s: %s", self.schema, e)

    def input_types(self, vs) -> dict[str, str]:
        """``{input: PostgreSQL type}`` of a parameterized view (typed when it was compiled)."""
        return dict(vs.input_types)

    def progress(self, view: str | None = None) -> int:
        """The LSN the views have applied (of ``view``, or the least over all views)."""
        if view is not None and view in self.views:
            return self.views[view].applied_lsn
        lsns = [vs.applied_lsn for vs in self.views.values() if vs.error is None]
        return min(lsns) if lsns else 0

    def watch(self, view: str, vs) -> None:
        """Log ``view``'s changes for SUBSCRIBE; each batch is published after the apply with
        the LSN it brought the view to."""
        self.hub.watch(self.session, view, lambda: self.progress(view), vs,
                       sink=lambda change, view=view: self._pending.append((view, change)))

    # -- applying the change streams -----------------------------------------------------------
    def _apply_loop(self) -> None:
        while not self._stop.is_set():
            try:
                n = self.apply()
            except Exception as e:  # noqa: BLE001 - a stopped view reports its error on reads
                log.warning("applying the change streams failed: %s", e)
                n = 0
            if not n:
                self._stop.wait(self.apply_interval)

    def apply(self, sync: bool = False) -> int:
        """Apply what the streams brought (``sync``: everything committed so far), as one commit."""
        t0 = time.perf_counter()
        self.gate.acquire_exclusive(self.lock_timeout)
        try:
            with self.lock:
                if sync:
                    self.session.sync()
                    n = 1
                else:
                    n = self.session.poll()
                self._publish()
        finally:
            self.gate.release_exclusive()
        if n and self.on_commit is not None:
            self.on_commit(time.perf_counter() - t0)
        return n

    def _publish(self) -> None:
        """Publish the changes the last session call brought, one batch per view (the
        batches a call applied are merged: they end at the same LSN)."""
        pending, self._pending = self._pending, []
        merged: dict[str, list] = {}
        for view, change in pending:
            merged.setdefault(view, []).extend(change)
        for view, change in merged.items():
            self.hub.publish(view, self.progress(view), change)

    def wrote(self) -> None:
        """A client committed a write through this server."""
        with self._epoch_lock:
            self.write_epoch += 1

    def catch_up(self) -> None:
        """Before a read of the views: if a client committed a write through this server since
        the views last caught up, wait for the stream to bring it (every client sees every
        committed write; writes made around the server arrive with the stream's lag)."""
        target = self.write_epoch
        if self.synced_epoch >= target:
            return
        self.apply(sync=True)
        with self._epoch_lock:
            self.synced_epoch = max(self.synced_epoch, target)

    @contextlib.contextmanager
    def commit_section(self):
        """Exclusive use of the session and the views (incremental-view DDL, reads through the
        session's TEMP tables)."""
        self.gate.acquire_exclusive(self.lock_timeout)
        try:
            with self.lock:
                try:
                    yield self.session
                finally:
                    self._publish()
                    self._refresh_views()
        finally:
            self.gate.release_exclusive()

    def view_infos(self) -> list:
        with self.gate.shared(self.lock_timeout), self.lock:
            return self.session.info()

    # -- clients ---------------------------------------------------------------------------------
    def client(self, user: str, database: str, pid: int):
        from .proxyclient import ProxyClient

        self.users.add(user)
        c = ProxyClient(self, user, database, pid)
        self.clients.add(c)
        return c

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._stop.set()
        self._applier.join(10)
        with contextlib.suppress(Exception):
            self.gate.acquire_exclusive(self.lock_timeout)
        try:
            with self.lock:
                self.session.close()
        finally:
            if self.gate.held_exclusive():
                self.gate.release_exclusive()


def catalog_sql(vs) -> str:
    """The plain view that shows served view ``vs`` in the catalog: its definition, or for a
    parameterized view every input/output pair, the inputs as columns named after them (so
    PostgreSQL parses and describes ``SELECT … FROM v WHERE acc = $1``)."""
    if not vs.input_types:
        return vs.stmt.select_sql
    from ..io.postgres.replication import quote_ident

    names = {h: h[len("__param_"):] for h in vs.hidden if h.startswith("__param_")}
    names.update({hidden: name for name, _, hidden in vs.ranges})
    cols = [quote_ident(c) for c in vs.columns]
    inputs = [f"{quote_ident(h)} AS {quote_ident(names[h])}" for h in vs.hidden if h in names]
    alias = ", ".join(quote_ident(c) for c in list(vs.columns) + list(vs.hidden))
    return f"SELECT {', '.join(cols + inputs)} FROM ({vs.described}) AS q({alias})"
