"""``ivm-cdc``: a Spark Python Data Source streaming PostgreSQL changes as whole transactions.

Offsets are ``{"lsn": n}``: the end LSN of the last transaction of the batch (``-1`` before
the initial snapshot). The first batch is the initial snapshot: the reader creates the
logical slot on a replication connection with ``(SNAPSHOT 'export')`` and keeps that
connection open and idle until the batch ran, while Spark partitions read slices of every
table with COPY under the exported snapshot. Then that same connection streams the slot
(``START_REPLICATION``): a :class:`ivm_layer.io.postgres.feed.ChangeFeed` thread in the reader's process
(the same reader the PostgreSQL sessions use)
decodes each message once and stages committed transactions by end LSN. Later batches are
LSN ranges of staged transactions, carried to the executors inside the partitions (no
executor connects to PostgreSQL); the slot is confirmed up to what Spark committed (the
source's ``commit(end)``, called as Spark plans the next batch) and, promptly, up to what the
daemon's sinks hold (``commitMarker``, :mod:`.commitmark`), so a replayed batch that is not
in the sinks reads exactly the same transactions, sent again by the server.

Rows: ``lsn`` (end LSN of the transaction; the consistent point for snapshot rows),
``seq`` (order inside the transaction), ``ts`` (commit time, NULL for snapshot rows),
``tbl``, ``sign`` (+1 insert, -1 delete, 0 = TRUNCATE of ``tbl``) and ``row`` (the row
tuple, pickled: the engine gets exactly the decoder's Python values).

Options: ``url``, ``publication``, ``slot``, ``tables`` (comma-separated),
``maxChangesPerBatch`` (a ``ReadMaxRows`` default limit; a transaction is never split),
``snapshotPartitionRows``, ``statePath`` (the engine's checkpoint directory: used to tell
whether a replayed snapshot batch was already applied), ``commitMarker`` (the daemon's
``sinks-committed.json``: what the feed may confirm; a replayed snapshot batch it covers was
applied), ``maxStagedChanges``
(default: 3 × ``maxChangesPerBatch``, at least 100,000), ``partitionChanges`` (row changes per
Spark partition of a change batch, default 50,000).
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterator

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

SCHEMA = "lsn BIGINT, seq INT, ts TIMESTAMP, tbl STRING, sign INT, row BINARY"
NAME = "ivm-cdc"


class SnapshotSlice(InputPartition):
    def __init__(self, table: str, columns: list, lo, hi, snapshot: str | None, lsn: int):
        self.table, self.columns, self.lo, self.hi = table, columns, lo, hi
        self.snapshot, self.lsn = snapshot, lsn


class ChangeBatch(InputPartition):
    """Staged transactions of one LSN range as the Arrow IPC stream of their source rows, built
    where the batch is planned (:func:`change_batches`: each row pickled once, there); the
    task only hands the record batches on."""

    def __init__(self, ipc: bytes):
        self.ipc = ipc


def arrow_schema():
    import pyarrow as pa

    return pa.schema([("lsn", pa.int64()), ("seq", pa.int32()), ("ts", pa.timestamp("us", tz="UTC")),
                      ("tbl", pa.string()), ("sign", pa.int32()), ("row", pa.binary())])


class CdcDataSource(DataSource):
    """The ``ivm-cdc`` source (streaming only)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema) -> CdcStreamReader:
        return CdcStreamReader(dict(self.options))


class CdcStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets = PostgreSQL LSNs; batches = whole transactions; acknowledgement in commit()."""

    def __init__(self, options: dict):
        from ..errors import IVMError

        options = {k.lower(): v for k, v in options.items()}  # Spark lower-cases option names
        try:
            self.url = options["url"]
            self.slot = options["slot"]
            self.publication = options["publication"]
            self.tables = [t for t in options["tables"].split(",") if t]
        except KeyError as e:
            raise IVMError(f"the ivm-cdc source needs the option {e.args[0]!r}") from None
        self.max_changes = int(options.get("maxchangesperbatch", 0)) or None
        self.slice_rows = int(options.get("snapshotpartitionrows", 200_000))
        self.state_path = options.get("statepath")
        self.commit_marker = options.get("commitmarker")
        self.max_staged = int(options.get("maxstagedchanges", 0)) or max(100_000, 3 * (self.max_changes or 0))
        self.partition_changes = int(options.get("partitionchanges", 50_000))
        self.feed = None            # ChangeFeed once the stream is read
        self._export = None          # (ReplicationStream, SlotInfo) while the snapshot is read
        self._until: int | None = None   # Trigger.AvailableNow: the WAL position at the start
        self._columns: dict | None = None

    # -- offsets ------------------------------------------------------------------------
    def initialOffset(self) -> dict:
        return {"lsn": -1}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_changes) if self.max_changes else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Catch up with everything committed before now: the WAL *insert* position, which is
        past the end of every committed transaction (the write position may not be yet, with
        ``synchronous_commit = off``)."""
        from ..io.postgres.pgoutput import parse_lsn
        from ..io.postgres.replication import connect

        conn = connect(self.url)
        try:
            self._until = parse_lsn(conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0])
        finally:
            conn.close()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        lsn = int(start["lsn"])
        if lsn < 0:
            return {"lsn": self._create_slot()}
        feed = self._ensure_feed(lsn)
        if self._until is not None:  # Trigger.AvailableNow: wait until the stream reached it
            feed.wait_position(self._until, 120.0, until_full=True)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end, total = lsn, 0
        for txn_end, n in feed.staged(lsn, self._until):
            if max_rows is not None and total and total + n > max_rows:
                break
            end, total = txn_end, total + n
        return {"lsn": end}

    def _ensure_feed(self, lsn: int):
        """The change feed, started at ``lsn`` on the snapshot's connection (after the snapshot
        batch ran in this process) or on a new one."""
        from ..io.postgres.feed import daemon_feed

        if self.feed is None:
            rs = None
            if self._export is not None and lsn >= self._export[1].consistent_lsn:
                rs, self._export = self._export[0], None
            self.feed = daemon_feed(self.url, self.slot, self.publication, lsn, self.max_staged, stream=rs,
                                    committed_marker=self.commit_marker)
        return self.feed

    def _create_slot(self) -> int:
        """Create the slot with an exported snapshot (dropping a leftover one: nothing was
        applied from it, since no batch was planned yet); keep the connection open."""
        from ..io.postgres.replication import ReplicationStream, connect, drop_slot

        if self._export is not None:
            return self._export[1].consistent_lsn
        conn = connect(self.url)
        try:
            drop_slot(conn, self.slot)
        finally:
            conn.close()
        from ..io.postgres.feed import replication_url

        rs = ReplicationStream(replication_url(self.url))
        info = rs.create_slot(self.slot, export_snapshot=True)
        self._export = (rs, info)
        return info.consistent_lsn

    def _snapshot_applied(self) -> bool:
        """The sinks hold the snapshot batch (the marker), or the driver's engine applied it."""
        from .commitmark import read_marker

        if read_marker(self.commit_marker) is not None:
            return True
        if not self.state_path or not os.path.isdir(self.state_path):
            return False
        from .state import last_batch_in

        return last_batch_in(self.state_path) >= 0

    # -- planning -----------------------------------------------------------------------
    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        s, e = int(start["lsn"]), int(end["lsn"])
        if s >= 0:
            return self._change_partitions(s, e) if e > s else []
        # the initial snapshot batch
        if self._export is None:
            # a replay after a restart: the exported snapshot died with the old process
            if self._snapshot_applied():
                return []  # the engine has it (the batch id will be skipped)
            self._create_slot()  # nothing was applied: take a fresh slot + snapshot
        from ..io.postgres.snapshot import block_slices, read_schema

        snapshot = self._export[1].snapshot
        lsn = self._export[1].consistent_lsn
        schema = read_schema(self.url, self.tables)
        parts: list[InputPartition] = []
        for t in self.tables:
            cols = [(c, oid) for c, _, oid in schema[t]]
            for lo, hi in block_slices(self.url, t, self.slice_rows):
                parts.append(SnapshotSlice(t, cols, lo, hi, snapshot, lsn))
        return parts

    def _change_partitions(self, s: int, e: int) -> list[InputPartition]:
        parts: list[InputPartition] = []
        cur: list[tuple] = []
        n = 0
        for t in self._ensure_feed(s).take(s, e):
            cur.append((t.end_lsn, t.commit_time, t.truncated, t.changes))
            n += t.n_changes
            if n >= self.partition_changes:
                parts.append(ChangeBatch(arrow_ipc(cur)))
                cur, n = [], 0
        if cur:
            parts.append(ChangeBatch(arrow_ipc(cur)))
        return parts

    # -- reading (in executors) ---------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[tuple]:
        from ..io.postgres.snapshot import copy_slice

        dumps = pickle.dumps
        proto = pickle.HIGHEST_PROTOCOL
        if isinstance(partition, SnapshotSlice):
            for i, row in enumerate(copy_slice(self.url, partition.snapshot, partition.table,
                                               partition.columns, partition.lo, partition.hi)):
                yield (partition.lsn, i, None, partition.table, 1, dumps(row, proto))
            return
        import pyarrow as pa

        yield from pa.ipc.open_stream(partition.ipc)

    # -- acknowledgement ----------------------------------------------------------------
    def commit(self, end: dict) -> None:
        """Spark recorded every batch up to ``end`` as complete: confirm it to the server."""
        lsn = int(end["lsn"])
        if lsn < 0:
            return
        if self.feed is not None:
            self.feed.commit(lsn)
        elif self._export is None or lsn >= self._export[1].consistent_lsn:
            self._ensure_feed(lsn)  # the snapshot batch is done: stream from its end

    def stop(self) -> None:
        """Close the replication connection: nothing of the daemon keeps running on the server."""
        if self.feed is not None:
            self.feed.close()
            self.feed = None
        if self._export is not None:
            self._export[0].close()
            self._export = None


