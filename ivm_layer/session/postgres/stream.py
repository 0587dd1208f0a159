"""The background reader of one view's replication stream (PostgreSQL sessions).

A :class:`StreamReader` owns the view's replication connection on its own thread: it reads
and decodes (``pgoutput``) committed transactions into a bounded queue, answers keepalives,
and reports the position the consumer has made durable (:meth:`StreamReader.acknowledge`).
It never touches the engine.

Faults it survives on its own:

- **server shutdown**: keepalives are answered at once; when the server ends the copy
  stream (CopyDone/CommandComplete at a shutdown) or the connection drops
  (``pg_terminate_backend``, a network error), the reader lets go of the connection;
- **reconnects**: it then opens a new replication connection and starts the slot again
  from the acknowledged position, with backoff (0.1 s doubling to 2 s) for at most
  ``reconnect_seconds``; the server re-sends from the slot's confirmed position, which is
  at or before what was queued, and the reader drops every transaction whose end LSN is at
  or below the last one it queued, so nothing is lost or doubled;
- **a consumer far behind**: when the queue stays full, the reader closes the connection
  (the slot keeps the WAL; an unread connection would hold up a server shutdown) and
  reconnects once the queue is half empty;
- errors a new connection cannot cure (the slot or publication dropped, privileges, bad
  credentials) and an exhausted retry budget end the reader with a :class:`ReplicationError`
  that the session raises on that view's reads only.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable

from ...errors import IVMError
from ...io.postgres import replication as pgc
from ...io.postgres.pgoutput import PgOutputDecoder, Transaction

QUEUE_TRANSACTIONS = 20_000      # decoded transactions buffered per view before reading pauses


class _Paused(Exception):
    """The reader let go of its connection while the queue was full."""


class ReplicationError(IVMError):
    """A view's replication stream failed for good (slot dropped, server unreachable for
    longer than the retry budget, missing privileges): the view is stopped."""


class StreamReader:
    """The thread owning one view's replication connection (see the module docstring)."""

    def __init__(self, open_stream: Callable[[int], pgc.ReplicationStream], stream: pgc.ReplicationStream,
                 view: str, slot: str, start_lsn: int, reconnect_seconds: float = 60.0,
                 maxsize: int | None = None):
        self.open_stream = open_stream          # lsn → a started stream (may raise)
        self.stream: pgc.ReplicationStream | None = stream
        self.view = view
        self.slot = slot
        self.reconnect_seconds = reconnect_seconds
        self.out: queue.Queue = queue.Queue(maxsize=maxsize or QUEUE_TRANSACTIONS)
        self.stop = threading.Event()
        self.received_lsn = start_lsn     # stream position with everything before it queued
        self.durable_lsn = start_lsn      # what the consumer made durable (set by acknowledge)
        self.last_end = start_lsn         # end LSN of the last transaction queued
        self.reconnects = 0
        self.thread = threading.Thread(target=self._run, name=f"ivm-pg-{view}", daemon=True)

    def start(self) -> StreamReader:
        self.thread.start()
        return self

    def acknowledge(self, lsn: int) -> None:
        """The consumer has made everything up to ``lsn`` durable (any thread)."""
        self.durable_lsn = max(self.durable_lsn, lsn)

    def close(self, timeout: float = 10.0) -> None:
        self.stop.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(timeout)

    # -- the thread ---------------------------------------------------------------------------
    def _run(self) -> None:
        failing_since: float | None = None
        delay = 0.1
        try:
            while not self.stop.is_set():
                try:
                    if self.stream is None:
                        self.stream = self.open_stream(self.durable_lsn)
                        self.reconnects += 1
                    self._read(self.stream)
                except _Paused as p:
                    self._drop_stream()          # let go while the consumer catches up
                    self._resume_after_pause(p.args[0])
                    continue
                except Exception as e:  # noqa: BLE001 - classified below, handed to the consumer
                    self._drop_stream()
                    if self.stop.is_set():
                        return
                    if not pgc.is_retryable(e):
                        self._fail(e)
                        return
                    now = time.monotonic()
                    failing_since = failing_since or now
                    if now - failing_since > self.reconnect_seconds:
                        self._fail(ReplicationError(
                            f"view {self.view!r}: the replication connection was lost and could not be "
                            f"re-established within {self.reconnect_seconds:.0f} s ({e}); the view is "
                            "stopped: reconnect the session when the server is back"))
                        return
                    self.stop.wait(delay)
                    delay = min(delay * 2, 2.0)
                    continue
                failing_since, delay = None, 0.1
        finally:
            self._drop_stream()

    def _read(self, stream: pgc.ReplicationStream) -> None:
        """Read until stopped or the stream fails; a fresh decoder per connection (the
        server re-sends Relation messages, and a partial transaction is re-sent whole)."""
        dec = PgOutputDecoder()
        stream.flushed_lsn = max(stream.flushed_lsn, self.durable_lsn)
        while not self.stop.is_set():
            for lsn, payload in stream.read(0.2):
                txn = dec.feed(payload, lsn)
                if txn is not None and txn.end_lsn > self.last_end:
                    self._put(stream, txn)
                    self.last_end = txn.end_lsn
            stream.flushed_lsn = max(stream.flushed_lsn, self.durable_lsn)
            if not dec.in_transaction:
                self.received_lsn = max(self.received_lsn, stream.received_lsn)

    def _put(self, stream: pgc.ReplicationStream, txn: Transaction) -> None:
        """Queue a transaction. While the consumer is far behind (the queue stays full), let
        go of the connection — the slot keeps the WAL, and a connection that is not read
        would hold up a server shutdown — and reconnect once the queue has room again."""
        try:
            self.out.put(txn, timeout=1.0)
        except queue.Full:
            raise _Paused(txn) from None

    def _resume_after_pause(self, txn: Transaction) -> None:
        while not self.stop.is_set() and self.out.qsize() > self.out.maxsize // 2:
            self.stop.wait(0.2)
        if not self.stop.is_set():
            self.out.put(txn)
            self.last_end = txn.end_lsn

    def _fail(self, err: BaseException) -> None:
        if isinstance(err, pgc.PostgresError) and err.sqlstate == "42704" and "publication" in str(err):
            err = ReplicationError(f"the publication {self.slot} of view {self.view!r} was dropped behind the "
                                   f"session's back ({err}); DROP VIEW {self.view} and create it again")
        elif isinstance(err, pgc.PostgresError) and err.sqlstate == "42704":
            err = ReplicationError(f"the replication slot {self.slot} of view {self.view!r} was dropped "
                                   f"behind the session's back ({err}); DROP VIEW {self.view} and create "
                                   "it again")
        elif not isinstance(err, IVMError):
            err = ReplicationError(f"view {self.view!r}: the replication stream failed: "
                                   f"{type(err).__name__}: {err}")
        while True:
            try:
                self.out.put(err, timeout=1.0)
                return
            except queue.Full:
                if self.stop.is_set():
                    return

    def _drop_stream(self) -> None:
        if self.stream is not None:
            with contextlib.suppress(Exception):     # the connection is being discarded anyway
                self.stream.close()
            self.stream = None
