"""One-row lookups of a parameterized view through SQL, against the backend's own indexed point
query on the same data (issue 28 item 6), in DuckDB and PostgreSQL sessions.

    python -m ivm_layer.bench.point_sql [--n 20000] [--reps 400] [--no-postgres] [--out bench-results/point_sql.json]

The view ``SELECT r.b, r.c FROM r WHERE r.a = $a`` over ``r(a, b, c)`` with one row per ``a``.
Per backend, medians over ``REPS`` single reads of random keys:

- ``engine_lookup_us``: ``list(view.lookup(a=k))``;
- ``sql_param_us``: ``session.execute("SELECT * FROM v WHERE a = ?", [k]).fetchall()``;
- ``sql_literal_us``: the same with the key written into the text (a new text every read);
- ``sql_general_us``: ``SELECT * FROM v WHERE a = ? AND b >= 0`` (an extra predicate: the
  general path, the database evaluates it over the lookup's rows);
- ``plain_us``: the backend alone on a copy of the table with an index on ``a``: DuckDB
  ``SELECT b, c FROM r WHERE a = ?`` (ART index) on its own connection, PostgreSQL the same
  with a B-tree index, prepared, through psycopg;
- ``ratio``: ``sql_param_us / plain_us`` (the target is ≤ 3).

Also used by :mod:`ivm_layer.bench.static_params`. Machine-dependent, never asserted; the load
(``os.getloadavg``) is recorded with the figures.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time

from .report import save_json

VIEW = "SELECT r.b, r.c FROM r WHERE r.a = $a"
REPS = 400


def _median_us(fn, keys: list[int]) -> float:
    samples = []
    for k in keys:
        t0 = time.perf_counter()
        fn(k)
        samples.append(time.perf_counter() - t0)
    return round(statistics.median(samples) * 1e6, 1)


def _measure(s, plain, n: int, rnd: random.Random, reps: int) -> dict:
    out: dict = {}
    keys = [rnd.randrange(n) for _ in range(reps)]
    try:
        s.execute(f"CREATE INCREMENTAL VIEW v AS {VIEW}")
    except Exception as e:  # noqa: BLE001 - a backend that refuses the view: say so
        return {"refused": f"{type(e).__name__}: {e}"}
    view = s.view("v")
    assert s.execute("SELECT * FROM v WHERE a = ?", [keys[0]]).fetchall() == [(keys[0] * 2, keys[0] * 3)]
    s.execute("SELECT * FROM v WHERE a = ? AND b >= 0", [keys[0]]).fetchall()
    for _ in range(20):                                     # warm: every shape has run once
        plain(keys[0])
    out["engine_lookup_us"] = _median_us(lambda k: list(view.lookup(a=k)), keys)
    out["sql_param_us"] = _median_us(lambda k: s.execute("SELECT * FROM v WHERE a = ?", [k]).fetchall(), keys)
    out["sql_literal_us"] = _median_us(lambda k: s.execute(f"SELECT * FROM v WHERE a = {k}").fetchall(), keys)
    out["plain_us"] = _median_us(plain, keys)
    out["sql_general_us"] = _median_us(
        lambda k: s.execute("SELECT * FROM v WHERE a = ? AND b >= 0", [k]).fetchall(), keys[:max(1, reps // 4)])
    out["plain_again_us"] = _median_us(plain, keys)       # drift check: the baseline measured twice
    out["ratio"] = round(out["sql_param_us"] / min(out["plain_us"], out["plain_again_us"]), 2)
    out["ratio_literal"] = round(out["sql_literal_us"] / min(out["plain_us"], out["plain_again_us"]), 2)
    return out


def duckdb_side(n: int, rnd: random.Random, reps: int = REPS) -> dict:
    import duckdb

    import ivm_layer

    s = ivm_layer.connect()
    load = f"SELECT i, i * 2, i * 3 FROM range({n}) t(i)"
    s.execute("CREATE TABLE r (a BIGINT, b BIGINT, c BIGINT)")
    s.execute(f"INSERT INTO r {load}")
    con = duckdb.connect()
    con.execute("CREATE TABLE r (a BIGINT, b BIGINT, c BIGINT)")
    con.execute(f"INSERT INTO r {load}")
    con.execute("CREATE INDEX r_a ON r (a)")
    try:
        return _measure(s, lambda k: con.execute("SELECT b, c FROM r WHERE a = ?", [k]).fetchall(), n, rnd, reps)
    finally:
        s.close()
        con.close()


def postgres_side(n: int, rnd: random.Random, reps: int = REPS) -> dict:
    import psycopg

    import ivm_layer
    from ivm_layer.bench.pg_cluster import Cluster

    with Cluster() as cluster, tempfile.TemporaryDirectory() as state:
        cluster.wait_ready()
        url = cluster.create_database()
        w = psycopg.connect(url, autocommit=True)
        w.execute("CREATE TABLE r (a bigint, b bigint, c bigint)")
        w.execute(f"INSERT INTO r SELECT i, i * 2, i * 3 FROM generate_series(0, {n - 1}) i")
        w.execute("CREATE TABLE r_plain AS SELECT * FROM r")
        w.execute("CREATE INDEX r_plain_a ON r_plain (a)")
        w.execute("ANALYZE r_plain")
        s = ivm_layer.connect(url, state_dir=state, set_replica_identity=True)
        try:
            return _measure(s, lambda k: w.execute("SELECT b, c FROM r_plain WHERE a = %s", [k],
                                                   prepare=True).fetchall(), n, rnd, reps)
        finally:
            s.close(drop=True)
            w.close()


def run(n: int, postgres: bool = True, reps: int = REPS) -> dict:
    rnd = random.Random(7)
    doc: dict = {"n": n, "reps": reps, "loadavg_before": [round(x, 2) for x in os.getloadavg()],
                 "duckdb": duckdb_side(n, rnd, reps)}
    if postgres:
        doc["postgres"] = postgres_side(n, rnd, reps)
    doc["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    return doc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--no-postgres", action="store_true", help="DuckDB only (no throwaway PostgreSQL cluster)")
    ap.add_argument("--reps", type=int, default=REPS, help="reads per figure (medians)")
    ap.add_argument("--out", default="bench-results/point_sql.json")
    args = ap.parse_args(argv)
    doc = run(args.n, not args.no_postgres, args.reps)
    save_json(doc, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
