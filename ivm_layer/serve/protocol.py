"""The query protocols of one connection, after authentication: simple and extended query,
COPY in and out, errors and transaction status.

:class:`Protocol` runs on the connection's worker thread: it takes frontend messages from the
connection's inbox (a blocking queue the event loop fills), hands statements to the backend
client (:mod:`.duckclient`, :mod:`.proxyclient`) and writes backend messages to the
:class:`~.outbox.Outbox`. Extended-protocol state — named and unnamed statements and portals,
the discard-until-Sync after an error — follows the protocol chapter of the PostgreSQL
manual; ``ReadyForQuery`` carries the client's transaction status (``I``/``T``/``E``).

Rows are encoded as they are produced; a result that holds the views' gate is spilled to a
spool when a writer waits or when its portal is suspended half-read (``Execute`` with a row
limit), so neither a writer nor the client's other statements wait on a slow reader.
"""

from __future__ import annotations

import logging
import queue

from ..session.router import split
from . import codec, pgtypes
from . import commands as cmd
from . import messages as m
from .outbox import ClientGone, Outbox
from .results import RawParams, Result
from .sending import Portal, Sending, row_encoder
from .sqlstate import ServeError, wire_error

log = logging.getLogger("ivm_layer.serve")


class Disconnected(Exception):
    """The client's socket closed (or the server is shutting down)."""


class Violation:
    """A protocol error found while reading: the worker reports it and the connection ends."""

    def __init__(self, error: Exception):
        self.error = error


