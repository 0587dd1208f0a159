"""PostgreSQL access for the ``ivm-cdc`` source: catalog, view column types, snapshot slices
by block range. (Changes are streamed by :mod:`.feed`.)

Snapshot rows are read with COPY inside ``REPEATABLE READ`` + ``SET TRANSACTION SNAPSHOT``
(the snapshot exported by ``CREATE_REPLICATION_SLOT``), one slice of heap blocks per Spark
partition (``ctid`` TID-range scans), values decoded by the stream's decoder
(:class:`ivm_layer.io.postgres.pgoutput.ValueDecoder`).
"""

from __future__ import annotations

from collections.abc import Iterator

from ...errors import IVMError
from .pgoutput import ValueDecoder
from .replication import (
    PostgresError,
    connect,
    copy_batches,
    quote_literal,
    quote_table,
    table_columns,
)


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
