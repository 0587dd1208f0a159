"""The daemon's one reading of the change stream: a replication connection
(``START_REPLICATION``, :class:`ivm_layer.io.postgres.replication.ReplicationStream`) read by a background
thread, each pgoutput message decoded once, committed transactions staged in memory by end LSN.

The stage is the source of every batch after the snapshot: ``latestOffset`` picks the end of a
run of staged transactions, ``partitions`` takes exactly the transactions of an LSN range.
Durability comes from the slot: its confirmed position only moves to what Spark recorded as
complete (the sinks and the engine log committed), so after a crash the server sends the
unconfirmed transactions again, with the same end LSNs, and a replayed batch reads exactly the
same transactions. The confirmed position follows Spark's commit log promptly (the feed
checks ``<checkpoint>/spark/commits`` every 0.25 s while it holds transactions), and while
everything received is committed it follows the server's keepalives, so WAL written by the
sinks into the same cluster never piles up behind the slot.

Memory is bounded: when ``max_staged`` changes are staged the thread stops reading (TCP flow
control holds the walsender; status updates keep the connection alive). When the connection
breaks (server restart), the thread reconnects with back-off and drops what was not yet
committed: the server sends it again.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import deque

from .pgoutput import PgOutputDecoder, PgOutputError, Transaction
from .replication import PostgresError, ReplicationStream

log = logging.getLogger("ivm.daemon")

#: how long a reconnecting feed keeps trying before it reports the stream as failed
RECONNECT_SECONDS = 300.0
#: the walsender's ``logical_decoding_work_mem``: a ``source`` sink's batch (one transaction
#: of up to ~1M view rows) is decoded by the slot too, only to be filtered out by the
#: publication; with the server's default 64MB it was spilled to disk and read back first
DECODING_MEMORY = "512MB"


def replication_url(url: str) -> str:
    """``url`` with ``logical_decoding_work_mem`` raised for the replication connection,
    unless the user's ``options`` or ``$PGOPTIONS`` set it."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    own = conninfo_to_dict(url).get("options") or os.environ.get("PGOPTIONS") or ""
    if "logical_decoding_work_mem" in own:
        return url
    return make_conninfo(url, options=f"{own} -c logical_decoding_work_mem={DECODING_MEMORY}".strip())


def committed_offset(spark_checkpoint: str | None) -> int | None:
    """The ``lsn`` end offset of the last batch in Spark's commit log (None if unknown)."""
    if not spark_checkpoint:
        return None
    try:
        ids = [int(n) for n in os.listdir(os.path.join(spark_checkpoint, "commits")) if n.isdigit()]
        if not ids:
            return None
        with open(os.path.join(spark_checkpoint, "offsets", str(max(ids)))) as f:
            last = f.read().strip().splitlines()[-1]
        return int(json.loads(last)["lsn"])
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None