class Protocol(Sending):
    def __init__(self, client, outbox: Outbox, inbox: queue.Queue, settings, metrics=None,
                 schedule=None, max_copy_bytes: int = 1 << 30, spool_rows: int = 100_000):
        self.client = client
        self.out = outbox
        self.inbox = inbox
        self.settings = settings
        self.metrics = metrics
        self.schedule = schedule          # (seconds, fn) -> cancel handle: statement timeouts
        self.statements: dict[str, object] = {}
        self.portals: dict[str, Portal] = {}
        self.skipping = False
        self.max_copy_bytes = max_copy_bytes
        self.spool_rows = spool_rows
        self._result: Result | None = None
        self._timer = None
        self.busy = False                 # a statement is running or its answer is being sent
        outbox.on_wait = self._on_wait

    # -- the loop --------------------------------------------------------------------------------
    def run(self) -> None:
        """Serve messages until Terminate or the client goes away."""
        try:
            while True:
                msg = self._next()
                if isinstance(msg, m.Terminate):
                    return
                if isinstance(msg, Violation):
                    w = wire_error(msg.error)
                    self.out.send(codec.error_response(w.sqlstate, w.message, severity="FATAL"))
                    self.out.flush()
                    return
                self.handle(msg)
        except (Disconnected, ClientGone):
            return
        finally:
            self.busy = False
            for p in self.portals.values():
                if p.result is not None:
                    p.result.close()
            self.portals.clear()

    def _next(self):
        if self.inbox.empty():
            self.busy = False
        msg = self.inbox.get()
        self.busy = True
        if msg is None:
            raise Disconnected()
        return msg

    def handle(self, msg) -> None:
        if isinstance(msg, m.Query):
            self.skipping = False
            self.simple(msg.sql)
            return
        if isinstance(msg, m.Sync):
            self.skipping = False
            self._end_extended()
            self.ready()
            return
        if isinstance(msg, m.Flush):
            self.out.flush()
            return
        if isinstance(msg, (m.CopyData, m.CopyDone, m.CopyFail)):
            return      # the rest of a COPY that failed: ignored, as PostgreSQL does
        if self.skipping:
            return
        try:
            if isinstance(msg, m.Parse):
                self.parse(msg)
            elif isinstance(msg, m.Bind):
                self.bind(msg)
            elif isinstance(msg, m.Describe):
                self.describe(msg)
            elif isinstance(msg, m.Execute):
                self.execute(msg)
            elif isinstance(msg, m.Close):
                self.close(msg)
            elif isinstance(msg, m.FunctionCall):
                raise ServeError("0A000", "the fast-path function call protocol is not supported")
            elif isinstance(msg, m.PasswordData):
                raise ServeError("08P01", "unexpected password message")
            else:
                raise ServeError("08P01", f"unexpected message {type(msg).__name__}")
        except (Disconnected, ClientGone):
            raise
        except Exception as e:
            self.error(e, getattr(msg, "sql", None))
            self.skipping = True
            if _fatal(e):
                self.out.flush()
                raise Disconnected() from e

    def ready(self) -> None:
        self.out.send(codec.ready_for_query(self.client.status))
        self.out.flush()

    def error(self, e: BaseException, statement: str | None = None) -> None:
        w = wire_error(e, statement)
        if _fatal(e):
            w = type(w)(w.sqlstate, w.message, w.detail, w.hint, None, "FATAL")
        if self.client.cancel_reason and w.sqlstate == "57014":
            w = type(w)("57014", f"canceling statement due to {self.client.cancel_reason}")
        if w.sqlstate == "XX000":
            log.warning("internal error on a client statement: %s", w.message, exc_info=e)
        self.client.fail()
        if self.metrics is not None:
            self.metrics.error(w.sqlstate)
        self.out.send(codec.error_response(w.sqlstate, w.message, w.detail, w.hint, w.position, w.severity))

    # -- simple query ------------------------------------------------------------------------------
    def simple(self, sql: str) -> None:
        texts = split(sql)
        if not texts:
            self.out.send(codec.empty_query())
            self.ready()
            return
        for text in texts:
            try:
                p = self.client.prepare(text)
                self._deallocate(p)
                res = self._run(p, None)
                self.send_result(res, None, 0, describe=True)
            except (Disconnected, ClientGone):
                raise
            except Exception as e:
                self.error(e, text)
                if _fatal(e):
                    self.out.flush()
                    raise Disconnected() from e
                break
        self.ready()

    # -- extended query ----------------------------------------------------------------------------
    def parse(self, msg: m.Parse) -> None:
        if msg.name and msg.name in self.statements:
            raise ServeError("42P05", f'prepared statement "{msg.name}" already exists')
        texts = split(msg.sql)
        if len(texts) > 1:
            raise ServeError("42601", "cannot insert multiple commands into a prepared statement")
        self.statements[msg.name] = self.client.prepare(texts[0] if texts else "", msg.param_oids)
        self.out.send(codec.parse_complete())

    def bind(self, msg: m.Bind) -> None:
        p = self.statements.get(msg.statement)
        if p is None:
            raise ServeError("26000", f'prepared statement "{msg.statement}" does not exist')
        if len(msg.params) != p.nparams:
            raise ServeError("08P01", f"bind message supplies {len(msg.params)} parameters, but prepared "
                                      f"statement \"{msg.statement}\" requires {p.nparams}")
        if getattr(self.client, "raw_params", False):
            fmts = tuple(msg.param_format(i) for i in range(len(msg.params)))
            oids = tuple(list(p.declared) + [0] * (p.nparams - len(p.declared)))
            values = RawParams(msg.params, fmts, oids)
        else:
            oids = self._param_oids(p, msg)
            values = [_decode(oids[i], msg.param_format(i), raw, p.declared, i)
                      for i, raw in enumerate(msg.params)]
        old = self.portals.get(msg.portal)
        if old is not None:
            if msg.portal:
                raise ServeError("42P03", f'cursor "{msg.portal}" already exists')
            if old.result is not None:
                old.result.close()
        self.portals[msg.portal] = Portal(p, values, msg)
        self.out.send(codec.bind_complete())

    def _param_oids(self, p, msg: m.Bind) -> list[int]:
        """The type of each parameter: as the client declared it, else as the statement implies
        (:mod:`.paramtypes`; text parameters a client left untyped are read in that type, as
        PostgreSQL resolves ``unknown``), else text."""
        declared = list(p.declared) + [0] * (p.nparams - len(p.declared))
        if not all(declared):
            inferred = self.client.param_types(p)
            declared = [d or inferred[i] for i, d in enumerate(declared)]
        return declared

    def describe(self, msg: m.Describe) -> None:
        if msg.kind == "S":
            p = self.statements.get(msg.name)
            if p is None:
                raise ServeError("26000", f'prepared statement "{msg.name}" does not exist')
            oids, cols = self.client.describe(p)
            self.out.send(codec.parameter_description(oids))
            if cols is None:
                self.out.send(codec.no_data())
            else:
                self.out.send(codec.row_description([(c.name, c.oid, c.typlen, c.typmod, 0) for c in cols]))
            return
        portal = self._portal(msg.name)
        if portal.result is None:
            self._deallocate(portal.stmt)
            portal.result = self._run(portal.stmt, portal.params, portal.formats)
        res = portal.result
        if res.columns is None or res.copy_in is not None or res.copy_out is not None:
            self.out.send(codec.no_data())
            return
        portal.encoder = row_encoder(res, portal.formats.result_format)
        self.out.send(codec.row_description(portal.encoder.fields(res.columns)))

    def execute(self, msg: m.Execute) -> None:
        portal = self._portal(msg.portal)
        if portal.done:
            self.out.send(codec.command_complete(portal.result.complete_tag(0) if portal.result else "SELECT 0"))
            return
        if portal.result is None:
            self._deallocate(portal.stmt)
            portal.result = self._run(portal.stmt, portal.params, portal.formats)
        res = portal.result
        if portal.encoder is None and res.columns is not None:
            portal.encoder = row_encoder(res, portal.formats.result_format)
        finished = self.send_result(res, portal.encoder, msg.max_rows, describe=False, portal=portal)
        if finished:
            portal.done = True

    def close(self, msg: m.Close) -> None:
        if msg.kind == "S":
            self.statements.pop(msg.name, None)
        else:
            portal = self.portals.pop(msg.name, None)
            if portal is not None and portal.result is not None:
                portal.result.close()
        self.out.send(codec.close_complete())

    def _portal(self, name: str) -> Portal:
        portal = self.portals.get(name)
        if portal is None:
            raise ServeError("34000", f'portal "{name}" does not exist')
        return portal

    def _end_extended(self) -> None:
        """Sync: the unnamed portal ends; outside a transaction block every portal does."""
        for name in list(self.portals):
            if name == "" or self.client.status == "I":
                portal = self.portals.pop(name)
                if portal.result is not None:
                    portal.result.close()

    def _deallocate(self, p) -> None:
        c = getattr(p, "command", None)
        if isinstance(c, cmd.Deallocate):
            if c.name is None:
                self.statements.clear()
            elif c.name in self.statements:
                del self.statements[c.name]
            else:
                raise ServeError("26000", f'prepared statement "{c.name}" does not exist')
        elif isinstance(c, cmd.Noop) and c.tag == "DISCARD ALL":
            self.statements.clear()
            self.settings.reset("all")

    # -- running and sending -----------------------------------------------------------------------

    # -- COPY ---------------------------------------------------------------------------------------



def _fatal(e: BaseException) -> bool:
    """A subscriber dropped for falling behind: the error ends its connection."""
    return getattr(e, "sqlstate", None) == "53400"


def _decode(oid: int, fmt: int, raw: bytes | None, declared, i: int):
    """A Bind parameter's value; an untyped text value that does not read as the type its use
    implies stays text (DuckDB then coerces it or reports the mistake)."""
    if fmt == 0 and not (i < len(declared) and declared[i]):
        try:
            return pgtypes.decode_param(oid, 0, raw)
        except pgtypes.ParamError:
            return raw.decode("utf-8", "replace") if raw is not None else None
    return pgtypes.decode_param(oid, fmt, raw)
