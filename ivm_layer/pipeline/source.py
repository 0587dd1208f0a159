"""``ivm-cdc``: a Spark Python Data Source streaming PostgreSQL changes as whole transactions.

Offsets are ``{"lsn": n}``: the end LSN of the last transaction of the batch (``-1`` before
the initial snapshot). The first batch is the initial snapshot: the reader creates the
logical slot on a replication connection with ``(SNAPSHOT 'export')`` and keeps that
connection open and idle until the batch is committed, while Spark partitions read slices
of every table with COPY under the exported snapshot. Later batches are LSN ranges read by
peeking the slot (:mod:`.pgsource`), so a replayed batch reads exactly the same
transactions; the slot is advanced in :meth:`CdcStreamReader.commit`, which Spark calls
after it recorded the batch as complete (after the sinks of ``foreachBatch`` returned).

Rows: ``lsn`` (end LSN of the transaction; the consistent point for snapshot rows),
``seq`` (order inside the transaction), ``ts`` (commit time, NULL for snapshot rows),
``tbl``, ``sign`` (+1 insert, -1 delete, 0 = TRUNCATE of ``tbl``) and ``row`` (the row
tuple, pickled: the engine gets exactly the decoder's Python values).

Options: ``url``, ``publication``, ``slot``, ``tables`` (comma-separated),
``maxChangesPerBatch`` (a ``ReadMaxRows`` default limit; a transaction is never split),
``snapshotPartitionRows``, ``statePath`` (the engine's checkpoint directory: used to tell
whether a replayed snapshot batch was already applied).
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


class ChangeRange(InputPartition):
    def __init__(self, start: int, end: int):
        self.start, self.end = start, end


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
        self._export = None          # (ReplicationStream, SlotInfo) while the snapshot is read
        self._until: int | None = None   # Trigger.AvailableNow: the WAL position at the start
        self._columns: dict | None = None

    # -- offsets ------------------------------------------------------------------------
    def initialOffset(self) -> dict:
        return {"lsn": -1}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_changes) if self.max_changes else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        from connectors.postgres import connect, current_wal_lsn

        conn = connect(self.url)
        try:
            self._until = current_wal_lsn(conn)
        finally:
            conn.close()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        from connectors.postgres import connect

        lsn = int(start["lsn"])
        if lsn < 0:
            return {"lsn": self._create_slot()}
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        from .pgsource import scan_commits

        conn = connect(self.url)
        try:
            bound = None if max_rows is None else 4 * max_rows + 10_000
            while True:
                txns, scanned = scan_commits(conn, self.slot, self.publication, self._until, bound)
                end, total = lsn, 0
                for t in txns:
                    if t.end_lsn <= lsn:
                        continue
                    if max_rows is not None and total and total + t.n_changes > max_rows:
                        return {"lsn": end}
                    end, total = t.end_lsn, total + t.n_changes
                if bound is None or scanned < bound:
                    return {"lsn": end}
                bound *= 4  # the peek stopped at the bound before reaching the limit: look further
        finally:
            conn.close()

    def _create_slot(self) -> int:
        """Create the slot with an exported snapshot (dropping a leftover one: nothing was
        applied from it, since no batch was planned yet); keep the connection open."""
        from connectors.postgres import ReplicationStream, connect, drop_slot

        if self._export is not None:
            return self._export[1].consistent_lsn
        conn = connect(self.url)
        try:
            drop_slot(conn, self.slot)
        finally:
            conn.close()
        rs = ReplicationStream(self.url)
        info = rs.create_slot(self.slot, export_snapshot=True)
        self._export = (rs, info)
        return info.consistent_lsn

    def _snapshot_applied(self) -> bool:
        if not self.state_path or not os.path.isdir(self.state_path):
            return False
        from .state import CheckpointStore

        return CheckpointStore.last_batch_in(self.state_path) >= 0

    # -- planning -----------------------------------------------------------------------
    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        s, e = int(start["lsn"]), int(end["lsn"])
        if s >= 0:
            return [ChangeRange(s, e)] if e > s else []
        # the initial snapshot batch
        if self._export is None:
            # a replay after a restart: the exported snapshot died with the old process
            if self._snapshot_applied():
                return []  # the engine has it (the batch id will be skipped)
            self._create_slot()  # nothing was applied: take a fresh slot + snapshot
        from .pgsource import block_slices, read_schema

        snapshot = self._export[1].snapshot
        lsn = self._export[1].consistent_lsn
        schema = read_schema(self.url, self.tables)
        parts: list[InputPartition] = []
        for t in self.tables:
            cols = [(c, oid) for c, _, oid in schema[t]]
            for lo, hi in block_slices(self.url, t, self.slice_rows):
                parts.append(SnapshotSlice(t, cols, lo, hi, snapshot, lsn))
        return parts

    # -- reading (in executors) ---------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[tuple]:
        from .pgsource import copy_slice, read_transactions

        dumps = pickle.dumps
        proto = pickle.HIGHEST_PROTOCOL
        if isinstance(partition, SnapshotSlice):
            for i, row in enumerate(copy_slice(self.url, partition.snapshot, partition.table,
                                               partition.columns, partition.lo, partition.hi)):
                yield (partition.lsn, i, None, partition.table, 1, dumps(row, proto))
            return
        for txn in read_transactions(self.url, self.slot, self.publication, partition.start, partition.end):
            ts = txn.commit_time  # tz-aware UTC: converted to Spark's epoch-based TIMESTAMP exactly
            seq = 0
            for table in txn.truncated:
                yield (txn.end_lsn, seq, ts, table, 0, None)
                seq += 1
            for table, rows in txn.changes.items():
                for row, k in rows:
                    yield (txn.end_lsn, seq, ts, table, k, dumps(row, proto))
                    seq += 1

    # -- acknowledgement ----------------------------------------------------------------
    def commit(self, end: dict) -> None:
        """Spark recorded every batch up to ``end`` as complete: advance the slot; after the
        snapshot batch, release the exporting replication connection."""
        from .pgsource import advance_slot

        lsn = int(end["lsn"])
        if lsn < 0:
            return
        if self._export is not None and lsn >= self._export[1].consistent_lsn:
            self._export[0].close()
            self._export = None
        advance_slot(self.url, self.slot, lsn)

    def stop(self) -> None:
        if self._export is not None:
            self._export[0].close()
            self._export = None


def register(spark) -> None:
    """Register ``ivm-cdc`` with a SparkSession."""
    spark.dataSource.register(CdcDataSource)
