"""``python -m ivm_layer.bench.bulk_load``: large batches, engine alone and through a session.

    python -m ivm_layer.bench.bulk_load                   # 1M-row batch, 100k-row INSERT … SELECT
    python -m ivm_layer.bench.bulk_load --rows 200000 --baseline DIR

Measured (wall seconds, one process, each figure the median of ``--runs``):

* ``apply``: ``view.apply`` of one ``--rows``-row batch into ``r`` of the two-table equi-join
  ``SELECT * FROM r, s WHERE r.b = s.b`` (``s``, rows/10 rows, loaded first); rows per second.
  With ``--baseline DIR`` the same with an older checkout's engine (same data, same process).
* ``dict``: building a dict of the same rows (``dict.fromkeys``): a floor for any engine that
  keeps its base rows in a dict, measured on the same machine at the same moment.
* ``create_view``: ``CREATE INCREMENTAL VIEW`` of the same join over ``--rows`` rows already in
  DuckDB, through ``ivm_layer.connect()``; rows per second.
* ``insert_select``: a 100k-row ``INSERT … SELECT`` into ``r`` through the session beside the
  same statement on plain DuckDB, and their ratio.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import time

SQL = "SELECT * FROM r, s WHERE r.b = s.b"
SCHEMA = {"r": ["a", "b", "c"], "s": ["b", "c"]}


def data(n: int) -> tuple[list, list]:
    rng = random.Random(1)
    k = max(n // 10, 1)
    return ([(i, rng.randrange(k), rng.randrange(1000)) for i in range(n)],
            [(j, f"c{j % 7}") for j in range(k)])


def apply_rate(mod, r_rows: list, s_rows: list) -> float:
    v = mod.compile_view(SQL, SCHEMA)
    v.apply({"s": [(row, 1) for row in s_rows]})
    batch = {"r": [(row, 1) for row in r_rows]}
    gc.collect()
    t0 = time.perf_counter()
    v.apply(batch)
    secs = time.perf_counter() - t0
    assert len(v) == sum(1 for row in r_rows if row[1] < len(s_rows))  # every b of r joins one s row
    return secs


def session_figures(n: int) -> dict:
    import duckdb

    import ivm_layer

    k = max(n // 10, 1)
    setup = ["CREATE TABLE r (a BIGINT, b BIGINT, c BIGINT)", "CREATE TABLE s (b BIGINT, c VARCHAR)",
             f"INSERT INTO s SELECT i, 'c' || (i % 7) FROM range({k}) t(i)",
             f"INSERT INTO r SELECT i, (i * 7919) % {k}, i % 1000 FROM range({n}) t(i)"]
    try:  # pyarrow's one-time start (served reads use it) is not the view's load
        import pyarrow as pa

        pa.array([1], type=pa.int64())
    except ImportError:
        pass
    s = ivm_layer.connect()
    for q in setup:
        s.execute(q)
    t0 = time.perf_counter()
    s.execute(f"CREATE INCREMENTAL VIEW v AS {SQL}")
    create = time.perf_counter() - t0
    bulk = f"INSERT INTO r SELECT {n} + i, i % {k}, 3 FROM range(100000) t(i)"
    t0 = time.perf_counter()
    s.execute(bulk)
    ins = time.perf_counter() - t0
    assert s.execute("SELECT count(*) FROM v").fetchone()[0] == n + 100_000
    s.close()
    con = duckdb.connect()
    for q in setup:
        con.execute(q)
    t0 = time.perf_counter()
    con.execute(bulk)
    plain = time.perf_counter() - t0
    con.close()
    return {"create_view_s": round(create, 3), "create_view_rows_per_s": round((n + k) / create),
            "insert_select_100k_s": round(ins, 3), "insert_select_100k_plain_s": round(plain, 4),
            "insert_select_ratio": round(ins / plain, 1)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ivm_layer.bench.bulk_load", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--baseline", help="a checkout of an older ivm-layer to measure beside this one")
    p.add_argument("--no-session", action="store_true", help="the engine alone")
    a = p.parse_args(argv)
    import ivm_layer

    r_rows, s_rows = data(a.rows)
    engines = [("engine", ivm_layer)]
    if a.baseline:
        from .floor import load_engine

        engines.append(("baseline", load_engine(a.baseline)))
    apply_rate(ivm_layer, r_rows[:5000], s_rows[:500])  # imports (numpy) paid before timing
    times: dict[str, list[float]] = {}
    for _ in range(a.runs):
        for label, mod in engines:
            times.setdefault(label, []).append(apply_rate(mod, r_rows, s_rows))
        gc.collect()
        t0 = time.perf_counter()
        d = dict.fromkeys(r_rows, 1)
        times.setdefault("dict", []).append(time.perf_counter() - t0)
        del d
    for label, ts in times.items():
        med = statistics.median(ts)
        what = "dict.fromkeys of the rows" if label == "dict" else f"{label} view.apply"
        print(f"{what}: {a.rows:,} rows in {med:.2f} s = {a.rows / med:,.0f} rows/s "
              f"(runs {', '.join(f'{t:.2f}' for t in ts)})", flush=True)
    if not a.no_session:
        print(session_figures(a.rows), flush=True)
    print(f"load average (1 min): {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
