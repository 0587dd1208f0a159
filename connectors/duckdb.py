"""Change capture for DuckDB tables: a rowid + row-hash diff against a shadow table.

For every tracked table ``t`` the connector keeps ``ivm."shadow_t"`` with the table's
``rowid`` (``_ivm_rid``), a hash of the row (``_ivm_h = hash(c1, …, cn)``; DuckDB hashes
NULL to a fixed non-NULL value and combines arguments by position, so ``(1, NULL)`` and
``(NULL, 1)`` differ) and the row's columns, as of the last capture. :func:`capture`
compares the table's current ``(rowid, hash)`` pairs with the shadow by two anti-joins:
shadow rows without a current match were deleted (their old values come from the shadow),
current rows without a shadow match were inserted; an ``UPDATE`` shows up as both. The
result is a bag difference: as multisets of rows, ``current = shadow - deleted + inserted``
(up to a 64-bit hash collision for one rowid), whatever DuckDB does with rowids. The
shadow is then patched by rowid (delete the deleted rowids, insert the inserted rows), so
the cost of patching is proportional to the change, not to the table.

A cheap fingerprint skips the anti-joins when nothing changed: the row count and
``sum(hash(rowid, c1, …, cn))`` (a 64-bit wrap-around sum) of the table are kept next to
the shadow and compared first.

Measured with ``python -m connectors.duckdb`` (DuckDB 2.0.0, Python 3.11, 2 cores, one
table of 1,000,000 rows of (BIGINT, BIGINT, VARCHAR, DOUBLE), three runs):

- start tracking (build the shadow) and fetch all rows for the bulk load: 0.63–0.81 s
- no-change capture (fingerprint hit, one scan): 0.018–0.034 s
- no-change capture with the anti-joins forced (fingerprint disabled): 0.22–0.46 s
- ~1 % change capture (3,334 rows updated, 3,334 deleted, 3,333 inserted: 6,668 deleted
  and 6,667 inserted rows returned, shadow patched): 0.24–0.32 s

Through a session (``ivm_layer.connect``), a 1-row INSERT into the 1M-row table costs about
0.18 s end to end (fingerprint miss, then the two anti-joins); writes to other tables only
pay the 1M-row fingerprint (~0.02 s) when the statement's target is unknown.

Every function runs its statements on the given connection, inside the caller's
transaction if one is open, so a rolled-back transaction also rolls back the shadow.
"""

from __future__ import annotations

import time

SCHEMA = "ivm"

def quote(name: str) -> str:
    """A DuckDB identifier, double-quoted."""
    return '"' + str(name).replace('"', '""') + '"'


def shadow_name(table: str) -> str:
    return f"{SCHEMA}.{quote('shadow_' + table)}"


def ensure_catalog(conn) -> None:
    """Create the ``ivm`` schema and the ``ivm.views`` catalog table if missing."""
    conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    conn.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.views ("
                 "name VARCHAR PRIMARY KEY, kind VARCHAR NOT NULL, definition VARCHAR NOT NULL)")


def table_columns(conn, table: str, schema: str = "main") -> dict[str, str] | None:
    """``{column: type}`` of a base table in column order, or None when there is no such table."""
    rows = conn.execute(
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = ? AND lower(table_name) = lower(?) "
        "AND table_name IN (SELECT table_name FROM information_schema.tables "
        "                   WHERE table_schema = ? AND table_type = 'BASE TABLE') "
        "ORDER BY ordinal_position", [schema, table, schema]).fetchall()
    if not rows:
        return None
    return {name: typ for name, typ in rows}


