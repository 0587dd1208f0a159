"""Writing view rows into DuckDB tables: bulk inserts, view changes, Arrow types.

Used for MATERIALIZED views (a real table written from the view's change in the statement's
transaction) and for describing served views to DuckDB.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...io.duckdb.capture import quote
from ..core import Cursor


def run(conn, text: str, params) -> Cursor:
    """Run one statement and fetch its whole result into a :class:`Cursor`."""
    res = conn.execute(text, params) if params is not None else conn.execute(text)
    desc = res.description
    rows = res.fetchall() if desc is not None else []
    rowcount = -1
    if desc is not None and len(desc) == 1 and desc[0][0] == "Count" and len(rows) == 1:
        rowcount = rows[0][0]
    return Cursor(desc, rows, rowcount)


def bulk_insert(conn, target: str, types: list[str], pairs: Iterable[tuple[tuple, int]],
                chunk: int = 100_000) -> None:
    """Insert ``(row, k)`` pairs (k copies each) with one statement per chunk: one list
    parameter per column, UNNESTed."""
    sel = ", ".join(f"unnest(${i + 1}::{t}[])" for i, t in enumerate(types))
    buf: list[tuple] = []
    for row, k in pairs:
        if k == 1:
            buf.append(row)
        else:
            buf.extend([row] * k)
        if len(buf) >= chunk:
            conn.execute(f"INSERT INTO {target} SELECT {sel}", [list(c) for c in zip(*buf)]).fetchall()
            buf = []
    if buf:
        conn.execute(f"INSERT INTO {target} SELECT {sel}", [list(c) for c in zip(*buf)]).fetchall()


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
    """The Arrow type DuckDB uses for a column type."""
    return conn.sql(f"SELECT NULL::{sql_type} AS x").to_arrow_table().schema.field(0).type
