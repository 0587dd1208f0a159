"""One wire client of a proxy server: its own PostgreSQL connection, the views from the engine.

Statements that name no incremental view pass through to the client's PostgreSQL connection
as bytes: parameters as the client bound them, results in the formats it asked for (libpq's
chunked-rows mode streams them, 1,000 rows a chunk). Statements that name a view are routed
as :mod:`.proxy` describes. Runs on the connection's worker thread.
"""

from __future__ import annotations

import contextlib
import logging
import re
import select

from psycopg import pq

from .. import __version__
from ..io.postgres.replication import quote_ident
from ..session import pointreads as fastpath
from ..session.router import route
from . import commands as cmd
from . import pgtypes, sqlscan
from .prepared import ProxyPrepared
from .proxycopy import ProxyCopy
from .results import Column, RawParams, Result
from .settings import IVM_VERSION
from .sqlstate import ServeError, in_failed_block
from .viewcmds import explain_view, show_views, subscription

_PARAM = re.compile(r"\$(\d+)")
_OWN_SETTINGS = {"ivm_progress": "BIGINT", IVM_VERSION: "VARCHAR"}   # SHOW answered here, not by PostgreSQL
_STATUS = {pq.TransactionStatus.IDLE: "I", pq.TransactionStatus.INTRANS: "T",
           pq.TransactionStatus.INERROR: "E", pq.TransactionStatus.ACTIVE: "T"}
_CHUNK = 1000
log = logging.getLogger("ivm_layer.serve")


def _error(res) -> ServeError:
    f = pq.DiagnosticField
    get = res.error_field

    def txt(code):
        v = get(code)
        return v.decode("utf-8", "replace") if v else None
    pos = txt(f.STATEMENT_POSITION)
    return ServeError(txt(f.SQLSTATE) or "XX000", txt(f.MESSAGE_PRIMARY) or "error from PostgreSQL",
                      txt(f.MESSAGE_DETAIL), txt(f.MESSAGE_HINT), int(pos) if pos else None)


def _to_pyformat(sql: str, params: list) -> tuple[str, list]:
    """``$n`` placeholders → psycopg's ``%s`` (literal ``%`` doubled) with the values in order."""
    out: list = []

    def code(piece: str) -> str:
        piece = piece.replace("%", "%%")

        def one(m):
            out.append(params[int(m.group(1)) - 1])
            return "%s"
        return _PARAM.sub(one, piece)
    return sqlscan.map_code(sql, code), out