class Tracker:
    """Change capture for one DuckDB table (a shadow table plus a fingerprint)."""

    def __init__(self, table: str, columns: list[str]):
        self.table = table
        self.columns = list(columns)
        self.shadow = shadow_name(table)
        self._cols = ", ".join(quote(c) for c in self.columns)
        self._tcols = ", ".join("t." + quote(c) for c in self.columns)
        self._hash = "hash(" + ", ".join("t." + quote(c) for c in self.columns) + ")"
        self.fingerprint: tuple | None = None

    # -- fingerprint --------------------------------------------------------------------
    def _fingerprint_sql(self) -> str:
        # sum of 64-bit hashes as HUGEINT, wrapped to 64 bits; salted by rowid.
        return (f"SELECT count(*), coalesce(sum(hash(t.rowid, {self._tcols})::HUGEINT) % 18446744073709551616, 0) "
                f"FROM {quote(self.table)} t")

    def _current_fingerprint(self, conn) -> tuple:
        return tuple(conn.execute(self._fingerprint_sql()).fetchone())

    # -- lifecycle ----------------------------------------------------------------------
    def start(self, conn) -> list[tuple]:
        """(Re)build the shadow from the table's current contents; return those rows."""
        conn.execute(f"CREATE OR REPLACE TABLE {self.shadow} AS "
                     f"SELECT t.rowid AS _ivm_rid, {self._hash} AS _ivm_h, {self._tcols} "
                     f"FROM {quote(self.table)} t")
        self.fingerprint = self._current_fingerprint(conn)
        return conn.execute(f"SELECT {self._cols} FROM {self.shadow}").fetchall()

    def stop(self, conn) -> None:
        conn.execute(f"DROP TABLE IF EXISTS {self.shadow}")

    # -- capture ------------------------------------------------------------------------
    def capture(self, conn) -> tuple[list[tuple], list[tuple]]:
        """``(deleted_rows, inserted_rows)`` since the last capture; patches the shadow."""
        fp = self._current_fingerprint(conn)
        if fp == self.fingerprint:
            return [], []
        t = quote(self.table)
        conn.execute(
            f"CREATE OR REPLACE TEMP TABLE _ivm_del AS SELECT s.* FROM {self.shadow} s "
            f"ANTI JOIN (SELECT t.rowid AS rid, {self._hash} AS h FROM {t} t) c "
            f"ON s._ivm_rid = c.rid AND s._ivm_h = c.h")
        conn.execute(
            f"CREATE OR REPLACE TEMP TABLE _ivm_ins AS SELECT c.* FROM "
            f"(SELECT t.rowid AS _ivm_rid, {self._hash} AS _ivm_h, {self._tcols} FROM {t} t) c "
            f"ANTI JOIN {self.shadow} s ON s._ivm_rid = c._ivm_rid AND s._ivm_h = c._ivm_h")
        deleted = conn.execute(f"SELECT {self._cols} FROM temp._ivm_del").fetchall()
        inserted = conn.execute(f"SELECT {self._cols} FROM temp._ivm_ins").fetchall()
        if deleted:
            conn.execute(f"DELETE FROM {self.shadow} WHERE _ivm_rid IN (SELECT _ivm_rid FROM temp._ivm_del)")
        if inserted:
            conn.execute(f"INSERT INTO {self.shadow} SELECT * FROM temp._ivm_ins")
        conn.execute("DROP TABLE temp._ivm_del")
        conn.execute("DROP TABLE temp._ivm_ins")
        self.fingerprint = fp
        return deleted, inserted


def capture(conn, tracker: Tracker) -> tuple[list[tuple], list[tuple]]:
    """``capture(conn, table_tracker) -> (deleted_rows, inserted_rows)``."""
    return tracker.capture(conn)


def _measure(n: int = 1_000_000) -> str:
    import duckdb

    conn = duckdb.connect()
    ensure_catalog(conn)
    conn.execute("CREATE TABLE big(id BIGINT, k BIGINT, s VARCHAR, x DOUBLE)")
    conn.execute(f"INSERT INTO big SELECT i, i % 1000, 'row' || i, i * 0.5 FROM range({n}) r(i)")
    tr = Tracker("big", list(table_columns(conn, "big")))
    t0 = time.perf_counter()
    rows = tr.start(conn)
    t_start = time.perf_counter() - t0
    assert len(rows) == n
    out = [f"start tracking + fetch {n} rows: {t_start:.2f} s"]
    t0 = time.perf_counter()
    d, i = tr.capture(conn)
    out.append(f"no-change capture (fingerprint hit): {time.perf_counter() - t0:.3f} s")
    assert not d and not i
    saved = tr.fingerprint
    tr.fingerprint = None  # force the anti-joins
    t0 = time.perf_counter()
    d, i = tr.capture(conn)
    out.append(f"no-change capture, anti-joins forced: {time.perf_counter() - t0:.3f} s")
    assert not d and not i and tr.fingerprint == saved
    m = n // 100
    conn.execute("UPDATE big SET x = x + 1 WHERE id % 300 = 0")         # ~0.33 %
    conn.execute("DELETE FROM big WHERE id % 300 = 1")                   # ~0.33 %
    conn.execute(f"INSERT INTO big SELECT i, 0, 'new', 0 FROM range({m // 3}) r(i)")
    t0 = time.perf_counter()
    d, i = tr.capture(conn)
    out.append(f"1% change capture ({len(d)} deleted, {len(i)} inserted rows): {time.perf_counter() - t0:.3f} s")
    return "\n".join(out)


if __name__ == "__main__":
    print(_measure())
