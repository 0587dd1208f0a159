"""``ivm bench session`` / ``python -m ivm_layer.bench.session``: what a user of a DuckDB session feels.

For each size n (rows of the tracked table ``orders``; ``customers`` has n/10 rows), two
in-memory databases with the same data: one behind ``ivm_layer.connect()`` with the
incremental view ``v`` (``orders ⋈ customers``, about n rows), one plain DuckDB. Measured:

- ``create_view_s`` / ``load_rows_per_s``: ``CREATE INCREMENTAL VIEW`` over the tables;
- ``insert_ms``, ``update_ms``, ``delete_ms``: median latency of 1-row statements through the
  session and the same statements on plain DuckDB (``*_plain_ms``), and their ratio;
- ``count_after_write_ms``, ``limit10_after_write_ms``: ``SELECT count(*) FROM v`` and
  ``SELECT * FROM v LIMIT 10`` right after a 1-row write (the write not timed);
- ``insert_select_100k_s``: a 100k-row ``INSERT … SELECT`` through the session vs plain DuckDB,
  and ``engine_100k_s``, the engine alone applying the same rows to a view of the same size;
- with ``--postgres URL``: the same through a PostgreSQL session where it applies
  (``insert_sync_ms``: a 1-row INSERT until ``sync()`` returns; reads after a write;
  ``join_after_write_ms``: a join of the view with a table right after a 1-row write);
- ``demo``: the demo's fraud stream through the session vs DuckDB recomputing the view after
  every statement (``ivm demo``'s race);
- ``stream``: the demo-shaped stream — 200-row INSERTs, ``SELECT count(*) FROM v`` after each —
  through the session vs DuckDB recomputing the view, for the join view and the fraud view
  (:func:`stream_race`).

Writes JSON (``--out``, default ``bench-results/session.json``) and prints a table. Wall-clock
medians on a shared machine: compare ratios taken in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

VIEW = ("CREATE INCREMENTAL VIEW v AS SELECT o.id, o.cust, o.amount, c.region "
        "FROM orders o JOIN customers c ON o.cust = c.id")


def _setup(conn_execute, n: int) -> None:
    conn_execute("CREATE TABLE orders (id BIGINT, cust BIGINT, amount DOUBLE)")
    conn_execute("CREATE TABLE customers (id BIGINT, region VARCHAR)")
    custs = max(n // 10, 1)
    conn_execute(f"INSERT INTO customers SELECT i, 'region ' || (i % 7) FROM range({custs}) r(i)")
    conn_execute(f"INSERT INTO orders SELECT i, i % {custs}, (i % 1000) * 0.5 FROM range({n}) r(i)")


def _median_ms(fn, reps: int) -> float:
    out = []
    for i in range(reps):
        t0 = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(out), 3)


def measure(n: int, reps: int) -> dict:
    import duckdb

    import ivm_layer

    s = ivm_layer.connect()
    plain = duckdb.connect()
    _setup(s.execute, n)
    _setup(plain.execute, n)
    custs = max(n // 10, 1)
    rec: dict = {"n": n}
    t0 = time.perf_counter()
    s.execute(VIEW)
    rec["create_view_s"] = round(time.perf_counter() - t0, 3)
    rec["load_rows_per_s"] = round((n + custs) / rec["create_view_s"])
    base = 10 * n

    def ins(conn):
        return lambda i: conn.execute(f"INSERT INTO orders VALUES ({base + i}, {i % custs}, 1.5)")

    def upd(conn):
        return lambda i: conn.execute(f"UPDATE orders SET amount = amount + 1 WHERE id = {i * 7}")

    def dele(conn):
        return lambda i: conn.execute(f"DELETE FROM orders WHERE id = {base + i}")

    for name, make in (("insert", ins), ("update", upd), ("delete", dele)):
        rec[f"{name}_ms"] = _median_ms(make(s), reps)
        rec[f"{name}_plain_ms"] = _median_ms(make(plain), reps)
        rec[f"{name}_ratio"] = round(rec[f"{name}_ms"] / rec[f"{name}_plain_ms"], 2)

    def after_write(sql):
        def step(i):
            s.execute(f"INSERT INTO orders VALUES ({20 * n + i}, {i % custs}, 2.5)")
            t0 = time.perf_counter()
            s.execute(sql).fetchall()
            times.append((time.perf_counter() - t0) * 1000)
        times: list[float] = []
        for i in range(reps):
            step(i + (reps if "LIMIT" in sql else 0))
        return round(statistics.median(times), 3)

    rec["count_after_write_ms"] = after_write("SELECT count(*) FROM v")
    rec["limit10_after_write_ms"] = after_write("SELECT * FROM v LIMIT 10")
    assert s.execute("SELECT count(*) FROM v").fetchone()[0] == \
        plain.execute("SELECT count(*) FROM orders o JOIN customers c ON o.cust = c.id").fetchone()[0] + 2 * reps
    bulk = f"INSERT INTO orders SELECT {30 * n} + i, i % {custs}, 3.5 FROM range(100000) r(i)"
    t0 = time.perf_counter()
    s.execute(bulk)
    rec["insert_select_100k_s"] = round(time.perf_counter() - t0, 3)
    t0 = time.perf_counter()
    plain.execute(bulk)
    rec["insert_select_100k_plain_s"] = round(time.perf_counter() - t0, 4)
    rows = [(30 * n + i, i % custs, 3.5) for i in range(100_000)]
    view = ivm_layer.compile_view(VIEW.split(" AS ", 1)[1], {"orders": ["id", "cust", "amount"],
                                                             "customers": ["id", "region"]})
    view.apply({"customers": [((i, f"region {i % 7}"), 1) for i in range(custs)],
                "orders": [((i, i % custs, 0.5), 1) for i in range(n)]})
    t0 = time.perf_counter()
    view.apply({"orders": [(r, 1) for r in rows]})
    rec["engine_100k_s"] = round(time.perf_counter() - t0, 3)
    s.close()
    plain.close()
    return rec


def measure_postgres(url: str, n: int, reps: int, state_dir: str) -> dict:
    """The same figures through a PostgreSQL session (where they apply): a 1-row INSERT through
    the session until the view has it (``sync()``), next to the INSERT alone on psycopg; reads
    right after a write; a 1-row write followed by a join of the view with a table (the
    served view's TEMP table is patched, not rebuilt)."""
    import psycopg

    import ivm_layer

    w = psycopg.connect(url, autocommit=True)
    for t in ("orders", "customers"):
        w.execute(f"DROP TABLE IF EXISTS {t}")
    _setup(lambda q: w.execute(q.replace("range(", "generate_series(0, -1 + ").replace(" r(i)", " AS r(i)")
                               .replace("DOUBLE", "double precision")), n)
    s = ivm_layer.connect(url, state_dir=state_dir, set_replica_identity=True, session=f"bench{n}")
    custs = max(n // 10, 1)
    rec: dict = {"n": n, "backend": "postgresql"}
    t0 = time.perf_counter()
    s.execute(VIEW)
    rec["create_view_s"] = round(time.perf_counter() - t0, 3)
    base = 10 * n

    def ins_sync(i):
        s.execute(f"INSERT INTO orders VALUES ({base + i}, {i % custs}, 1.5)")
        s.sync()

    rec["insert_sync_ms"] = _median_ms(ins_sync, reps)
    rec["insert_plain_ms"] = _median_ms(lambda i: w.execute(f"INSERT INTO orders VALUES ({base + reps + i}, 1, 1.5)"), reps)
    s.sync()

    def after_write(sql, offset):
        times: list[float] = []
        for i in range(reps):
            s.execute(f"INSERT INTO orders VALUES ({20 * n + offset + i}, {i % custs}, 2.5)")
            s.sync()
            t0 = time.perf_counter()
            s.execute(sql).fetchall()
            times.append((time.perf_counter() - t0) * 1000)
        return round(statistics.median(times), 3)

    rec["count_after_write_ms"] = after_write("SELECT count(*) FROM v", 0)
    rec["limit10_after_write_ms"] = after_write("SELECT * FROM v LIMIT 10", reps)
    rec["join_after_write_ms"] = after_write(
        "SELECT c.region, count(*) FROM v JOIN customers c ON v.cust = c.id WHERE c.id < 5 GROUP BY c.region", 2 * reps)
    s.close(drop=True)
    for t in ("orders", "customers"):
        w.execute(f"DROP TABLE IF EXISTS {t}")
    w.close()
    return rec


def stream_race(statements: int, batch: int = 200, history: int = 100_000, view: str = "join") -> dict:
    """The demo-shaped stream: ``statements`` INSERTs of ``batch`` rows, each followed by
    ``SELECT count(*) FROM v``, through a session (the view kept fresh) and through plain
    DuckDB recomputing the view (``CREATE OR REPLACE TABLE v AS …``) before its count. ``view``:
    ``join`` (orders ⋈ customers over ``history`` orders) or ``fraud`` (the demo's view over a
    ``history``-row card table). Returns per-statement milliseconds and their ratio."""
    import duckdb

    import ivm_layer
    from ivm_layer import demo

    if view == "fraud":
        body = demo.fraud_sql()
        setup = [demo.TABLE]
        rows = list(demo.transactions(history + statements * batch, 7, demo.ACCOUNTS))
        hist, new = rows[:history], rows[history:]
        table = "trans"
    else:
        body = VIEW.split(" AS ", 1)[1]
        custs = max(history // 10, 1)
        setup = ["CREATE TABLE orders (id BIGINT, cust BIGINT, amount DOUBLE)",
                 "CREATE TABLE customers (id BIGINT, region VARCHAR)",
                 f"INSERT INTO customers SELECT i, 'region ' || (i % 7) FROM range({custs}) r(i)"]
        hist = [(i, i % custs, (i % 1000) * 0.5) for i in range(history)]
        new = [(history + i, i % custs, 1.5) for i in range(statements * batch)]
        table = "orders"

    def values(part):
        return f"INSERT INTO {table} VALUES " + ", ".join("(" + ", ".join(map(repr, r)) + ")" for r in part)

    def load(execute):
        for q in setup:
            execute(q)
        for i in range(0, len(hist), 50_000):
            execute(values(hist[i:i + 50_000]))

    stmts = [values(new[i:i + batch]) for i in range(0, len(new), batch)]
    s = ivm_layer.connect()
    load(s.execute)
    s.execute(f"CREATE INCREMENTAL VIEW v AS {body}")
    s.execute("SELECT count(*) FROM v").fetchall()  # warm
    t0 = time.perf_counter()
    for q in stmts:
        s.execute(q)
        n_session = s.execute("SELECT count(*) FROM v").fetchone()[0]
    t_session = time.perf_counter() - t0
    s.close()
    con = duckdb.connect()
    load(con.execute)
    t0 = time.perf_counter()
    done = 0
    for q in stmts:
        con.execute(q)
        con.execute(f"CREATE OR REPLACE TABLE v AS {body}")
        n_duck = con.execute("SELECT count(*) FROM v").fetchone()[0]
        done += 1
        if time.perf_counter() - t0 > 60:
            break
    t_duck = time.perf_counter() - t0
    con.close()
    ms_s = 1000 * t_session / len(stmts)
    ms_d = 1000 * t_duck / done
    return {"view": view, "history": history, "statements": len(stmts), "batch": batch,
            "session_ms_per_statement": round(ms_s, 3), "duckdb_ms_per_statement": round(ms_d, 3),
            "duckdb_statements": done, "ratio": round(ms_d / ms_s, 2),
            "match": done != len(stmts) or n_session == n_duck}


def demo_race(n: int) -> dict:
    from ivm_layer import demo

    if not hasattr(demo, "race"):
        return {}
    with open(os.devnull, "w") as null:
        return demo.race(n=n, out=null, err=null)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ivm bench session", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="20000,200000,1000000", help="rows of the tracked table")
    p.add_argument("--reps", type=int, default=30, help="statements per latency median")
    p.add_argument("--demo", type=int, default=2_000, help="demo stream length after its 100k-row history (0: skip)")
    p.add_argument("--stream", type=int, default=100, help="statements of the demo-shaped stream "
                   "(200-row INSERTs, a count after each) for the join and the fraud view (0: skip)")
    p.add_argument("--out", default="bench-results/session.json")
    p.add_argument("--postgres", metavar="URL", help="also measure PostgreSQL sessions on this server "
                   "(wal_level=logical; tables orders/customers are created and dropped)")
    p.add_argument("--postgres-only", action="store_true", help="skip the DuckDB figures")
    args = p.parse_args(argv)
    results = {"sizes": [], "postgres": [], "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    for n in (int(x) for x in args.sizes.split(",")):
        if not args.postgres_only:
            rec = measure(n, args.reps)
            results["sizes"].append(rec)
            print(json.dumps(rec), flush=True)
        if args.postgres:
            import tempfile

            with tempfile.TemporaryDirectory() as state:
                rec = measure_postgres(args.postgres, n, args.reps, state)
            results["postgres"].append(rec)
            print(json.dumps(rec), flush=True)
    if args.demo:
        results["demo"] = demo_race(args.demo)
        print(json.dumps({"demo": results["demo"]}), flush=True)
    if args.stream:
        results["stream"] = [stream_race(args.stream, view=v) for v in ("join", "fraud")]
        print(json.dumps({"stream": results["stream"]}), flush=True)
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