class ChangeFeed:
    """Committed transactions of ``slot`` after ``start_lsn``, staged until committed."""

    def __init__(self, url: str, slot: str, publication: str, start_lsn: int,
                 max_staged: int = 300_000, rs: ReplicationStream | None = None,
                 spark_checkpoint: str | None = None):
        self.url, self.slot, self.publication = url, slot, publication
        self.max_staged = max(1, max_staged)
        self.spark_checkpoint = spark_checkpoint
        self._cond = threading.Condition()
        self._txns: deque[Transaction] = deque()
        self._staged = 0
        self.committed = start_lsn          # Spark completed every batch up to here
        self.position = start_lsn           # every transaction ending at or before it is staged
        self.error: BaseException | None = None
        self._want_reply = False
        self._stop = threading.Event()
        self._rs = rs
        if rs is not None:
            rs.start(slot, publication, start_lsn, messages=False)
        self._thread = threading.Thread(target=self._run, name=f"ivm-feed-{slot}", daemon=True)
        self._thread.start()

    # -- consumer side (Spark's planner calls) -----------------------------------------------
    def check(self) -> None:
        if self.error is not None:
            raise PostgresError(f"the change stream of slot {self.slot!r} failed: {self.error}")

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
        """Everything up to ``lsn`` is durably applied: drop it, confirm it to the server."""
        with self._cond:
            if lsn <= self.committed:
                return
            self.committed = lsn
            while self._txns and self._txns[0].end_lsn <= lsn:
                t = self._txns.popleft()
                self._staged -= t.n_changes + len(t.truncated)
            self._cond.notify_all()

    def close(self) -> None:
        """Stop the thread and close the connection (its walsender exits; nothing keeps
        running on the server)."""
        self._stop.set()
        self._thread.join(10)
        rs, self._rs = self._rs, None
        if rs is not None:
            rs.close()

    # -- the reading thread ------------------------------------------------------------------
    def _connect(self) -> ReplicationStream:
        """A new stream from the confirmed position (retrying while the slot's previous
        walsender is still going away)."""
        deadline = time.monotonic() + 60.0
        while True:
            rs = ReplicationStream(replication_url(self.url), status_interval=5.0)
            try:
                rs.start(self.slot, self.publication, self.committed, messages=False)
                return rs
            except PostgresError as e:
                rs.close()
                if "is active for PID" not in str(e) or time.monotonic() > deadline:
                    raise
                self._stop.wait(0.2)

    def _run(self) -> None:
        failing_since: float | None = None
        while not self._stop.is_set():
            try:
                if self._rs is None:
                    self._rs = self._connect()
                    log.warning("change stream of slot %s (re)connected at %X", self.slot, self.committed)
                failing_since = None
                self._pump(self._rs)
                return
            except Exception as e:  # noqa: BLE001 - a broken connection: reconnect, else report
                if self._stop.is_set():
                    return
                rs, self._rs = self._rs, None
                if rs is not None:
                    rs.close()
                now = time.monotonic()
                failing_since = failing_since or now
                if now - failing_since > RECONNECT_SECONDS or isinstance(e, PgOutputError):
                    with self._cond:
                        self.error = e
                        self._cond.notify_all()
                    return
                with self._cond:  # the server sends everything after the confirmed point again
                    self._txns.clear()
                    self._staged = 0
                    self.position = self.committed
                log.warning("change stream of slot %s broke (%s); reconnecting", self.slot,
                            str(e).splitlines()[0] if str(e) else type(e).__name__)
                self._stop.wait(min(5.0, 0.5 + now - failing_since))

    def _pump(self, rs: ReplicationStream) -> None:
        dec = PgOutputDecoder()
        next_log_check = 0.0
        while not self._stop.is_set():
            if self.full():  # back-pressure: keep the connection alive without reading
                self.commit(self._spark_committed())  # frees what Spark completed meanwhile
                rs.flushed_lsn = max(rs.flushed_lsn, self.committed)
                rs.send_status()
                self._stop.wait(0.1)
                continue
            if self._want_reply:
                self._want_reply = False
                rs.send_status(reply=True)
            msgs = rs.read(timeout=0.25)
            done = []
            for lsn, payload in msgs:
                t = dec.feed(payload, lsn)
                if t is not None:
                    done.append(t)
            now = time.monotonic()
            with self._cond:
                for t in done:
                    if t.end_lsn <= self.committed or (self._txns and t.end_lsn <= self._txns[-1].end_lsn):
                        continue  # sent again after a reconnect: already applied or staged
                    self._txns.append(t)
                    self._staged += t.n_changes + len(t.truncated)
                    self.position = max(self.position, t.end_lsn)
                # a keepalive's position: every transaction committed before it was sent first
                self.position = max(self.position, rs.received_lsn)
                idle = not self._txns and not dec.in_transaction
                self._cond.notify_all()
            if not idle and now >= next_log_check:
                next_log_check = now + 0.25
                self.commit(self._spark_committed())
            with self._cond:
                if not self._txns and not dec.in_transaction:
                    ack = max(self.committed, self.position)  # nothing pending: skip sink WAL too
                else:
                    ack = self.committed
            rs.flushed_lsn = max(rs.flushed_lsn, ack)

    def _spark_committed(self) -> int:
        lsn = committed_offset(self.spark_checkpoint)
        return self.committed if lsn is None else max(self.committed, lsn)
