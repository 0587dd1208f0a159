"""The one reader of a logical replication slot: :class:`ChangeFeed`, shared by the PostgreSQL
sessions (one feed per view) and the daemon (one for its slot).

A background thread owns the replication connection
(:class:`~ivm_layer.io.postgres.replication.ReplicationStream`): it reads, decodes each pgoutput
message once (:class:`~ivm_layer.io.postgres.pgoutput.PgOutputDecoder`), stages committed
transactions in memory in end-LSN order, answers keepalives at once, and tells the server
what the consumer made durable. It never touches the engine. The consumer either takes
transactions out (:meth:`ChangeFeed.drain`: a session applies them on its own thread) or reads
LSN ranges of staged ones (:meth:`ChangeFeed.staged`, :meth:`ChangeFeed.take`: the daemon's
Spark source plans batches from them); :meth:`ChangeFeed.commit` says what is durable, drops
what it covers and confirms it to the server. The feed is the source contract of
:mod:`ivm_layer.maintain.contracts` (exactly once: positions are LSNs and the slot replays
from the last commit).

Positions: :attr:`ChangeFeed.position` — every transaction ending at or before it is staged
(the end of the last staged transaction, or a keepalive's position outside a transaction:
the server sends every transaction committed before it first); :attr:`ChangeFeed.committed`
— what the consumer made durable; the slot is confirmed up to it and, with ``confirm_idle``
(the daemon), up to :attr:`position` while nothing is staged, so WAL of tables the slot does
not publish is not retained (a session records such positions in its checkpoint first and
commits them).

Faults it survives on its own:

- **server shutdown, dropped connections**: the thread lets go of the connection and opens a
  new one, ``open_stream(committed)``, with back-off (0.1 s doubling to 2 s) for at most
  ``reconnect_seconds`` since the first failure; the server sends again from the slot's
  confirmed position, at or before what was staged, and the feed drops every transaction
  ending at or before the last one it staged: nothing is lost or doubled;
- **a consumer far behind** (``max_staged`` changes staged: a soft bound, one read of what the
  socket holds): the thread stops reading. With ``release_when_full`` (sessions: the consumer
  may not come back for a long time) it lets go of the connection after a second — an unread
  connection would hold up a server shutdown — and reconnects once half the stage is free;
  otherwise (the daemon: the consumer commits within seconds) it keeps the connection alive
  with status updates and polls ``committed_source``;
- errors a new connection cannot cure (the slot or publication dropped, privileges, a pgoutput
  protocol violation) and an exhausted retry budget end the thread: :attr:`ChangeFeed.error`
  holds the cause, reported by the consumer after the transactions staged before it.

Costs: O(1) per decoded message on the thread; :meth:`drain` O(transactions taken),
:meth:`staged`/:meth:`take` O(staged transactions).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable

from ...errors import ReplicationError
from ...maintain.contracts import FaultTolerance
from .conninfo import is_retryable
from .pgoutput import PgOutputDecoder, PgOutputError, Transaction
from .replication import PostgresError, ReplicationStream

#: reconnects are logged here at INFO (a session's feed: its user sees a stopped view only
#: when the retry budget is spent); the daemon's feed logs them to its own log, as warnings
log = logging.getLogger("ivm_layer.feed")

#: the walsender's ``logical_decoding_work_mem`` for the daemon: a ``source`` sink's batch (one
#: transaction of up to ~1M view rows) is decoded by the slot too, only to be filtered out by
#: the publication; with the server's default 64MB it was spilled to disk and read back first
DECODING_MEMORY = "512MB"
#: seconds a full stage waits before a ``release_when_full`` feed lets go of its connection
RELEASE_AFTER = 1.0


class _Release(Exception):
    """The stage stayed full: let go of the connection until the consumer catches up."""


def replication_url(url: str) -> str:
    """``url`` with ``logical_decoding_work_mem`` raised for the replication connection,
    unless the user's ``options`` or ``$PGOPTIONS`` set it."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    own = conninfo_to_dict(url).get("options") or os.environ.get("PGOPTIONS") or ""
    if "logical_decoding_work_mem" in own:
        return url
    return make_conninfo(url, options=f"{own} -c logical_decoding_work_mem={DECODING_MEMORY}".strip())


