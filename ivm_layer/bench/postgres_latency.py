"""PostgreSQL change streams end to end: throughput and commit-to-view latency.

    python -m ivm_layer.bench.postgres_latency                 # starts a throwaway PG 15 cluster
    python -m ivm_layer.bench.postgres_latency --url postgresql://…  --seconds 20 --rate 1000

1. **Throughput**: a view ``SELECT … FROM t JOIN d ON t.k = d.k WHERE t.v < d.lim`` is kept
   by a session; a writer commits ``--bulk`` row changes (inserts, then updates of the same
   rows, in transactions of 1,000 rows); changes/s = changes / (time from the first write
   until ``sync()`` returns). Also reported: the time ``sync()`` needed after the writer
   finished (how far the consumer was behind).
2. **Latency** at a steady ``--rate`` changes/s (10-row transactions every 10 ms,
   ``synchronous_commit=on`` as in a default server): for each transaction, the time from
   the server clock when its rows were written (``clock_timestamp()`` in the INSERT, just
   before its commit; the server runs on the same host) to the view change reaching a
   ``subscribe`` callback (the consumer calls ``poll(0.005)`` in a loop). p50/p95/p99/max.

Writes a JSON record under ``bench-results/``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import threading
import time
from pathlib import Path

import psycopg


def _cluster():
    from .pg_cluster import Cluster

    c = Cluster().start()
    c.wait_ready()
    return c


def _setup(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as w:
        w.execute("DROP TABLE IF EXISTS t; DROP TABLE IF EXISTS d")
        w.execute("CREATE TABLE t (id bigint, k int, v int, ts double precision)")
        w.execute("CREATE TABLE d (k int, lim int, name text)")
        w.execute("ALTER TABLE t REPLICA IDENTITY FULL; ALTER TABLE d REPLICA IDENTITY FULL")
        w.execute("INSERT INTO d SELECT i, 500, 'd' || i FROM generate_series(0, 99) i")


VIEW = "SELECT t.id, t.ts, d.name FROM t JOIN d ON t.k = d.k WHERE t.v < d.lim"


def throughput(url: str, n: int, state: str) -> dict:
    import ivm_layer

    _setup(url)
    s = ivm_layer.connect(url, state_dir=state, session="bench_tp")
    s.execute(f"CREATE INCREMENTAL VIEW tp AS {VIEW}")
    w = psycopg.connect(url, autocommit=True, options="-c synchronous_commit=on")
    t0 = time.perf_counter()
    batch = 1000
    for start in range(0, n // 2, batch):
        w.execute("INSERT INTO t SELECT i, i %% 100, i %% 1000, 0 FROM generate_series(%s::bigint, %s::bigint) i",
                  [start, min(n // 2, start + batch) - 1])
    for start in range(0, n // 4, batch):                # each update = delete + insert
        w.execute("UPDATE t SET v = v + 1 WHERE id BETWEEN %s::bigint AND %s::bigint", [start, min(n // 4, start + batch) - 1])
    t_written = time.perf_counter()
    s.sync(timeout=600)
    t_done = time.perf_counter()
    rows = len(s.view("tp"))
    want = w.execute(f"SELECT count(*) FROM ({VIEW}) q").fetchone()[0]
    s.close(drop=True)
    w.close()
    changes = n // 2 + 2 * (n // 4)
    return {"changes": changes, "seconds": round(t_done - t0, 3),
            "changes_per_s": round(changes / (t_done - t0)),
            "write_seconds": round(t_written - t0, 3), "catch_up_seconds_after_writes": round(t_done - t_written, 3),
            "view_rows": rows, "view_rows_expected": want}


def latency(url: str, seconds: float, rate: int, state: str) -> dict:
    import ivm_layer

    _setup(url)
    s = ivm_layer.connect(url, state_dir=state, session="bench_lat")
    s.execute(f"CREATE INCREMENTAL VIEW lat AS {VIEW}")
    committed: set[int] = set()        # transaction numbers written
    seen: dict[int, float] = {}

    def on_change(change):
        now = time.time()      # same host as the server: the row's own timestamp is comparable
        for row, k in change:
            if k > 0:
                seen.setdefault(row[0] // 10, now - row[1])

    s.subscribe("lat", on_change)
    stop = threading.Event()
    per_txn = 10
    interval = per_txn / rate

    def writer():
        with psycopg.connect(url, autocommit=True, options="-c synchronous_commit=on") as w:
            nxt = time.perf_counter()
            txn = 0
            while not stop.is_set():
                base = txn * per_txn
                w.execute("INSERT INTO t SELECT i, i %% 100, 1, extract(epoch FROM clock_timestamp()) "
                          "FROM generate_series(%s::bigint, %s::bigint) i", [base, base + per_txn - 1])
                committed.add(txn)
                txn += 1
                nxt += interval
                delay = nxt - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)

    th = threading.Thread(target=writer, daemon=True)
    t0 = time.perf_counter()
    th.start()
    while time.perf_counter() - t0 < seconds:
        s.poll(0.005)
    stop.set()
    th.join()
    s.sync()
    elapsed = time.perf_counter() - t0
    lats = sorted(seen[t] * 1000 for t in committed if t in seen)
    missing = sum(1 for t in committed if t not in seen)
    s.close(drop=True)
    q = statistics.quantiles(lats, n=100)
    return {"target_changes_per_s": rate, "achieved_changes_per_s": round(len(committed) * per_txn / elapsed),
            "transactions": len(committed), "missing": missing,
            "latency_ms": {"min": round(lats[0], 2), "p50": round(q[49], 2), "p95": round(q[94], 2), "p99": round(q[98], 2),
                           "max": round(lats[-1], 2)}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="a PostgreSQL database with wal_level=logical (default: a throwaway cluster)")
    ap.add_argument("--bulk", type=int, default=200_000, help="row changes for the throughput run")
    ap.add_argument("--seconds", type=float, default=15.0, help="duration of the latency run")
    ap.add_argument("--rate", type=int, default=1000, help="changes/s of the latency run")
    ap.add_argument("--out", default="bench-results")
    args = ap.parse_args(argv)
    cluster = None
    url = args.url
    if url is None:
        cluster = _cluster()
        url = cluster.create_database("bench")
    try:
        with tempfile.TemporaryDirectory() as state:
            tp = throughput(url, args.bulk, state)
            print("throughput:", json.dumps(tp))
            lat = latency(url, args.seconds, args.rate, state)
            print("latency:", json.dumps(lat))
        server = psycopg.connect(url).execute("SHOW server_version").fetchone()[0]
    finally:
        if cluster is not None:
            cluster.stop()
    rec = {"benchmark": "postgres_latency", "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "python": platform.python_version(), "cpus": os.cpu_count(), "server": server,
           "throughput": tp, "latency": lat}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"postgres_latency-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}.json"
    path.write_text(json.dumps(rec, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
