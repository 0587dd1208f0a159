"""PostgreSQL access for the ``ivm-cdc`` source: catalog, slot peeks by LSN range, snapshot
slices by block range, slot acknowledgement.

Changes are read with ``pg_logical_slot_peek_binary_changes`` (pgoutput, protocol 1): a peek
does not consume anything, so the same LSN range can be read again after a crash and gives
the same transactions until the slot is advanced — which happens only in the source's
``commit(end)``, after Spark has recorded the batch as complete (i.e. after the sinks ran).
In a peek's result the row of a Commit message carries the transaction's *end* LSN, the
position to acknowledge; transactions are selected by that end LSN.

Snapshot rows are read with COPY inside ``REPEATABLE READ`` + ``SET TRANSACTION SNAPSHOT``
(the snapshot exported by ``CREATE_REPLICATION_SLOT``), one slice of heap blocks per Spark
partition (``ctid`` TID-range scans), values decoded by the stream's decoder
(:class:`connectors.pgoutput.ValueDecoder`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from connectors.pgoutput import PgOutputDecoder, Transaction, ValueDecoder, parse_lsn
from connectors.postgres import (
    PostgresError,
    connect,
    copy_batches,
    quote_literal,
    quote_table,
    table_columns,
)

from ..errors import IVMError

# pgoutput message kinds (first byte) that carry row changes, and how many changes each makes
_CHANGE_KINDS = {ord("I"): 1, ord("D"): 1, ord("U"): 2}
_COMMIT = ord("C")


def read_schema(url: str, tables: list[str]) -> dict[str, list[tuple[str, str, int]]]:
    """``{table: [(column, sql_type, type_oid)]}`` for the given tables; a missing table is an
    error naming it."""
    conn = connect(url)
    try:
        out = {}
        for t in tables:
            cols = table_columns(conn, t)
            if cols is None:
                raise IVMError(f"the views read table {t!r}, which does not exist in the source "
                               "database (public schema)")
            out[t] = cols
        return out
    finally:
        conn.close()


def view_types(url: str, select_sql: str) -> list[str]:
    """The SQL types PostgreSQL gives the columns of ``select_sql`` (what a table sink must
    declare, also for aggregates and expressions): a temporary view, rolled back."""
    conn = connect(url)
    try:
        with conn.transaction(force_rollback=True):
            conn.execute(f"CREATE TEMP VIEW ivm_type_probe AS {select_sql}")
            rows = conn.execute(
                "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                "WHERE attrelid = 'ivm_type_probe'::regclass AND attnum > 0 AND NOT attisdropped "
                "ORDER BY attnum").fetchall()
        return [r[0] for r in rows]
    except Exception as e:
        raise IVMError(f"the source database cannot type the view query: {e}") from e
    finally:
        conn.close()


def peek_opts(publication: str) -> str:
    return f"'proto_version', '1', 'publication_names', {quote_literal(publication)}"


@dataclass
class TxnInfo:
    end_lsn: int
    n_changes: int


def scan_commits(conn, slot: str, publication: str, upto_lsn: int | None,
                 upto_nchanges: int | None) -> tuple[list[TxnInfo], int]:
    """The committed transactions a peek would return (end LSN and change count), without
    transferring row data; also the number of peek rows scanned."""
    rows = retry_busy(lambda: conn.execute(
        f"SELECT lsn::text, get_byte(data, 0) FROM pg_logical_slot_peek_binary_changes("
        f"%s, %s::pg_lsn, %s, {peek_opts(publication)})",
        [slot, None if upto_lsn is None else lsn_text(upto_lsn), upto_nchanges]).fetchall())
    out: list[TxnInfo] = []
    n = 0
    for lsn, kind in rows:
        if kind in _CHANGE_KINDS:
            n += _CHANGE_KINDS[kind]
        elif kind == _COMMIT:
            out.append(TxnInfo(parse_lsn(lsn), n))
            n = 0
    return out, len(rows)


def _slot_busy(e: BaseException) -> bool:
    import psycopg

    return isinstance(e, psycopg.errors.ObjectInUse)


def retry_busy(fn, *args, wait: float = 30.0):
    """Call ``fn`` again while the slot is in use by another backend (a concurrent peek, a
    monitoring query), for up to ``wait`` seconds."""
    deadline = time.monotonic() + wait
    while True:
        try:
            return fn(*args)
        except Exception as e:
            if not _slot_busy(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def read_transactions(url: str, slot: str, publication: str, start: int, end: int
                      ) -> Iterator[Transaction]:
    """Committed transactions with ``start < end_lsn <= end``, in commit order (a peek: the
    slot is not moved). A busy slot is retried while nothing has been returned yet."""
    deadline = time.monotonic() + 30.0
    while True:
        produced = False
        try:
            for txn in _peek_range(url, slot, publication, start, end):
                produced = True
                yield txn
            return
        except Exception as e:
            if produced or not _slot_busy(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _peek_range(url: str, slot: str, publication: str, start: int, end: int) -> Iterator[Transaction]:
    conn = connect(url)
    try:
        dec = PgOutputDecoder()
        with conn.cursor().copy(  # stream the peek's rows instead of materializing them
                f"COPY (SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes("
                f"{quote_literal(slot)}, {quote_literal(lsn_text(end))}::pg_lsn, NULL, "
                f"{peek_opts(publication)})) TO STDOUT (FORMAT binary)") as cp:
            cp.set_types(["text", "bytea"])
            for lsn, data in cp.rows():
                txn = dec.feed(data, parse_lsn(lsn))
                if txn is not None and start < txn.end_lsn <= end:
                    yield txn
    finally:
        conn.close()


def advance_slot(url: str, slot: str, lsn: int) -> None:
    """Acknowledge everything up to ``lsn`` (never moves the slot backwards)."""
    conn = connect(url)
    try:
        r = conn.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
                         [slot]).fetchone()
        if r is None:
            raise PostgresError(f"replication slot {slot!r} disappeared; the daemon cannot continue "
                                "exactly: start it again with a new --checkpoint")
        if r[0] is None or parse_lsn(r[0]) < lsn:
            retry_busy(conn.execute, "SELECT pg_replication_slot_advance(%s, %s::pg_lsn)", [slot, lsn_text(lsn)])
    finally:
        conn.close()


def block_slices(url: str, table: str, rows_per_slice: int) -> list[tuple[int | None, int | None]]:
    """Heap block ranges ``[lo, hi)`` (None = open) splitting ``table`` into slices of about
    ``rows_per_slice`` rows (by the planner's row estimate and the current size)."""
    conn = connect(url)
    try:
        est, blocks = conn.execute(
            "SELECT greatest(reltuples, 0)::bigint, "
            "(pg_relation_size(c.oid) / current_setting('block_size')::int)::bigint "
            "FROM pg_class c WHERE c.oid = %s::regclass", [quote_table(table)]).fetchone()
    finally:
        conn.close()
    n = max(1, min(int(blocks), -(-int(est) // max(1, rows_per_slice)))) if blocks else 1
    if n == 1:
        return [(None, None)]
    step = -(-int(blocks) // n)
    cuts = list(range(step, int(blocks), step))
    bounds: list[tuple[int | None, int | None]] = []
    lo = None
    for c in cuts:
        bounds.append((lo, c))
        lo = c
    bounds.append((lo, None))
    return bounds


def copy_slice(url: str, snapshot: str | None, table: str, columns: list[tuple[str, int]],
               lo: int | None, hi: int | None) -> Iterator[tuple]:
    """Rows of ``table`` in heap blocks ``[lo, hi)`` as of the exported ``snapshot``."""
    where = []
    if lo is not None:
        where.append(f"ctid >= '({int(lo)},0)'::tid")
    if hi is not None:
        where.append(f"ctid < '({int(hi)},0)'::tid")
    conn = connect(url)
    try:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        if snapshot is not None:
            try:
                conn.execute(f"SET TRANSACTION SNAPSHOT {quote_literal(snapshot)}")
            except Exception as e:
                raise PostgresError(f"the exported snapshot {snapshot!r} is gone (the daemon's "
                                    f"replication connection closed during the initial load): {e}") from e
        for batch in copy_batches(conn, table, columns, ValueDecoder(), " AND ".join(where)):
            yield from batch
        conn.execute("COMMIT")
    finally:
        conn.close()


def lsn_text(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"
