"""One wire client of an embedded DuckDB server: statements in, :class:`.results.Result` out.

:meth:`DuckClient.prepare` reads a statement once (route, engine shape, catalog or not, the
command it is); :meth:`DuckClient.execute` runs it on the path :mod:`.embedded` describes:
the client's own DuckDB connection, the engine under the shared gate, or the session under
the exclusive gate. Runs on one worker thread at a time per client (the fast path of
:meth:`DuckClient.fast` on the event loop, never at the same time).
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field

from ..session.duckdb import reads
from ..session.duckdb.views import is_parameterized
from ..session.lookups import plan_lookups
from ..session.router import Route, route
from . import catalog as cat
from . import commands as cmd
from ..session import pointreads as fastpath
from . import pgcompat, pgtypes, results
from .copyio import CopyFormat, copy_in_rows, copy_options
from .paramtypes import infer
from .results import Column, Result
from ..errors import UpdateError
from .settings import version_string
from .sqlstate import ServeError, cancelled, in_failed_block
from .viewcmds import explain_view, show_views, subscription

_PARAM = re.compile(r"\$(\d+)")
_RETURNING = re.compile(r"\bRETURNING\b(.*)$", re.IGNORECASE | re.DOTALL)
_WRITES = ("insert", "update", "delete", "truncate", "copy_from", "merge")
_ROWS_TYPES = {"SELECT", "EXPLAIN", "PRAGMA", "CALL", "EXECUTE", "RELATION", "LOGICAL_PLAN"}
_FETCH = 2048


@dataclass
class Prepared:
    """A statement read once (Parse, or a simple query's text)."""

    sql: str
    text: str
    route: Route
    nparams: int
    declared: list[int]
    command: object | None = None
    shape: fastpath.Shape | None = None
    catalog: bool = False
    copy: CopyFormat | None = None
    rows: bool = False
    inferred: list[int] | None = None
    cache: dict = field(default_factory=dict)


def _tag(r: Route) -> str:
    kind = r.kind
    if kind == "read":
        return "SELECT"
    fixed = {"insert": "INSERT 0", "update": "UPDATE", "delete": "DELETE", "merge": "MERGE",
             "copy_from": "COPY", "truncate": "TRUNCATE TABLE", "create_view": "CREATE VIEW"}
    if kind in fixed:
        return fixed[kind]
    words = re.findall(r"[A-Za-z]+", sqlscan_head(r.text))[:3]
    if not words:
        return "OK"
    w = [x.upper() for x in words]
    if w[0] in ("CREATE", "DROP", "ALTER") and len(w) > 1:
        if w[1] in ("OR", "TEMP", "TEMPORARY", "UNIQUE") and len(w) > 2:
            return f"{w[0]} {w[2] if w[1] != 'UNIQUE' else 'INDEX'}"
        return f"{w[0]} {w[1]}"
    return w[0]


def sqlscan_head(text: str) -> str:
    return re.sub(r"(?:\s+|--[^\n]*|/\*.*?\*/)+", " ", text[:200], flags=re.DOTALL).strip()


def _description_columns(desc) -> list[Column]:
    return [Column.of(pgcompat.column_name(d[0]), str(d[1])) for d in desc]


class DuckClient:
    """The server side of one connection, over :class:`.embedded.EmbeddedBackend`."""

    def __init__(self, backend, user: str, database: str, pid: int):
        self.backend = backend
        self.user = user
        self.database = database
        self.pid = pid
        self.conn = backend.session.connection.cursor()
        for stmt in pgcompat.client_macros(version_string(backend.engine), user, database, pid):
            self.conn.execute(stmt)
        self.status = "I"
        self.txn = None
        self.wrote_in_block = False
        self.slot_held = False
        self.first_in_block = False
        self.untracked_writes = False
        self.block_snapshot: int | None = None   # backend.write_commits when the block's snapshot began
        self._temp: dict[str, int] = {}
        self._temp_version = -1
        self.cancel_reason: str | None = None
        self.settings = None          # set by the connection (per-client SET/SHOW)

    # -- preparing -----------------------------------------------------------------------------
    def prepare(self, sql: str, declared: list[int] | tuple = ()) -> Prepared:
        text = pgcompat.rewrite(sql, self.user, self.database, self.pid)
        nparams = max((int(n) for n in _PARAM.findall(text)), default=0)
        command = cmd.parse(text)
        r = route(text)
        p = Prepared(sql, text, r, nparams, list(declared), command)
        if command is not None or r.kind in ("empty", "begin", "commit", "rollback"):
            return p
        if cat.is_catalog_query(text):
            p.catalog = True
            p.text = cat.rewrite(pgcompat.rewrite(sql, self.user, self.database, self.pid, macros=False))
            p.rows = True
            return p
        p.copy = copy_options(text, r)
        if p.copy is not None and p.copy.direction == "out":
            p.text = p.copy.query
            p.route = r = route(p.text)
        p.shape = fastpath.shape(p.text) if r.kind == "read" and p.copy is None else None
        p.rows = self._returns_rows(p)
        return p

    def _returns_rows(self, p: Prepared) -> bool:
        kind = p.route.kind
        if kind == "read":
            return True
        if kind in ("insert", "update", "delete"):
            return "returning" in p.route.flags
        if kind in ("other", "unknown_write"):
            try:
                st = self.conn.extract_statements(p.text)
            except Exception:  # noqa: BLE001 - DuckDB reports the syntax error when it runs
                return False
            return bool(st) and st[-1].type.name in _ROWS_TYPES
        return False

    def param_types(self, p: Prepared) -> list[int]:
        """The parameters' OIDs (declared, else inferred; cached per statement text)."""
        if p.inferred is None:
            key = (p.text, tuple(p.declared))
            cache = self.backend.param_cache
            got = cache.get(key)
            if got is None:
                got = infer(p.text, p.declared, self.backend.columns_of, p.nparams) if p.nparams else []
                if len(cache) > 1024:
                    cache.clear()
                cache[key] = got
            p.inferred = got
        return p.inferred

    def describe(self, p: Prepared) -> tuple[list[int], list[Column] | None]:
        """Parameter OIDs and result columns without running the statement."""
        self.param_types(p)
        if p.command is not None:
            return p.inferred, self._command_columns(p)
        if not p.rows:
            return p.inferred, None
        if p.shape is not None and (cols := self._shape_columns(p.shape)) is not None:
            return p.inferred, cols
        nulls = _PARAM.sub("NULL", p.text)
        if p.catalog:
            cur = self.backend.catalog_cursor(self.database, self.settings.reported())
            desc = cur.execute(f"DESCRIBE {nulls}").fetchall()
            return p.inferred, [Column.of(r[0], r[1]) for r in desc]
        if p.route.kind in ("insert", "update", "delete"):
            m = _RETURNING.search(p.text)
            target = p.route.target
            if m and target:
                nulls = f"SELECT {_PARAM.sub('NULL', m.group(1))} FROM main.\"{target}\""
        try:
            with self._reading(p.text, p.route, empty=True):
                desc = self.conn.execute(f"DESCRIBE {nulls}").fetchall()
        except Exception:  # noqa: BLE001 - the statement itself will report it at Execute
            return p.inferred, None
        return p.inferred, [Column.of(r[0], r[1]) for r in desc]

    def _shape_columns(self, sh: fastpath.Shape) -> list[Column] | None:
        vs = self.backend.views.get(sh.view)
        if vs is None or vs.error is not None or vs.materialized:
            return None
        if sh.count is not None:
            return [Column.of(sh.count, "BIGINT")]
        cols = list(zip(vs.columns, vs.types))
        if sh.select is not None:
            lower = {c.lower(): (c, t) for c, t in cols}
            if any(s not in lower for s in sh.select):
                return None
            cols = [lower[s] for s in sh.select]
        return [Column.of(c, t) for c, t in cols]

    def _command_columns(self, p: Prepared) -> list[Column] | None:
        c = p.command
        if isinstance(c, cmd.ShowCmd):
            return [Column.of(c.name, "VARCHAR")] if c.name != "all" else \
                [Column.of("name", "VARCHAR"), Column.of("setting", "VARCHAR"), Column.of("description", "VARCHAR")]
        if isinstance(c, cmd.ShowViews):
            return show_views(self.backend.session, []).columns
        if isinstance(c, cmd.ExplainView):
            return [Column.of("QUERY PLAN", "VARCHAR")]
        if isinstance(c, cmd.Subscribe):
            vs = self.backend.views.get(c.view)
            if vs is None or vs.error is not None:
                return None
            return [Column.of("ivm_progress", "BIGINT"), Column.of("ivm_diff", "BIGINT")] + \
                [Column.of(n, t) for n, t in zip(vs.columns, vs.types)]
        return None

    # -- the fast path (event loop) --------------------------------------------------------------
    def fast(self, p: Prepared, params) -> Result | None:
        """An engine read answered at once, when the gate is free: else ``None``."""
        if p.shape is None or self.status != "I":
            return None
        vs = self.backend.views.get(p.shape.view)
        if vs is None or vs.error is not None or vs.materialized:
            return None
        if not self.backend.gate.try_shared():
            return None
        try:
            res = self._engine(p, vs, params)
            if res is None:
                return None
            res.rows = list(res.rows) if p.shape.count is not None or p.shape.limit is not None or \
                is_parameterized(vs.view) else res.rows
            return res
        finally:
            if res is None or isinstance(res.rows, list):
                self.backend.gate.release_shared()
            else:       # a long scan: the worker thread streams it, holding the gate
                res.release = self.backend.gate.release_shared
                res.holds_gate = True

    def _engine_in_block(self, p: Prepared, vs, params) -> Result | None:
        """An engine read inside a transaction block: with the block's own changes applied
        (under the exclusive gate) when it has written tracked tables; the rows are taken
        before the changes are taken back."""
        b = self.backend
        if self.txn is None or not self.txn.wrote_tracked:
            with b.gate.shared(b.lock_timeout):
                res = self._engine(p, vs, params)
                if res is not None:
                    res.rows = iter(list(res.rows))
                return res
        with b.gate.exclusive(b.lock_timeout), self.txn.overlay():
            res = self._engine(p, vs, params)
            if res is not None:
                res.rows = iter(list(res.rows))
            return res

    def _engine(self, p: Prepared, vs, params) -> Result | None:
        sh = p.shape
        columns = self._shape_columns(sh)
        if columns is None:
            return None
        inputs = None
        if is_parameterized(vs.view):
            wanted = list(vs.view.params)
            got = {c: fastpath.bind(v, params) for c, v in sh.conds}
            if sorted(got) != sorted(wanted) or len(got) != len(sh.conds):
                return None
            types = self.backend.input_types(vs)
            inputs = {k: pgtypes.coerce(v, types.get(k)) for k, v in got.items()}
        elif sh.conds:
            return None
        project = None
        if sh.select is not None and sh.count is None:
            lower = [c.lower() for c in vs.columns]
            project = [lower.index(s) for s in sh.select]
        return Result("SELECT", columns, fastpath.rows(vs.view, sh, params, inputs, project))

    # -- executing -----------------------------------------------------------------------------
    def execute(self, p: Prepared, params, bind=None) -> Result:
        """Run a prepared statement (``bind``: the Bind message, for its result formats; the
        rows are encoded by the caller, so it is not needed here)."""
        self.cancel_reason = None
        kind = p.route.kind
        if self.status == "E" and kind not in ("commit", "rollback") and \
                not (isinstance(p.command, cmd.Savepoint) and p.command.verb == "ROLLBACK TO"):
            raise in_failed_block()
        self.first_in_block = False
        if self.status == "T" and self.block_snapshot is None and kind not in ("begin", "commit", "rollback"):
            self.block_snapshot = self.backend.write_commits
            self.first_in_block = True       # DuckDB takes the block's snapshot when this one runs
        if p.command is not None:
            return self._command(p, params)
        if kind == "empty":
            return Result("EMPTY")
        if kind in ("begin", "commit", "rollback"):
            return self._transaction(kind)
        if p.catalog:
            cur = self.backend.catalog_cursor(self.database, self.settings.reported())
            cur.execute(p.text, params)
            return Result("SELECT", _description_columns(cur.description), iter(cur.fetchall()))
        if p.shape is not None and self.status == "T":
            vs = self.backend.views.get(p.shape.view)
            if vs is not None and vs.error is None and not vs.materialized:
                res = self._engine_in_block(p, vs, params)
                if res is not None:
                    return res
        elif p.shape is not None:
            vs = self.backend.views.get(p.shape.view)
            if vs is not None and vs.error is None and not vs.materialized:
                self.backend.gate.acquire_shared(self.backend.lock_timeout)
                res = None
                try:
                    res = self._engine(p, vs, params)
                finally:
                    if res is None:
                        self.backend.gate.release_shared()
                if res is not None:
                    res.release = self.backend.gate.release_shared
                    res.holds_gate = True
                    return res
        if p.copy is not None and p.copy.direction == "in":
            return self._copy_in(p)
        return self._statement(p, params)

    def _statement(self, p: Prepared, params) -> Result:
        b = self.backend
        r = p.route
        kind = r.kind
        caps = b.session.catalog.captures
        views = b.views
        mentions = b.session.catalog.names.counts(p.text) if views else {}
        tracked_write = kind in _WRITES and r.target in caps
        if kind == "read" and any(views[n].error is None and is_parameterized(views[n].view) for n in mentions):
            return self.lookup_read(p, params)
        if kind in ("create_view", "drop", "alter", "create_table", "unknown_write") and \
                (kind == "create_view" or kind == "unknown_write" and caps or
                 self._touches_views(p, mentions, caps)):
            return self._through_session(p, params, ddl=True)
        if tracked_write:
            if self.txn is not None:
                self._hold_slot()
                self.wrote_in_block = True
                with self._reading(p.text, r, mentions=mentions):
                    cur = self.txn.write(r, params)
                return self._cursor_result(p, cur)
            return self._through_session(p, params, ddl=False)
        if self.txn is not None and kind not in ("read", "other"):
            self.untracked_writes = True
        if kind in ("create_table", "alter", "drop", "other", "unknown_write"):
            res = self._run(p, params, mentions)
            b.schema_changed()
            return res
        return self._run(p, params, mentions)

    @property
    def block_wrote(self) -> bool:
        return self.wrote_in_block or self.untracked_writes

    def _touches_views(self, p: Prepared, mentions: dict, caps: dict) -> bool:
        """DDL the session must see: it names an incremental view or a tracked table."""
        r = p.route
        if r.kind == "drop":
            return bool(mentions) or any(re.search(rf'\b"?{re.escape(t)}"?\b', p.text, re.IGNORECASE) for t in caps)
        if r.kind == "create_table":
            return r.target in caps or r.target in self.backend.views
        return r.target in caps or r.target in self.backend.views

    def _through_session(self, p: Prepared, params, ddl: bool) -> Result:
        if self.txn is not None:
            raise ServeError("0A000", "this statement changes incremental views or the tables they read; inside a "
                                      "transaction block ivm serve runs it only when it is a plain INSERT, UPDATE, "
                                      "DELETE, TRUNCATE or COPY: COMMIT or ROLLBACK first")
        b = self.backend
        b.take_write_slot()
        try:
            if ddl:
                self._no_open_writers()
            with b.commit_section():
                try:
                    cur = b.session.execute(p.text, params)
                finally:
                    b.write_commits += 1
                    if ddl:
                        b.after_ddl()
        finally:
            b.write_slot.release()
        return self._cursor_result(p, cur)

    def _no_open_writers(self) -> None:
        """Incremental-view DDL sees the tables as committed: a block that has written (to any
        table) and not committed would be missed by a view created now."""
        for other in list(self.backend.clients):
            if other is not self and other.status != "I" and other.block_wrote:
                raise ServeError("55006", "another client has an open transaction block with uncommitted writes; "
                                          "CREATE/DROP INCREMENTAL VIEW waits for no such block: retry after it ends")

    def _hold_slot(self) -> None:
        """The first write to a tracked table in this block: take the write slot; a snapshot
        older than the last commit to tracked tables cannot be written from (40001)."""
        if self.slot_held:
            return
        b = self.backend
        b.take_write_slot()
        self.slot_held = True
        if self.first_in_block:
            self.block_snapshot = b.write_commits
        if self.block_snapshot is not None and self.block_snapshot != b.write_commits:
            raise ServeError("40001", "could not serialize access due to concurrent update: tables that incremental "
                                      "views read changed after this transaction began",
                             hint="ROLLBACK and run the transaction again")

    def _drop_slot(self) -> None:
        if self.slot_held:
            self.slot_held = False
            self.backend.write_slot.release()

    def _cursor_result(self, p: Prepared, cur) -> Result:
        tag = _tag(p.route)
        if p.rows and cur.description is not None and not _is_count(cur.description):
            return Result(tag, _description_columns(cur.description), iter(cur.fetchall()))
        n = cur.rowcount if cur.rowcount is not None and cur.rowcount >= 0 else 0
        if tag in ("INSERT 0", "UPDATE", "DELETE", "MERGE", "COPY"):
            return Result(tag, None, None, rowcount=n)
        return Result(tag, count_in_tag=False)

    def _run(self, p: Prepared, params, mentions: dict) -> Result:
        """The statement on the client's own connection, streaming its rows."""
        reading = self._reading(p.text, p.route, mentions=mentions)
        reading.__enter__()
        ok = False
        try:
            self.conn.execute(p.text, params)
            desc = self.conn.description
            tag = _tag(p.route)
            if not p.rows or desc is None:
                n = _count_of(self.conn, desc)
                self._abort_result()
                reading.__exit__(None, None, None)
                ok = True
                if tag in ("INSERT 0", "UPDATE", "DELETE", "MERGE", "COPY"):
                    return Result(tag, None, None, rowcount=n)
                return Result(tag, count_in_tag=False)
            res = Result(tag, _description_columns(desc), self._fetch())
            res.copy_out = p.copy.out if p.copy is not None else None
            if p.copy is not None:
                res.tag = "COPY"

            def release() -> None:
                self._abort_result()
                reading.__exit__(None, None, None)
            res.release = release
            res.holds_gate = bool(mentions)
            ok = True
            return res
        finally:
            if not ok:
                self._abort_result()
                reading.__exit__(None, None, None)

    def _fetch(self):
        conn = self.conn
        while True:
            if self.cancel_reason:
                raise cancelled(self.cancel_reason)
            chunk = conn.fetchmany(_FETCH)
            if not chunk:
                return
            yield from chunk

    def _abort_result(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.abort()

    # -- reads of served views on the client's connection ---------------------------------------
    @contextlib.contextmanager
    def _reading(self, text: str, r: Route, mentions: dict | None = None, empty: bool = False,
                 gate: bool = False):
        """Served views the statement names, readable on this client's connection for the
        statement: the gate shared (exclusive with this block's changes applied when it has
        written tracked tables), each view's rows registered as a lazy Arrow reader (an Arrow
        table when the statement may scan it twice), parameterized views as lookups."""
        b = self.backend
        self._sync_temp_views()
        if mentions is None:
            mentions = b.session.catalog.names.counts(text) if b.views else {}
        served = {n: b.views[n] for n in mentions if b.views[n].error is None and not b.views[n].materialized}
        if not served and not gate:
            yield text
            return
        overlay = self.txn is not None and self.txn.wrote_tracked and not empty
        if overlay:
            b.gate.acquire_exclusive(b.lock_timeout)
        else:
            b.gate.acquire_shared(b.lock_timeout)
        registered: list[str] = []
        try:
            with self.txn.overlay() if overlay else contextlib.nullcontext():
                for n, vs in served.items():
                    if is_parameterized(vs.view):
                        continue
                    self._ensure_temp_view(n, vs)
                    if empty:
                        reader = reads.reader((), vs.schema)
                    else:
                        reader = reads.view_reader(vs.view, vs.schema)
                        if not reads.scanned_once(text, r.kind, r.flags, mentions[n]):
                            reader = reader.read_all()
                    self.conn.register(reads.rows_name(n), reader)
                    registered.append(reads.rows_name(n))
                yield text
        finally:
            for name in registered:
                with contextlib.suppress(Exception):
                    self.conn.unregister(name)
            if overlay:
                b.gate.release_exclusive()
            else:
                b.gate.release_shared()

    def _sync_temp_views(self) -> None:
        b = self.backend
        if self._temp_version == b.views_version:
            return
        for n, ident in list(self._temp.items()):
            vs = b.views.get(n)
            if vs is None or id(vs) != ident:
                with contextlib.suppress(Exception):
                    self.conn.execute(f'DROP VIEW IF EXISTS temp."{n}"')
                del self._temp[n]
        self._temp_version = b.views_version

    def _ensure_temp_view(self, n: str, vs) -> None:
        if self._temp.get(n) == id(vs):
            return
        name = reads.rows_name(n)
        self.conn.register(name, reads.reader((), vs.schema))
        try:
            self.conn.execute(reads.view_sql(vs.name, vs.columns, vs.types))
        finally:
            self.conn.unregister(name)
        self._temp[n] = id(vs)

    def lookup_read(self, p: Prepared, params) -> Result:
        """A DuckDB query of parameterized views (``… FROM v WHERE input = …`` with more SQL
        around it): each occurrence becomes the rows of a lookup, as in the session."""
        b = self.backend
        pviews = {n: b.views[n] for n in b.session.catalog.names.counts(p.text)
                  if b.views[n].error is None and is_parameterized(b.views[n].view)}
        sql, lookups, values = plan_lookups(p.text, pviews, params)
        inputs = self.conn.execute("SELECT " + ", ".join(v.sql(dialect="duckdb") for v in values),
                                   params).fetchone() if values else ()
        r = route(sql)
        names = []
        with self._reading(sql, r, gate=True):
            try:
                for lk in lookups:
                    vs = pviews[lk.view]
                    types = b.input_types(vs)
                    given = {q: pgtypes.coerce(inputs[i], types.get(q)) for q, i in lk.inputs.items()}
                    self.conn.register(lk.name, reads.reader(vs.view.lookup(**given), vs.schema))
                    names.append(lk.name)
                self.conn.execute(sql)
                desc = self.conn.description
                rows = self.conn.fetchall()
            finally:
                for n in names:
                    with contextlib.suppress(Exception):
                        self.conn.unregister(n)
        return Result(_tag(p.route), _description_columns(desc), iter(rows))

    # -- transactions -------------------------------------------------------------------------
    def _transaction(self, kind: str) -> Result:
        b = self.backend
        if kind == "begin":
            if self.status != "I":
                return Result("BEGIN", count_in_tag=False, notice=("25001", "there is already a transaction in progress"))
            self.conn.execute("BEGIN TRANSACTION")
            self.txn = b.session.client_transaction(self.conn)
            self.status = "T"
            self.wrote_in_block = self.untracked_writes = False
            self.block_snapshot = None
            return Result("BEGIN", count_in_tag=False)
        if self.status == "I":
            return Result("COMMIT" if kind == "commit" else "ROLLBACK", count_in_tag=False,
                          notice=("25P01", "there is no transaction in progress"))
        txn, self.txn = self.txn, None
        failed = self.status == "E"
        self.status = "I"
        wrote = self.wrote_in_block or self.untracked_writes
        self.wrote_in_block = self.untracked_writes = False
        self.block_snapshot = None
        try:
            if kind == "rollback" or failed:
                txn.rollback()
                return Result("ROLLBACK", count_in_tag=False)
            if txn.wrote_tracked:
                with b.commit_section():
                    b.write_commits += 1
                    try:
                        txn.commit()
                    except UpdateError as e:     # the safety net: never a half-applied change
                        raise ServeError("40001", f"could not serialize access due to concurrent update: {e}",
                                         hint="run the transaction again") from None
            else:
                self.conn.commit()
        finally:
            self._drop_slot()
        if wrote:
            b.schema_changed()
        return Result("COMMIT", count_in_tag=False)

    def fail(self) -> None:
        """An error inside a transaction block: the block is aborted until ROLLBACK."""
        if self.status == "T":
            self.status = "E"

    # -- COPY FROM STDIN ----------------------------------------------------------------------------
    def _copy_in(self, p: Prepared) -> Result:
        b = self.backend
        r = p.route
        target = r.target
        columns = p.copy.columns
        if columns is None:
            meta = b.columns_of(target) if target else None
            if meta is None:
                raise ServeError("42P01", f'relation "{target}" does not exist')
            columns = list(meta)

        def finish(data) -> Result:
            rows = copy_in_rows(data, p.copy, len(columns))
            return self._load_rows(p, target, columns, rows)
        return Result("COPY", copy_in=results.CopyIn(len(columns), finish, p.copy.fmt))

    def _load_rows(self, p: Prepared, target: str, columns: list[str], rows: list) -> Result:
        import pyarrow as pa

        table = pa.table({f"c{i}": pa.array([r[i] for r in rows], type=pa.string())
                          for i in range(len(columns))})
        cols = ", ".join(f'"{c}"' for c in columns)
        sel = ", ".join(f"c{i}" for i in range(len(columns)))
        schema = "" if "." in (p.route.text[p.route.target_span[0]:p.route.target_span[1]]
                               if p.route.target_span else "") else "main."
        name = p.route.text[p.route.target_span[0]:p.route.target_span[1]] if p.route.target_span else target
        sql = f"INSERT INTO {schema}{name} ({cols}) SELECT {sel} FROM _ivm_copy_in"
        b = self.backend
        tracked = target in b.session.catalog.captures
        ins = route(sql)
        if tracked and self.txn is None:
            b.take_write_slot()
            try:
                with b.commit_section():
                    b.write_commits += 1
                    conn = b.session.connection
                    conn.register("_ivm_copy_in", table)
                    try:
                        cur = b.session.execute(sql)
                    finally:
                        conn.unregister("_ivm_copy_in")
            finally:
                b.write_slot.release()
        else:
            self.conn.register("_ivm_copy_in", table)
            try:
                if tracked:
                    self._hold_slot()
                    self.wrote_in_block = True
                    cur = self.txn.write(ins, None)
                else:
                    self.conn.execute(sql)
                    cur = None
            finally:
                self.conn.unregister("_ivm_copy_in")
        return Result("COPY", None, None, rowcount=len(rows) if cur is None else max(cur.rowcount, len(rows)))

    # -- commands -----------------------------------------------------------------------------
    def _command(self, p: Prepared, params) -> Result:
        c = p.command
        s = self.settings
        if isinstance(c, cmd.SetCmd):
            if s.knows(c.name) or c.name.lower() in ("timezone", "client_encoding", "datestyle"):
                if c.value is None:
                    s.reset(c.name)
                else:
                    s.set(c.name, c.value)
                return Result("SET", count_in_tag=False)
            self.conn.execute(p.text)
            return Result("SET", count_in_tag=False)
        if isinstance(c, cmd.ShowCmd):
            if c.name == "all":
                return Result("SHOW", self._command_columns(p), iter(s.all()))
            if c.name == "ivm_progress":
                return Result("SHOW", [Column.of("ivm_progress", "BIGINT")], iter([(self.backend.progress(),)]))
            if s.knows(c.name):
                return Result("SHOW", [Column.of(c.name, "VARCHAR")], iter([(s.get(c.name),)]))
            try:
                value = self.conn.execute("SELECT current_setting(?)::VARCHAR", [c.name]).fetchone()[0]
            except Exception:  # noqa: BLE001
                raise ServeError("42704", f'unrecognized configuration parameter "{c.name}"') from None
            return Result("SHOW", [Column.of(c.name, "VARCHAR")], iter([(value,)]))
        if isinstance(c, cmd.ResetCmd):
            s.reset(c.name)
            return Result("RESET", count_in_tag=False)
        if isinstance(c, cmd.ShowViews):
            return show_views(self.backend.session, self.backend.hub.subscriber_backlog())
        if isinstance(c, cmd.ExplainView):
            return explain_view(self.backend.session, c.name)
        if isinstance(c, cmd.Subscribe):
            return subscription(self, c, params)
        if isinstance(c, cmd.Noop):
            return Result(c.tag, count_in_tag=False)
        if isinstance(c, cmd.Deallocate):
            return Result("DEALLOCATE" + (" ALL" if c.name is None else ""), count_in_tag=False)
        if isinstance(c, cmd.Savepoint):
            if self.status == "I":
                raise ServeError("25P01", f"{c.verb} can only be used in transaction blocks")
            if c.verb == "ROLLBACK TO":
                raise ServeError("0A000", "ROLLBACK TO SAVEPOINT is not supported by ivm serve (DuckDB has no "
                                          "savepoints): ROLLBACK the whole transaction")
            return Result(c.verb, count_in_tag=False)
        raise ServeError("0A000", f"unsupported command {type(c).__name__}")

    # -- lifecycle -------------------------------------------------------------------------------
    def cancel(self, reason: str = "user request") -> None:
        """From any thread: stop the running statement."""
        self.cancel_reason = reason
        with contextlib.suppress(Exception):
            self.conn.interrupt()

    def close(self) -> None:
        """The client went away: roll back its open block, release its connection."""
        if self.txn is not None:
            self.txn.rollback()
            self.txn = None
        self._drop_slot()
        self.status = "I"
        self.backend.clients.discard(self)
        with contextlib.suppress(Exception):
            self.conn.close()


def _is_count(desc) -> bool:
    return len(desc) == 1 and desc[0][0] == "Count"


def _count_of(conn, desc) -> int:
    if desc is not None and _is_count(desc):
        row = conn.fetchone()
        return int(row[0]) if row else 0
    return 0