def committed_offset(marker: str | None) -> int | None:
    """The ``lsn`` of the JSON file ``marker`` the consumer writes atomically (rename) as it makes
    batches durable, e.g. the daemon's ``sinks-committed.json`` (None if absent or unreadable)."""
    if not marker:
        return None
    try:
        with open(marker) as f:
            lsn = json.load(f).get("lsn")
        return None if lsn is None else int(lsn)
    except (OSError, ValueError, AttributeError, TypeError):
        return None


def _weight(t: Transaction) -> int:
    """What a staged transaction counts against ``max_staged``: its row changes (at least 1)."""
    return max(1, t.n_changes + len(t.truncated))


class ChangeFeed:
    """Committed transactions of ``slot`` after ``start_lsn``, staged until the consumer takes
    or commits them (see the module docstring). ``open_stream(lsn)`` returns a started
    :class:`ReplicationStream` from ``lsn`` (it may raise); ``stream``: one already started at
    ``start_lsn``."""

    fault_tolerance = FaultTolerance.EXACTLY_ONCE   # positions are LSNs; the slot replays after commit()

    def __init__(self, open_stream: Callable[[int], ReplicationStream], slot: str, start_lsn: int, *,
                 stream: ReplicationStream | None = None, name: str | None = None,
                 max_staged: int = 100_000, release_when_full: bool = False, confirm_idle: bool = False,
                 committed_source: Callable[[], int | None] | None = None,
                 reconnect_seconds: float = 60.0, logger: logging.Logger | None = None):
        self.open_stream = open_stream
        self.slot = slot
        self.name = name or slot
        self.max_staged = max(1, max_staged)
        self.release_when_full = release_when_full
        self.confirm_idle = confirm_idle
        self.committed_source = committed_source
        self.reconnect_seconds = reconnect_seconds
        self._log, self._level = (logger, logging.WARNING) if logger is not None else (log, logging.INFO)
        self._cond = threading.Condition()
        self._txns: deque[Transaction] = deque()
        self._staged = 0                    # Σ _weight of the staged transactions
        self.committed = start_lsn          # durable at the consumer; the slot is confirmed to here
        self.position = start_lsn           # every transaction ending at or before it is staged
        self.last_end = start_lsn           # end LSN of the last transaction staged
        self.error: BaseException | None = None
        self.reconnects = 0
        self._want_reply = False
        self._stop = threading.Event()
        self._rs = stream
        self._thread = threading.Thread(target=self._run, name=f"ivm-feed-{self.name}", daemon=True)
        self._thread.start()

    # -- the consumer --------------------------------------------------------------------------
    def check(self) -> None:
        """Raise the feed's failure, if it failed."""
        if self.error is not None:
            raise PostgresError(f"the change stream of slot {self.slot!r} failed: {self.error}")

    def drain(self, limit: int, timeout: float = 0.0) -> list[Transaction]:
        """Take up to ``limit`` staged transactions out, in order, waiting up to ``timeout``
        seconds for the first one. O(transactions taken)."""
        with self._cond:
            if not self._txns and timeout > 0:
                self._cond.wait_for(lambda: self._txns or self.error is not None or self._stop.is_set(),
                                    timeout)
            out: list[Transaction] = []
            while self._txns and len(out) < limit:
                t = self._txns.popleft()
                self._staged -= _weight(t)
                out.append(t)
            if out:
                self._cond.notify_all()
            return out

    def pending(self) -> int:
        """Staged transactions not yet taken or committed."""
        with self._cond:
            return len(self._txns)

    def oldest_commit_time(self):
        """The commit time of the oldest staged transaction (None: nothing staged)."""
        with self._cond:
            return self._txns[0].commit_time if self._txns else None

    def staged(self, after: int, upto: int | None = None) -> list[tuple[int, int]]:
        """``[(end_lsn, n_changes)]`` of staged transactions ending after ``after`` (and at or
        before ``upto``)."""
        self.check()
        with self._cond:
            return [(t.end_lsn, t.n_changes + len(t.truncated)) for t in self._txns
                    if t.end_lsn > after and (upto is None or t.end_lsn <= upto)]

    def full(self) -> bool:
        with self._cond:
            return self._staged >= self.max_staged

    def wait_position(self, lsn: int, timeout: float, until_full: bool = False) -> bool:
        """Wait until everything committed up to ``lsn`` is staged (``until_full``: or the
        stage is full); False after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.position < lsn and self.error is None and not (
                    until_full and self._staged >= self.max_staged):
                self._want_reply = True  # ask the server for a keepalive with its position
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.2))
        self.check()
        return True

    def take(self, start: int, end: int, timeout: float = 300.0) -> list[Transaction]:
        """The staged transactions with ``start < end_lsn <= end``, waiting until the stream
        has delivered up to ``end`` (after a restart or reconnect it is sent again)."""
        if not self.wait_position(end, timeout):
            raise PostgresError(f"the change stream did not deliver up to LSN {end:X} within "
                                f"{timeout:.0f} s (slot {self.slot!r})")
        with self._cond:
            return [t for t in self._txns if start < t.end_lsn <= end]

    def commit(self, lsn: int) -> None:
        """Everything up to ``lsn`` is durable at the consumer: drop what is staged up to it and
        confirm it to the server (with the next status update, within a read)."""
        with self._cond:
            if lsn <= self.committed:
                return
            self.committed = lsn
            while self._txns and self._txns[0].end_lsn <= lsn:
                self._staged -= _weight(self._txns.popleft())
            self._cond.notify_all()

    def close(self, timeout: float = 10.0) -> None:
        """Stop the thread and close the connection (its walsender exits; the slot stays)."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self._drop_stream()

    # -- the thread ---------------------------------------------------------------------------
    def _run(self) -> None:
        failing_since: float | None = None
        delay = 0.1
        try:
            while not self._stop.is_set():
                try:
                    if self._rs is None:
                        self._rs = self.open_stream(self.committed)
                        self.reconnects += 1
                        self._log.log(self._level, "replication stream of slot %s (re)connected at %X",
                                      self.slot, self.committed)
                    failing_since, delay = None, 0.1
                    self._pump(self._rs)
                except _Release:
                    self._drop_stream()         # let go while the consumer catches up
                    with self._cond:
                        self._cond.wait_for(lambda: self._staged <= self.max_staged // 2 or self._stop.is_set())
                except Exception as e:  # noqa: BLE001 - classified here, reported through .error
                    self._drop_stream()
                    if self._stop.is_set():
                        return
                    if isinstance(e, PgOutputError) or not is_retryable(e):
                        self._fail(e)
                        return
                    now = time.monotonic()
                    failing_since = failing_since or now
                    if now - failing_since > self.reconnect_seconds:
                        self._fail(ReplicationError(
                            f"the replication connection of slot {self.slot} was lost and could not be "
                            f"re-established within {self.reconnect_seconds:.0f} s ({e})"))
                        return
                    self._log.log(self._level, "replication stream of slot %s broke (%s); reconnecting", self.slot,
                                  str(e).splitlines()[0] if str(e) else type(e).__name__)
                    self._stop.wait(delay)
                    delay = min(delay * 2, 2.0)
        finally:
            self._drop_stream()

    def _pump(self, rs: ReplicationStream) -> None:
        """Read until stopped, the stream fails, or (``release_when_full``) the stage stays
        full; a fresh decoder per connection (the server re-sends Relation messages, and a
        partial transaction is re-sent whole)."""
        dec = PgOutputDecoder()
        rs.flushed_lsn = max(rs.flushed_lsn, self.committed)
        next_check = 0.0
        full_since: float | None = None
        while not self._stop.is_set():
            if self.full():
                if self.committed_source is not None:
                    self.commit(self._source_committed())  # frees what the consumer completed meanwhile
                rs.flushed_lsn = max(rs.flushed_lsn, self.committed)
                now = time.monotonic()
                full_since = full_since or now
                if self.release_when_full and now - full_since >= RELEASE_AFTER:
                    raise _Release
                rs.send_status()                # back-pressure: alive, not reading
                self._stop.wait(0.1)
                continue
            full_since = None
            if self._want_reply:
                self._want_reply = False
                rs.send_status(reply=True)
            done = []
            for lsn, payload in rs.read(timeout=0.25):
                t = dec.feed(payload, lsn)
                if t is not None:
                    done.append(t)
            with self._cond:
                for t in done:
                    if t.end_lsn <= self.last_end:
                        continue                # sent again after a reconnect: already staged or taken
                    self._txns.append(t)
                    self._staged += _weight(t)
                    self.last_end = t.end_lsn
                    self.position = max(self.position, t.end_lsn)
                if not dec.in_transaction:      # a keepalive's position: everything before it was sent
                    self.position = max(self.position, rs.received_lsn)
                idle = not self._txns and not dec.in_transaction
                self._cond.notify_all()
            now = time.monotonic()
            if self.committed_source is not None and not idle and now >= next_check:
                next_check = now + 0.25
                self.commit(self._source_committed())
            with self._cond:
                idle = not self._txns and not dec.in_transaction
                ack = max(self.committed, self.position) if self.confirm_idle and idle else self.committed
            rs.flushed_lsn = max(rs.flushed_lsn, ack)

    def _source_committed(self) -> int:
        lsn = self.committed_source() if self.committed_source is not None else None
        return self.committed if lsn is None else max(self.committed, lsn)

    def _fail(self, err: BaseException) -> None:
        with self._cond:
            self.error = err
            self._cond.notify_all()

    def _drop_stream(self) -> None:
        rs, self._rs = self._rs, None
        if rs is not None:
            try:
                rs.close()
            except Exception:  # noqa: BLE001,S110 - the connection is being discarded anyway
                pass


#: how long the daemon's feed keeps reconnecting before it reports the stream as failed
DAEMON_RECONNECT_SECONDS = 300.0


def daemon_feed(url: str, slot: str, publication: str, start_lsn: int, max_staged: int = 300_000,
                stream: ReplicationStream | None = None, committed_marker=None) -> ChangeFeed:
    """The daemon's feed of ``slot``: changes only (no logical messages), the walsender's
    decoding memory raised (:func:`replication_url`), a full stage held (the consumer commits
    within seconds), idle positions confirmed, and — with ``committed_marker`` — what the
    consumer's marker file records as durable confirmed promptly (:func:`committed_offset`,
    polled every 0.25 s while transactions are staged). ``stream``: a connection on which the slot was created (its exported snapshot
    read), started here at ``start_lsn``."""

    def open_stream(lsn: int) -> ReplicationStream:
        rs = ReplicationStream(replication_url(url), status_interval=5.0)
        try:
            rs.start(slot, publication, lsn, messages=False)
        except BaseException:
            rs.close()
            raise
        return rs

    if stream is not None:
        stream.start(slot, publication, start_lsn, messages=False)
    # a path (a JSON file with "lsn") or a callable returning the committed LSN (or None)
    source = committed_marker if callable(committed_marker) else \
        (lambda: committed_offset(committed_marker)) if committed_marker else None
    return ChangeFeed(open_stream, slot, start_lsn, stream=stream, max_staged=max_staged,
                      confirm_idle=True, committed_source=source,
                      reconnect_seconds=DAEMON_RECONNECT_SECONDS, logger=logging.getLogger("ivm.daemon"))
