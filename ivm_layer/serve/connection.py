"""One client connection: TLS negotiation, startup, authentication, then the I/O of the query
protocol.

An asyncio task per connection does the socket I/O: it reads and parses what the client sends
(:class:`~.codec.FrontendParser`) into the inbox of the connection's worker thread, and writes
what the worker sends (:class:`~.outbox.Outbox`, back-pressured by the transport's buffer).
The worker runs :class:`~.protocol.Protocol` — the statements block in DuckDB or PostgreSQL,
never the event loop. A client that vanishes mid-result, mid-COPY or mid-transaction ends its
worker: the running statement is interrupted and an open block rolled back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import ssl
import threading

from . import codec
from . import messages as m
from .auth import ScramExchange
from .outbox import Outbox
from .protocol import Protocol, Violation
from .settings import Settings
from .sqlstate import ServeError, wire_error

log = logging.getLogger("ivm_layer.serve")
_INBOX_HIGH = 2000          # messages queued for the worker before reading pauses


class Connection:
    def __init__(self, server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, pid: int, secret: int):
        self.server = server
        self.reader = reader
        self.writer = writer
        self.pid = pid
        self.secret = secret
        self.parser = codec.FrontendParser(server.max_message)
        self.client = None
        self.user = None
        self.tls = False
        self.busy = False
        peer = writer.get_extra_info("peername")
        self.peer = peer[0] if isinstance(peer, tuple) else str(peer)

    # -- startup -----------------------------------------------------------------------------------
    async def _message(self):
        while True:
            msg = self.parser.next()
            if msg is not None:
                return msg
            data = await self.reader.read(65536)
            if not data:
                return None
            self.parser.feed(data)

    async def _fatal(self, e: Exception) -> None:
        w = wire_error(e)
        self.writer.write(codec.error_response(w.sqlstate, w.message, w.detail, w.hint, severity="FATAL"))
        with contextlib.suppress(Exception):
            await self.writer.drain()

    async def _startup(self) -> m.Startup | None:
        while True:
            msg = await self._message()
            if msg is None:
                return None
            if isinstance(msg, m.SSLRequest):
                ctx = self.server.ssl_context
                self.writer.write(codec.ssl_answer(ctx is not None and not self.tls))
                await self.writer.drain()
                if ctx is not None and not self.tls:
                    if self.parser.buffered:
                        raise ServeError("08P01", "received unencrypted data after SSL request")
                    await self.writer.start_tls(ctx)
                    self.tls = True
                continue
            if isinstance(msg, m.GSSENCRequest):
                self.writer.write(codec.ssl_answer(False))
                await self.writer.drain()
                continue
            if isinstance(msg, m.CancelRequest):
                self.server.cancel(msg.pid, msg.secret)
                return None
            return msg

    async def _authenticate(self, user: str) -> None:
        srv = self.server
        if srv.tls_required and not self.tls and not srv.is_loopback(self.peer):
            raise ServeError("28000", "this server requires SSL for connections from other hosts (sslmode=require)")
        if srv.auth_method == "trust":
            if not srv.is_loopback(self.peer):
                raise ServeError("28000", f'no authentication configured for host "{self.peer}": trust is for '
                                          "loopback clients only; start ivm serve with --auth scram-sha-256")
            self.writer.write(codec.auth_ok())
            return
        ex = ScramExchange(user, srv.users)
        self.writer.write(codec.auth_sasl(["SCRAM-SHA-256"]))
        await self.writer.drain()
        msg = await self._message()
        if not isinstance(msg, m.PasswordData):
            raise ServeError("08P01", "expected a SASLInitialResponse")
        self.writer.write(codec.auth_sasl_continue(ex.first(msg.data)))
        await self.writer.drain()
        msg = await self._message()
        if not isinstance(msg, m.PasswordData):
            raise ServeError("08P01", "expected a SASLResponse")
        final = ex.final(msg.data)
        self.writer.write(codec.auth_sasl_final(final))
        self.writer.write(codec.auth_ok())

    # -- the connection -----------------------------------------------------------------------------
    async def serve(self, refuse: ServeError | None = None) -> None:
        """The connection's life; ``refuse``: answer the startup packet with this error."""
        loop = asyncio.get_running_loop()
        try:
            try:
                start = await self._startup()
            except (ServeError, codec.ProtocolViolation) as e:
                await self._fatal(e)
                return
            if start is None:
                return
            if refuse is not None:
                await self._fatal(refuse)
                return
            self.parser.started()
            self.user = start.params["user"]
            database = start.params.get("database") or self.user
            try:
                await self._authenticate(self.user)
                settings = Settings(self.user, start.params, self.server.backend.engine)
                if self.server.default_statement_timeout > 0:
                    settings.default("statement_timeout", f"{int(self.server.default_statement_timeout * 1000)}")
                if self.server.shutting_down:
                    raise ServeError("57P03", "the database system is shutting down")
                self.client = await loop.run_in_executor(None, self.server.backend.client, self.user, database, self.pid)
            except (ServeError, codec.ProtocolViolation) as e:
                if isinstance(e, ServeError) and e.sqlstate == "28P01":
                    log.info("failed login for user %r from %s", self.user, self.peer)
                await self._fatal(e)
                return
            self.client.settings = settings
            out = []
            for name, value in settings.reported():
                out.append(codec.parameter_status(name, value))
            out.append(codec.backend_key_data(self.pid, self.secret))
            out.append(codec.ready_for_query("I"))
            self.writer.write(b"".join(out))
            await self.writer.drain()
            await self._run(loop, settings)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                self.writer.close()

    async def _run(self, loop, settings: Settings) -> None:
        outbox = Outbox(loop, slots=self.server.send_slots)
        inbox: queue.Queue = queue.Queue()
        proto = Protocol(self.client, outbox, inbox, settings, self.server.metrics, self.server.schedule,
                         spool_rows=self.server.backend.spool_rows)
        self.protocol = proto
        done = threading.Event()
        finished = asyncio.Event()

        def work() -> None:
            try:
                proto.run()
            except Exception:
                log.exception("connection %d: the worker failed", self.pid)
            finally:
                with contextlib.suppress(Exception):
                    self.client.close()
                done.set()
                outbox.close()
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(finished.set)

        worker = threading.Thread(target=work, name=f"ivm-serve-conn-{self.pid}", daemon=True)
        self.worker = worker
        worker.start()
        reading = asyncio.ensure_future(self._read(inbox, outbox))
        pumping = asyncio.ensure_future(outbox.pump(self.writer))
        ended = asyncio.ensure_future(finished.wait())
        try:
            await asyncio.wait({pumping, ended}, return_when=asyncio.FIRST_COMPLETED)
            if not pumping.done():
                # the worker is done; what it sent is written unless the client stopped reading
                try:
                    await asyncio.wait_for(asyncio.shield(pumping), 2.0)
                except TimeoutError:
                    self.writer.transport.abort()
            with contextlib.suppress(ConnectionError, OSError, asyncio.CancelledError):
                await pumping
        finally:
            outbox.closed.set()
            reading.cancel()
            ended.cancel()
            if not pumping.done():
                pumping.cancel()
            if not done.is_set():
                inbox.put(None)
                self.client.cancel("the client disconnected")
            transport = self.writer.transport
            if transport is not None and transport.get_write_buffer_size() > 0:
                transport.abort()
            await loop.run_in_executor(None, done.wait, self.server.shutdown_grace + 5)

    async def _read(self, inbox: queue.Queue, outbox: Outbox) -> None:
        parser = self.parser
        gone = True
        try:
            while True:
                while True:
                    try:
                        msg = parser.next()
                    except codec.ProtocolViolation as e:
                        inbox.put(Violation(e))
                        gone = False
                        return
                    if msg is None:
                        break
                    inbox.put(msg)
                    if isinstance(msg, m.Terminate):
                        gone = False
                        return
                while inbox.qsize() > _INBOX_HIGH:
                    await asyncio.sleep(0.005)
                data = await self.reader.read(65536)
                if not data:
                    break
                parser.feed(data)
        except (ConnectionError, OSError, asyncio.CancelledError):
            pass
        finally:
            if gone:        # the client vanished: stop what runs for it
                self.client.cancel("the client disconnected")
                outbox.closed.set()
            inbox.put(None)
