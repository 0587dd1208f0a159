"""The listener: connections, limits, cancel requests, TLS, graceful shutdown.

:class:`Server` accepts connections on one address (one asyncio task each,
:mod:`.connection`), refuses the ones over ``max_connections`` (53300, as PostgreSQL), routes
CancelRequests to the connection whose backend key they carry, and on SIGTERM/SIGINT stops
accepting, lets running statements finish for ``shutdown_grace`` seconds (SUBSCRIBE streams,
which never finish, are not waited for), cancels the rest,
closes every client (open blocks roll back) and then the session, whose checkpoint makes the
views resume exactly on the next start. Listening on a non-loopback address without
authentication is refused before anything is opened.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import logging
import secrets
import signal
import socket
import ssl

from . import codec
from .auth import Users
from .connection import Connection
from .sqlstate import ServeError

log = logging.getLogger("ivm_layer.serve")


def is_loopback_host(host: str) -> bool:
    if host in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


class Server:
    def __init__(self, backend, host: str = "127.0.0.1", port: int = 5433, *, auth_method: str = "trust",
                 users: Users | None = None, tls_cert: str | None = None, tls_key: str | None = None,
                 max_connections: int = 100, statement_timeout: float = 0.0, metrics=None,
                 shutdown_grace: float = 10.0, max_message: int = codec.MAX_MESSAGE, send_slots: int = 4,
                 send_buffer: int = 256 * 1024):
        if auth_method not in ("trust", "scram-sha-256"):
            raise ServeError("22023", f"--auth {auth_method!r}: use trust or scram-sha-256")
        if auth_method == "trust" and not is_loopback_host(host):
            raise ServeError("28000", f"refusing to listen on {host} without authentication: trust is for loopback "
                                      "only; add --auth scram-sha-256 with --users FILE or IVM_SERVE_PASSWORD")
        if auth_method == "scram-sha-256" and not users:
            raise ServeError("28000", "--auth scram-sha-256 needs --users FILE or IVM_SERVE_PASSWORD in the environment")
        self.backend = backend
        self.host = host
        self.port = port
        self.auth_method = auth_method
        self.users = users or Users()
        self.ssl_context = None
        self.tls_required = False
        if tls_cert or tls_key:
            if not (tls_cert and tls_key):
                raise ServeError("22023", "TLS needs both --tls-cert and --tls-key")
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            try:
                ctx.load_cert_chain(tls_cert, tls_key)
            except (OSError, ssl.SSLError) as e:
                raise ServeError("F0000", f"cannot load the TLS certificate or key: {e}") from None
            self.ssl_context = ctx
        self.max_connections = max_connections
        self.default_statement_timeout = statement_timeout
        self.metrics = metrics
        self.shutdown_grace = shutdown_grace
        self.max_message = max_message
        self.send_slots = send_slots
        self.send_buffer = send_buffer      # a fixed kernel send buffer per socket: bounded memory
        self.connections: dict[int, Connection] = {}
        self.shutting_down = False
        self._next_pid = 1000
        self._server: asyncio.AbstractServer | None = None
        self._stopped: asyncio.Event | None = None
        self._tasks: set[asyncio.Task] = set()

    def is_loopback(self, peer: str) -> bool:
        return is_loopback_host(peer)

    def schedule(self, seconds: float, fn):
        """From any thread: call ``fn`` on the event loop after ``seconds``; returns a cancel."""
        loop = self.loop
        holder: list = []

        def arm() -> None:
            holder.append(loop.call_later(seconds, fn))
        loop.call_soon_threadsafe(arm)

        def cancel() -> None:
            def off() -> None:
                for h in holder:
                    h.cancel()
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(off)
        return cancel

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        self._server = await asyncio.start_server(self._accept, self.host, self.port, limit=1 << 16)
        sock = self._server.sockets[0].getsockname()
        self.port = sock[1]
        if self.metrics is not None:
            self.metrics.bind(self)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._tasks.add(task)
        sock = writer.get_extra_info("socket")
        if sock is not None and self.send_buffer:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer)
        try:
            if self.shutting_down:
                writer.write(codec.error_response("57P03", "the database system is shutting down", severity="FATAL"))
                return
            if len(self.connections) >= self.max_connections:
                # answered after the startup packet (a cancel request, SSL negotiation, as PostgreSQL)
                await Connection(self, reader, writer, 0, 0).serve(refuse=ServeError(
                    "53300", "sorry, too many clients already"))
                return
            self._next_pid += 1
            pid = self._next_pid
            conn = Connection(self, reader, writer, pid, secrets.randbits(31))
            self.connections[pid] = conn
            if self.metrics is not None:
                self.metrics.connected(+1)
            try:
                await conn.serve()
            finally:
                self.connections.pop(pid, None)
                if self.metrics is not None:
                    self.metrics.connected(-1)
        except (TimeoutError, ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                await writer.drain()
            with contextlib.suppress(Exception):
                writer.close()
            self._tasks.discard(task)

    def cancel(self, pid: int, secret: int) -> None:
        conn = self.connections.get(pid)
        if conn is None or conn.client is None:
            return
        if hmac.compare_digest(secret.to_bytes(4, "big", signed=True), conn.secret.to_bytes(4, "big", signed=True)):
            conn.client.cancel("user request")

    def install_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, lambda s=sig: asyncio.ensure_future(self.shutdown(s.name)))

    async def shutdown(self, why: str = "shutdown") -> None:
        """Stop accepting; let statements finish for ``shutdown_grace`` s; cancel the rest;
        close every connection and the backend."""
        if self.shutting_down:
            return
        self.shutting_down = True
        log.info("ivm serve: %s: stopping (%d connections)", why, len(self.connections))
        if self._server is not None:
            self._server.close()
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + self.shutdown_grace
        while any(getattr(c, "protocol", None) is not None and c.protocol.busy and not c.protocol.streaming
                  for c in self.connections.values()):       # subscriptions never finish: cancelled at once
            if loop.time() > deadline:
                break
            await asyncio.sleep(0.05)
        for conn in list(self.connections.values()):
            if conn.client is not None:
                conn.client.cancel("administrator command")
            with contextlib.suppress(Exception):
                conn.writer.write(codec.error_response("57P01", "terminating connection due to administrator command",
                                                       severity="FATAL"))
            with contextlib.suppress(Exception):
                conn.writer.transport.abort() if conn.writer.transport.get_write_buffer_size() else conn.writer.close()
        for _ in range(100):
            if not self.connections:
                break
            await asyncio.sleep(0.05)
        closing = loop.time()
        await loop.run_in_executor(None, self.backend.close)
        if self.metrics is not None:
            self.metrics.close()
        log.info("ivm serve: stopped (clients %.1f s, closing the views %.1f s)", closing - started,
                 loop.time() - closing)
        self._stopped.set()

    async def serve_forever(self) -> None:
        await self._stopped.wait()
