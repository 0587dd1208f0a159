"""Writing view rows into DuckDB tables: bulk inserts, view changes, Arrow types.

Used for MATERIALIZED views (a real table written from the view's change in the statement's
transaction) and for describing served views to DuckDB.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date

from ...engine import temporal
from ...io.duckdb.capture import quote
from ..results import DuckResult, Result, RowsResult
from .ranges import integer_bits


def run(conn, text: str, params, lazy: bool = False) -> Result:
    """Run one statement. ``lazy``: its rows stay in DuckDB and stream as they are fetched
    (:class:`DuckResult`); otherwise they are fetched now. A write's row count (DuckDB's
    one-row ``Count`` result) is always fetched."""
    res = conn.execute(text, params) if params is not None else conn.execute(text)
    desc = res.description
    if desc is None:
        return RowsResult(None, [], -1)
    if len(desc) == 1 and desc[0][0] == "Count":
        rows = res.fetchall()
        return RowsResult(desc, rows, rows[0][0] if len(rows) == 1 else -1)
    if lazy:
        return DuckResult(res, desc)
    return RowsResult(desc, res.fetchall(), -1)


def bulk_insert(conn, target: str, types: list[str], pairs: Iterable[tuple[tuple, int]],
                chunk: int = 100_000) -> None:
    """Insert ``(row, k)`` pairs (k copies each) with one statement per chunk: one list
    parameter per column, UNNESTed."""
    # 128-bit integers and DATE/TIMESTAMP[TZ] (whose infinities Python parameters do not carry)
    wide = [is_wide_integer(t) or temporal.kind_of(t) is not None for t in types]
    sel = ", ".join(f"unnest(${i + 1}::VARCHAR[])::{t}" if w else f"unnest(${i + 1}::{t}[])"
                    for i, (t, w) in enumerate(zip(types, wide)))
    buf: list[tuple] = []
    for row, k in pairs:
        if k == 1:
            buf.append(row)
        else:
            buf.extend([row] * k)
        if len(buf) >= chunk:
            conn.execute(f"INSERT INTO {target} SELECT {sel}", _columns(buf, wide)).fetchall()
            buf = []
    if buf:
        conn.execute(f"INSERT INTO {target} SELECT {sel}", _columns(buf, wide)).fetchall()


def is_wide_integer(sql_type: str) -> bool:
    """HUGEINT/UHUGEINT: 128-bit integers that neither Python parameters (taken as BIGINT or
    DOUBLE) nor Arrow (``decimal128(38)``, 38 digits) carry whole; they travel as text."""
    return integer_bits(sql_type) == 128


def _columns(buf: list[tuple], wide: list[bool]) -> list[list]:
    cols = [list(c) for c in zip(*buf)]
    for i, w in enumerate(wide):
        if w:
            cols[i] = [None if v is None else str(v) if not isinstance(v, date) else temporal.sql_text(v)
                       for v in cols[i]]
    return cols


def write_change(conn, table: str, columns: list[str], types: list[str],
                 change: list[tuple[tuple, int]]) -> None:
    """Apply a bag change to ``table`` (inside the current transaction): exactly k copies of
    each removed row are deleted (``IS NOT DISTINCT FROM`` on every column), added rows
    inserted."""
    dels = [(r, -k) for r, k in change if k < 0]
    if dels:
        tmp_cols = ", ".join(f"{quote(c)} {t}" for c, t in zip(columns, types))
        conn.execute(f"CREATE OR REPLACE TEMP TABLE _ivm_mdel ({tmp_cols}, _ivm_id BIGINT, _ivm_k BIGINT)")
        bulk_insert(conn, "temp._ivm_mdel", types + ["BIGINT", "BIGINT"],
                    ((r + (i, k), 1) for i, (r, k) in enumerate(dels)))
        on = " AND ".join(f"m.{quote(c)} IS NOT DISTINCT FROM d.{quote(c)}" for c in columns)
        conn.execute(
            f"DELETE FROM {table} WHERE rowid IN (SELECT rid FROM ("
            f"SELECT m.rowid AS rid, d._ivm_k AS k, "
            f"row_number() OVER (PARTITION BY d._ivm_id ORDER BY m.rowid) AS rn "
            f"FROM {table} m JOIN temp._ivm_mdel d ON {on}) WHERE rn <= k)").fetchall()
        conn.execute("DROP TABLE temp._ivm_mdel")
    ins = [(r, k) for r, k in change if k > 0]
    if ins:
        bulk_insert(conn, table, types, ins)


def arrow_type(conn, sql_type: str):
    """The Arrow type served rows of a column type travel in: the one DuckDB uses, except for
    HUGEINT/UHUGEINT, which DuckDB exports as ``decimal128(38)`` although their values reach 39
    digits (DuckDB reads no ``decimal256``): they travel as text and the served view's cast
    (:func:`reads.view_sql`) turns them back."""
    if is_wide_integer(sql_type):
        import pyarrow as pa

        return pa.string()
    return conn.sql(f"SELECT NULL::{sql_type} AS x").to_arrow_table().schema.field(0).type
