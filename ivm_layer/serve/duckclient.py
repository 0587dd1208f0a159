"""One wire client of an embedded DuckDB server: statements in, :class:`.results.Result` out.

:meth:`DuckClient.prepare` reads a statement once (route, engine shape, catalog or not, the
command it is); :meth:`DuckClient.execute` runs it on the path :mod:`.embedded` describes:
the client's own DuckDB connection, the engine under the shared gate, or the session under
the exclusive gate. Runs on the connection's worker thread (one statement at a time).
"""

from __future__ import annotations

import contextlib
import re

from ..session import pointreads as fastpath
from ..session.duckdb.views import is_parameterized
from ..session.router import route
from . import catalog as cat
from . import commands as cmd
from . import pgcompat
from .copyio import copy_options
from .duckcommands import Commands
from .duckreads import ViewReads
from .ducktxn import Transactions
from .paramtypes import infer
from .prepared import Prepared
from .results import Column, Result, command_tag, description_columns
from .settings import version_string
from .sqlstate import ServeError, cancelled, in_failed_block

_PARAM = re.compile(r"\$(\d+)")
_RETURNING = re.compile(r"\bRETURNING\b(.*)$", re.IGNORECASE | re.DOTALL)
_WRITES = ("insert", "update", "delete", "truncate", "copy_from", "merge")
_ROWS_TYPES = {"SELECT", "EXPLAIN", "PRAGMA", "CALL", "EXECUTE", "RELATION", "LOGICAL_PLAN"}
_FETCH = 2048


class DuckClient(Transactions, ViewReads, Commands):
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
            with contextlib.closing(self.backend.catalog_cursor(self.database, self.settings.reported())) as cur:
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
            with contextlib.closing(self.backend.catalog_cursor(self.database, self.settings.reported())) as cur:
                cur.execute(p.text, params)
                cols, rows = description_columns(cur.description), cur.fetchall()
            return Result("SELECT", cols, iter(rows))
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

    def _cursor_result(self, p: Prepared, cur) -> Result:
        tag = command_tag(p.route)
        if p.rows and cur.description is not None and not _is_count(cur.description):
            return Result(tag, description_columns(cur.description), iter(cur.fetchall()))
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
            tag = command_tag(p.route)
            if not p.rows or desc is None:
                n = _count_of(self.conn, desc)
                self._abort_result()
                reading.__exit__(None, None, None)
                ok = True
                if tag in ("INSERT 0", "UPDATE", "DELETE", "MERGE", "COPY"):
                    return Result(tag, None, None, rowcount=n)
                return Result(tag, count_in_tag=False)
            res = Result(tag, description_columns(desc), self._fetch())
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

    # -- transactions -------------------------------------------------------------------------

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
