"""Bytes from a connection's worker thread to its socket, with back-pressure.

The worker (:mod:`.protocol`) writes protocol messages with :meth:`Outbox.send`; they are
buffered up to ``chunk`` bytes and handed to the event loop, which writes them to the socket
and waits for the transport to drain (:meth:`Outbox.pump`). At most ``slots`` chunks are in
flight: a client that stops reading fills the socket, the transport, then the slots, and the
worker blocks in :meth:`flush` — it never buffers more than ``slots × chunk`` bytes. While
blocked it calls ``on_wait`` (the protocol's hook that spills a gate-holding result, so a
writer is not held up by a slow reader) and gives up when the client is gone.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable


class ClientGone(Exception):
    """The client closed the connection (or it was dropped) while the worker was sending."""


class Outbox:
    def __init__(self, loop: asyncio.AbstractEventLoop, slots: int = 4, chunk: int = 64 * 1024):
        self.loop = loop
        self.chunk = chunk
        self._buf = bytearray()
        self._slots = threading.Semaphore(slots)
        self._queue: asyncio.Queue = asyncio.Queue()
        self.closed = threading.Event()
        self.on_wait: Callable[[], None] | None = None
        self.sent_bytes = 0

    # -- worker side -------------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        self._buf += data
        if len(self._buf) >= self.chunk:
            self.flush()

    def flush(self) -> None:
        if not self._buf:
            return
        if self.closed.is_set():
            raise ClientGone()
        data, self._buf = bytes(self._buf), bytearray()
        while not self._slots.acquire(timeout=0.05):
            if self.closed.is_set():
                raise ClientGone()
            if self.on_wait is not None:
                self.on_wait()
        self.sent_bytes += len(data)
        try:
            self.loop.call_soon_threadsafe(self._queue.put_nowait, data)
        except RuntimeError:        # the loop is closed: the server is going away
            raise ClientGone() from None

    def close(self) -> None:
        """From the worker: nothing more will be sent."""
        try:
            self.loop.call_soon_threadsafe(self._queue.put_nowait, None)
        except RuntimeError:
            pass

    # -- event loop side ----------------------------------------------------------------------
    async def pump(self, writer: asyncio.StreamWriter) -> None:
        """Write what the worker sends until it closes the outbox or the client goes."""
        try:
            while True:
                data = await self._queue.get()
                if data is None:
                    return
                writer.write(data)
                await writer.drain()
                self._slots.release()
        finally:
            self.closed.set()