class ProxyClient(ProxyCopy):
    raw_params = True

    def __init__(self, backend, user: str, database: str, pid: int):
        import psycopg

        self.backend = backend
        self.user = user
        self.database = database
        self.pid = pid
        self.conn = psycopg.connect(backend.target, autocommit=True)
        self.pg = self.conn.pgconn
        self.cancel_reason: str | None = None
        self.settings = None
        self._temp_version = -1

    @property
    def status(self) -> str:
        return _STATUS.get(self.pg.transaction_status, "I")

    def fail(self) -> None:
        pass           # PostgreSQL keeps the transaction status itself

    # -- preparing ---------------------------------------------------------------------------------
    def prepare(self, sql: str, declared=()) -> ProxyPrepared:
        nparams = max((int(n) for n in _PARAM.findall(sql)), default=0)
        r = route(sql, dialect="postgres")
        p = ProxyPrepared(sql, sql, r, nparams, list(declared), cmd.parse(sql))
        if p.command is None and r.kind == "read":
            p.shape = fastpath.shape(sql, "postgres")
        if re.match(r"\s*COPY\b", sql, re.IGNORECASE):
            p.copy = "in" if re.search(r"\bFROM\s+STDIN\b", sql, re.IGNORECASE) else \
                "out" if re.search(r"\bTO\s+STDOUT\b", sql, re.IGNORECASE) else None
        return p

    def param_types(self, p: ProxyPrepared) -> list[int]:
        if p.inferred is None:
            p.inferred = self.describe(p)[0]
        return p.inferred

    def describe(self, p: ProxyPrepared):
        """PostgreSQL's own answer to Parse + Describe (served views are TEMP views here)."""
        self._sync_temp_views()
        if p.command is not None:
            c = p.command
            if isinstance(c, cmd.Subscribe):
                vs = self.backend.views.get(c.view)
                cols = None if vs is None else [Column.of("ivm_progress", "BIGINT"), Column.of("ivm_diff", "BIGINT")] + \
                    [Column.of(n, t) for n, t in zip(vs.columns, vs.types)]
                return [pgtypes.TEXT] * p.nparams, cols
            if isinstance(c, cmd.ShowViews):
                return [], show_views(self.backend.session, {}).columns
            if isinstance(c, cmd.ExplainView):
                return [], [Column.of("QUERY PLAN", "VARCHAR")]
            if isinstance(c, cmd.ShowCmd) and c.name in _OWN_SETTINGS:
                return [], [Column.of(c.name, _OWN_SETTINGS[c.name])]
        text = p.text
        sh = p.shape
        vs = self.backend.views.get(sh.view) if sh is not None and sh.select is None and sh.count is None else None
        if vs is not None and vs.input_types:
            # SELECT * of a parameterized view: its outputs, not the input columns of its catalog view
            text = re.sub(r"^\s*SELECT\s+\*", lambda m: "SELECT " + ", ".join(quote_ident(c) for c in vs.columns),
                          text, count=1, flags=re.IGNORECASE)
        self.pg.send_prepare(b"", text.encode(), [int(o) for o in p.declared] or None)
        self._result()
        self._drain()
        self.pg.send_describe_prepared(b"")
        res = self._result()
        self._drain()
        oids = [res.param_type(i) for i in range(res.nparams)]
        cols = [Column(res.fname(i).decode(), res.ftype(i), res.fsize(i), res.fmod(i)) for i in range(res.nfields)]
        return oids, cols or None

    # -- executing ---------------------------------------------------------------------------------
    def execute(self, p: ProxyPrepared, params, bind=None) -> Result:
        self.cancel_reason = None
        self._sync_temp_views()
        kind = p.route.kind
        if self.status == "E" and kind not in ("commit", "rollback"):
            raise in_failed_block()
        if p.command is not None:
            res = self._command(p, params)
            if res is not None:
                return res
        b = self.backend
        mentions = b.names.find(sqlscan.code_only(p.text)) if b.views else []
        if kind == "create_view" or kind == "drop" and mentions:
            if self.status != "I":
                raise ServeError("0A000", "CREATE/DROP INCREMENTAL VIEW inside a transaction block is not supported: "
                                          "COMMIT or ROLLBACK first")
            with b.commit_section() as s:
                s.execute(p.text)
            return Result("CREATE VIEW" if kind == "create_view" else "DROP VIEW", count_in_tag=False)
        if mentions and self.status == "I" and kind == "read" and p.copy is None:
            return self._view_read(p, params, mentions)
        was_idle = self.status == "I"
        res = self._upstream(p, params, bind)
        if kind not in ("read", "other", "begin", "rollback") and (was_idle or kind == "commit"):
            b.wrote()
        return res

    def _view_read(self, p: ProxyPrepared, params, mentions: list[str]) -> Result:
        b = self.backend
        b.catch_up()
        values = self._values(p, params)
        sh = p.shape
        if sh is not None and not sh.conds and sh.view in b.views:
            vs = b.views[sh.view]
            if vs.error is None and not vs.input_types:     # a parameterized view needs its inputs
                cols = [Column.of(sh.count, "BIGINT")] if sh.count else None
                project = None
                if cols is None:
                    pairs = list(zip(vs.columns, vs.types))
                    if sh.select is not None:
                        lower = {c: (i, c, t) for i, (c, t) in enumerate(pairs)}  # keys: exact
                        if all(x in lower for x in sh.select):
                            project = [lower[x][0] for x in sh.select]
                            cols = [Column.of(lower[x][1], lower[x][2]) for x in sh.select]
                    else:
                        cols = [Column.of(c, t) for c, t in pairs]
                if cols is not None:
                    b.gate.acquire_shared(b.lock_timeout)
                    rows = fastpath.rows(vs.view, sh, values, None, project)
                    return Result("SELECT", cols, rows, release=b.gate.release_shared, holds_gate=True)
        if any(b.views[n].input_types for n in mentions if n in b.views):
            text, args = p.text, (values or None)   # $n as they are: the session's point reads know them
        else:
            text, args = _to_pyformat(p.text, values) if values else (p.text, None)
        with b.commit_section() as s:
            cur = s.execute(text, args)
        cols = [Column(d[0], d[1] if isinstance(d[1], int) else pgtypes.TEXT) for d in cur.description] \
            if cur.description else None
        if cols is None:
            return Result("SELECT", None, None, rowcount=max(cur.rowcount, 0))
        return Result("SELECT", cols, iter(cur.fetchall()))

    def _values(self, p: ProxyPrepared, params) -> list:
        if params is None:
            return []
        if not isinstance(params, RawParams):
            return list(params)
        out = []
        if any(params.formats) and p.inferred is None:
            self.param_types(p)           # binary values: their types are the described ones
        for i, raw in enumerate(params.values):
            oid = params.oids[i] if i < len(params.oids) and params.oids[i] else \
                (p.inferred[i] if p.inferred and i < len(p.inferred) else pgtypes.TEXT)
            out.append(pgtypes.decode_param(oid, params.formats[i] if i < len(params.formats) else 0, raw))
        return out

    def _upstream(self, p: ProxyPrepared, params, bind) -> Result:
        """Pass the statement through, streaming its rows in chunks."""
        pg = self.pg
        if p.copy == "in":
            return self._copy_in(p)
        if isinstance(params, RawParams):
            values = list(params.values)
            oids = [int(o) for o in params.oids] or None
            fmts = list(params.formats) or None
        else:
            values, oids, fmts = None, None, None
        rf = tuple(bind.result_formats) if bind is not None else ()
        result_format = 1 if rf and all(f == 1 for f in rf) else 0
        if p.copy == "out":
            return self._copy_out(p, values, oids, fmts)
        pg.send_query_params(p.text.encode(), values, oids, fmts, result_format)
        with contextlib.suppress(Exception):
            pg.set_chunked_rows_mode(_CHUNK)
        first = self._result()
        st = first.status
        if st in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.EMPTY_QUERY):
            self._drain()
            tag = (first.command_status or b"").decode()
            if st == pq.ExecStatus.EMPTY_QUERY:
                return Result("EMPTY")
            return Result(tag, count_in_tag=False)
        cols = [Column(first.fname(i).decode(), first.ftype(i), first.fsize(i), first.fmod(i))
                for i in range(first.nfields)]
        formats_out = [first.fformat(i) for i in range(first.nfields)]
        self._last_tag = ""
        return Result("SELECT", cols, self._rows(first), raw_formats=formats_out, release=self._abandon,
                      tag_source=lambda: self._last_tag)

    def _get(self):
        """``PQgetResult`` without blocking the process: libpq's blocking calls hold the GIL,
        so wait for the socket with select() (which releases it) until a result is ready."""
        pg = self.pg
        while True:
            pg.consume_input()
            if not pg.is_busy():
                return pg.get_result()
            select.select([pg.socket], [], [], 0.1)

    def _result(self):
        res = self._get()
        if res is None:
            raise ServeError("08006", "no result from PostgreSQL")
        if res.status in (pq.ExecStatus.FATAL_ERROR, pq.ExecStatus.NONFATAL_ERROR):
            self._drain()
            raise _error(res)
        return res

    def _rows(self, res):
        """Rows of a chunked result: wire values, then the final tag sets the count."""
        while True:
            n, m = res.ntuples, res.nfields
            for r in range(n):
                yield [res.get_value(r, c) for c in range(m)]
            if res.status == pq.ExecStatus.TUPLES_OK:
                self._last_tag = (res.command_status or b"").decode()
                break
            res = self._result()
        self._drain()

    def _drain(self) -> None:
        while self._get() is not None:
            pass

    def _abandon(self) -> None:
        """A result not read to the end (the client went, or it was spilled)."""
        if self.pg.is_busy() or self.pg.transaction_status == pq.TransactionStatus.ACTIVE:
            self._cancel_upstream()
            with contextlib.suppress(Exception):
                self._drain()

    # -- COPY ----------------------------------------------------------------------------------------

    # -- commands ------------------------------------------------------------------------------------
    def _command(self, p: ProxyPrepared, params):
        c = p.command
        b = self.backend
        if isinstance(c, cmd.ShowViews):
            return self._locked(lambda: show_views(b.session, b.hub.subscriber_backlog()))
        if isinstance(c, cmd.ExplainView):
            return self._locked(lambda: explain_view(b.session, c.name))
        if isinstance(c, cmd.Subscribe):
            b.catch_up()
            return subscription(self, c, self._values(p, params))
        if isinstance(c, cmd.ShowCmd) and c.name == "ivm_progress":
            b.catch_up()
            return Result("SHOW", [Column.of("ivm_progress", "BIGINT")], iter([(b.progress(),)]))
        if isinstance(c, cmd.ShowCmd) and c.name == IVM_VERSION:
            return Result("SHOW", [Column.of(IVM_VERSION, "VARCHAR")], iter([(__version__,)]))
        if isinstance(c, cmd.SetCmd) and self.settings is not None and c.value is not None \
                and c.name.lower() in ("application_name", "datestyle", "intervalstyle", "timezone",
                                       "client_encoding", "statement_timeout"):
            self.settings.set(c.name, c.value)
        return None            # everything else: PostgreSQL answers

    def _locked(self, fn):
        b = self.backend
        with b.gate.shared(b.lock_timeout), b.lock:
            return fn()

    # -- served views in the catalog ------------------------------------------------------------------
    def _sync_temp_views(self) -> None:
        """Once per connection: the served views' schema at the end of the search path."""
        if self._temp_version >= 0 or self.status != "I":
            return
        self._temp_version = 0
        b = self.backend
        try:
            path = self.conn.execute("SHOW search_path").fetchone()[0]
            if b.schema not in [x.strip().strip('"') for x in path.split(",")]:
                self.conn.execute("SELECT set_config('search_path', %s, false)", [f"{path}, {b.schema}"])
        except Exception as e:  # noqa: BLE001
            log.warning("cannot add schema %s to a client's search_path: %s", b.schema, e)

    # -- lifecycle ---------------------------------------------------------------------------------------
    def cancel(self, reason: str = "user request") -> None:
        self.cancel_reason = reason
        self._cancel_upstream()

    def _cancel_upstream(self) -> None:
        with contextlib.suppress(Exception):
            self.pg.get_cancel().cancel()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()
        self.backend.clients.discard(self)
