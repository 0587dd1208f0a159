"""Measure the daemon (not a test): cold start, per-batch overhead, sustained changes/s and
recovery time after ``kill -9``, on a throwaway PostgreSQL and ``local[2]``.

    .venv/bin/python bench/daemon_measure.py [--changes 50000] [--out result.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import psycopg

# the daemon test harness and the throwaway PostgreSQL cluster live with the tests
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from daemon_workload import Daemon
from pg_cluster import Cluster

VIEWS = ("CREATE INCREMENTAL MATERIALIZED VIEW v3 AS SELECT r.a, r.k, s.x, t.y, t.tag "
         "FROM r JOIN s ON r.k = s.k JOIN t ON s.x < t.y;\n")


def _lsn(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--changes", type=int, default=50_000)
    ap.add_argument("--out")
    args = ap.parse_args()
    res: dict = {}
    with Cluster() as cluster:
        cluster.wait_ready()
        url = cluster.create_database()
        tmp = tempfile.mkdtemp(prefix="ivm-measure-")
        with psycopg.connect(url, autocommit=True) as c:
            c.execute("CREATE TABLE r (a int, k int); CREATE TABLE s (k int, x int); CREATE TABLE t (y int, tag text)")
            c.execute("INSERT INTO r SELECT g, g % 2000 FROM generate_series(1, 20000) g")
            c.execute("INSERT INTO s SELECT g % 2000, g FROM generate_series(1, 2000) g")
            c.execute("INSERT INTO t SELECT g * 100, 'x' FROM generate_series(1, 20) g")
        views = os.path.join(tmp, "views.sql")
        with open(views, "w") as f:
            f.write(VIEWS)
        dargs = ["--source", url, "--views", views, "--set-replica-identity", "--master", "local[2]",
                 "--trigger", "1s"]
        ckpt, log = os.path.join(tmp, "ckpt"), os.path.join(tmp, "daemon.log")
        d = Daemon(dargs, ckpt, log).start()
        try:
            st = d.wait(lambda s: s.get("batches", 0) >= 1, 600, "snapshot")
            res["cold_start_to_snapshot_applied_s"] = round(time.monotonic() - d.started, 1)
            res["startup_until_query_started_s"] = st.get("startup_seconds")
            res["snapshot_batch_s"] = round(st["last_batch"]["seconds"], 3)
            res["snapshot_rows"] = st["last_batch"]["rows_in"]
            # per-batch overhead: single-row transactions, commit → applied
            lat, inner = [], []
            with psycopg.connect(url, autocommit=True) as c:
                for i in range(5):
                    before = d.status()["batches"]
                    t0 = time.monotonic()
                    c.execute("INSERT INTO r VALUES (%s, %s)", [-i, i])
                    st = d.wait(lambda s, b=before: s["batches"] > b, 120, "a small batch")
                    lat.append(time.monotonic() - t0)
                    inner.append(st["last_batch"]["seconds"])
            res["one_row_commit_to_applied_s"] = [round(x, 2) for x in lat]
            res["one_row_batch_inside_foreachBatch_s"] = [round(x, 3) for x in inner]
            # sustained: a backlog of changes in 500-row transactions
            n = args.changes
            t0 = time.monotonic()
            with psycopg.connect(url, autocommit=True) as c:
                for lo in range(0, n, 500):
                    c.execute("INSERT INTO r SELECT g, g %% 2000 FROM generate_series(%s, %s) g",
                              [100_000 + lo, 100_000 + min(n, lo + 500) - 1])
                marker = _lsn(c.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0])
            written = time.monotonic() - t0
            st = d.wait_lsn(marker - 1, timeout=900)
            total = time.monotonic() - t0
            res["sustained"] = {"changes": n, "write_s": round(written, 1), "applied_after_s": round(total, 1),
                                "changes_per_s": round(n / total), "view_rows": st["last_batch"].get("view_rows")}
            # crash and recovery
            d.kill9()
            with psycopg.connect(url, autocommit=True) as c:
                c.execute("INSERT INTO r SELECT g, g % 2000 FROM generate_series(1, 1000) g")
            d = Daemon(dargs, ckpt, log).start()
            st = d.wait(lambda s: s.get("batches", 0) >= 1, 600, "first batch after restart")
            res["restart_to_first_batch_applied_s"] = round(time.monotonic() - d.started, 1)
            with open(log) as f:
                rec = [ln for ln in f if "recovered the engine" in ln]
            res["engine_recovery_log"] = rec[-1].strip() if rec else None
            d.terminate()
        finally:
            if d.proc.poll() is None:
                d.kill9()
    print(json.dumps(res, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
