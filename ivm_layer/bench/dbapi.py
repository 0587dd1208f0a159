"""``python -m ivm_layer.bench.dbapi`` (or ``python path/to/dbapi.py`` against another checkout):
what the DB-API surface of a session costs, next to plain DuckDB / psycopg in the same run.

- ``first_row_ms``: ``execute("SELECT * FROM t").fetchone()`` over a table of ``--rows`` rows
  (default 2,000,000) through a DuckDB session, and the same on plain DuckDB; also
  ``fetchall_s`` (every row as Python tuples) and ``first_row_view_ms`` (a served incremental
  view of ``--view-rows`` rows, default 200,000).
- ``executemany_s``: ``--many`` rows (default 10,000) inserted with
  ``executemany("INSERT INTO t VALUES (?, ?, ?)", rows)`` into a table an incremental view reads,
  through the session (a checkout without ``executemany`` runs ``execute`` once per row, what a
  user had to do) and on plain DuckDB (``executemany``); with ``--postgres``: through a
  PostgreSQL session (until ``sync()`` returns) and on psycopg.
- ``insert_ms``: median of a 1-row ``INSERT`` through the session into a table a view reads
  (PostgreSQL: until ``sync()`` returns), next to the plain driver.

Writes JSON (``--out``, default ``bench-results/dbapi.json``). Wall-clock figures on a shared
machine: compare a before/after pair only within one run (``uptime`` printed with them).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time


def _median_ms(fn, reps: int) -> float:
    out = []
    for i in range(reps):
        t0 = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(out), 3)


def _many(s, sql: str, rows: list[tuple]) -> str:
    """``executemany`` where the session has it; else one ``execute`` per row in a transaction."""
    if hasattr(s, "executemany"):
        s.executemany(sql, rows)
        return "executemany"
    s.execute("BEGIN")
    for r in rows:
        s.execute(sql, r)
    s.execute("COMMIT")
    return "execute per row"


def duckdb_figures(rows: int, many: int, reps: int, view_rows: int) -> dict:
    import duckdb

    import ivm_layer

    rec: dict = {"rows": rows, "many": many}
    plain = duckdb.connect()
    s = ivm_layer.connect()
    make = f"CREATE TABLE t AS SELECT range AS a, range * 0.5 AS b, 'row ' || range AS c FROM range({rows})"
    plain.execute(make)
    s.execute(make)

    def first(execute) -> float:
        t0 = time.perf_counter()
        execute("SELECT * FROM t").fetchone()
        return (time.perf_counter() - t0) * 1000

    # medians of alternating runs (the results are dropped between runs)
    fr_plain, fr_sess = [], []
    for _ in range(reps):
        fr_plain.append(first(plain.execute))
        fr_sess.append(first(s.execute))
    rec["first_row_plain_ms"] = round(statistics.median(fr_plain), 3)
    rec["first_row_ms"] = round(statistics.median(fr_sess), 3)
    t0 = time.perf_counter()
    n = len(s.execute("SELECT * FROM t").fetchall())
    rec["fetchall_s"] = round(time.perf_counter() - t0, 3)
    t0 = time.perf_counter()
    plain.execute("SELECT * FROM t").fetchall()
    rec["fetchall_plain_s"] = round(time.perf_counter() - t0, 3)
    assert n == rows
    s.execute(f"CREATE TABLE tv AS SELECT * FROM t LIMIT {view_rows}")
    s.execute("CREATE INCREMENTAL VIEW v AS SELECT a, b, c FROM tv WHERE a >= 0")
    rec["first_row_view_ms"] = _median_ms(lambda i: s.execute("SELECT * FROM v").fetchone(), 3)

    # executemany into a table a view reads
    for conn in (plain, s):
        conn.execute("CREATE TABLE m (a BIGINT, b DOUBLE, c VARCHAR)")
    s.execute("CREATE INCREMENTAL VIEW mv AS SELECT a, c FROM m WHERE b >= 0")
    data = [(i, i * 0.5, f"row {i}") for i in range(many)]
    t0 = time.perf_counter()
    rec["executemany_how"] = _many(s, "INSERT INTO m VALUES (?, ?, ?)", data)
    rec["executemany_s"] = round(time.perf_counter() - t0, 3)
    assert s.execute("SELECT count(*) FROM mv").fetchone()[0] == many
    t0 = time.perf_counter()
    plain.executemany("INSERT INTO m VALUES (?, ?, ?)", data)
    rec["executemany_plain_s"] = round(time.perf_counter() - t0, 3)

    # 1-row INSERT into the tracked table
    base = 10 * many
    rec["insert_ms"] = _median_ms(lambda i: s.execute(f"INSERT INTO m VALUES ({base + i}, 1.5, 'x')"), reps * 20)
    rec["insert_plain_ms"] = _median_ms(lambda i: plain.execute(f"INSERT INTO m VALUES ({base + i}, 1.5, 'x')"),
                                        reps * 20)
    s.close()
    plain.close()
    return rec


def postgres_figures(url: str, many: int, reps: int, state_dir: str) -> dict:
    import psycopg

    import ivm_layer

    w = psycopg.connect(url, autocommit=True)
    w.execute("DROP TABLE IF EXISTS m")
    w.execute("CREATE TABLE m (a bigint, b double precision, c text)")
    s = ivm_layer.connect(url, state_dir=state_dir, set_replica_identity=True, session="benchdbapi")
    s.execute("CREATE INCREMENTAL VIEW mv AS SELECT a, c FROM m WHERE b >= 0")
    rec: dict = {"many": many}
    data = [(i, i * 0.5, f"row {i}") for i in range(many)]
    t0 = time.perf_counter()
    rec["executemany_how"] = _many(s, "INSERT INTO m VALUES (?, ?, ?)" if hasattr(s, "executemany")
                                   else "INSERT INTO m VALUES (%s, %s, %s)", data)
    s.sync()
    rec["executemany_sync_s"] = round(time.perf_counter() - t0, 3)
    assert s.execute("SELECT count(*) FROM mv").fetchone()[0] == many
    t0 = time.perf_counter()
    with w.cursor() as cur:
        cur.executemany("INSERT INTO m VALUES (%s, %s, %s)", data)
    rec["executemany_psycopg_s"] = round(time.perf_counter() - t0, 3)
    base = 10 * many

    def ins(i):
        s.execute(f"INSERT INTO m VALUES ({base + i}, 1.5, 'x')")
        s.sync()

    rec["insert_sync_ms"] = _median_ms(ins, reps * 4)
    rec["insert_ms"] = _median_ms(lambda i: s.execute(f"INSERT INTO m VALUES ({2 * base + i}, 1.5, 'x')"), reps * 4)
    rec["insert_plain_ms"] = _median_ms(lambda i: w.execute(f"INSERT INTO m VALUES ({3 * base + i}, 1.5, 'x')"),
                                        reps * 4)
    s.close(drop=True)
    w.execute("DROP TABLE IF EXISTS m")
    w.close()
    return rec


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ivm_layer.bench.dbapi", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=2_000_000, help="rows of the SELECT (default 2,000,000)")
    p.add_argument("--many", type=int, default=10_000, help="rows of the executemany (default 10,000)")
    p.add_argument("--view-rows", type=int, default=200_000, help="rows of the served view (default 200,000)")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--postgres", metavar="URL", help="also measure a PostgreSQL session on this server")
    p.add_argument("--out", default="bench-results/dbapi.json")
    args = p.parse_args(argv)
    import ivm_layer

    results: dict = {"ivm_layer": os.path.dirname(ivm_layer.__file__),
                     "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "load_avg": os.getloadavg()[0]}
    results["duckdb"] = duckdb_figures(args.rows, args.many, args.reps, args.view_rows)
    if args.postgres:
        with tempfile.TemporaryDirectory() as state:
            results["postgres"] = postgres_figures(args.postgres, args.many, args.reps, state)
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