def arrow_ipc(txns: list[tuple]) -> bytes:
    """The source rows of staged transactions as one Arrow IPC stream."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, arrow_schema()) as w:
        for b in change_batches(txns):
            w.write_batch(b)
    return sink.getvalue().to_pybytes()


def change_batches(txns: list[tuple], rows_per_batch: int = 20_000):
    """Arrow record batches of source rows for staged transactions (TRUNCATEs of a
    transaction first, then its changes, in order)."""
    import pyarrow as pa

    schema = arrow_schema()
    dumps, proto = pickle.dumps, pickle.HIGHEST_PROTOCOL
    cols: tuple[list, ...] = ([], [], [], [], [], [])
    lsn_c, seq_c, ts_c, tbl_c, sign_c, row_c = cols
    for end_lsn, ts, truncated, changes in txns:
        seq = 0
        for table in truncated:
            lsn_c.append(end_lsn), seq_c.append(seq), ts_c.append(ts)
            tbl_c.append(table), sign_c.append(0), row_c.append(None)
            seq += 1
        for table, rows in changes.items():
            for row, k in rows:
                lsn_c.append(end_lsn), seq_c.append(seq), ts_c.append(ts)
                tbl_c.append(table), sign_c.append(k), row_c.append(dumps(row, proto))
                seq += 1
        if len(lsn_c) >= rows_per_batch:
            yield pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(cols, schema)],
                                             schema=schema)
            for c in cols:
                c.clear()
    if lsn_c:
        yield pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(cols, schema)],
                                         schema=schema)


def register(spark) -> None:
    """Register ``ivm-cdc`` with a SparkSession."""
    spark.dataSource.register(CdcDataSource)
