"""Measure the daemon (not a test) on a throwaway PostgreSQL and ``local[2]``:

- cold start (to the snapshot batch applied) and its split (process start and imports, source
  catalog, engine recovery, JVM/SparkSession, query start: the daemon's own ``startup``
  figures), the snapshot batch;
- the per-batch floor: one-row transactions, commit → applied, and the time inside the batch;
- sustained changes/s on a backlog (``--changes``, 500-row transactions, the ``source`` sink),
  then commit-to-view latency of one-row commits right after that backlog;
- PostgreSQL while the daemon idles: CPU seconds of the server's processes and new sessions
  over ``--idle`` seconds;
- restart after ``kill -9`` (to the first batch applied) and the engine recovery time;
- the in-process PostgreSQL session on the same data and changes (a MATERIALIZED view),
  for comparison (``--no-session`` skips it).

    .venv/bin/python ivm_layer/bench/daemon_measure.py [--changes 50000] [--shards 1] [--view 3way|simple]
        [--quick] [--shared-buffers 512MB] [--out result.json]

``--shards 2`` runs the same with two shards; ``--shards 1,2`` runs one shard, then two, on the
same server (``daemon_shards_1``, ``daemon_shards_2``; each with the per-shard ``routed_rows``,
``state_rows`` and bytes shipped to the shards' tasks, per batch and per change, from ``--status``;
``planner_shipped_per_batch``: the bytes of one batch's partitions as the planner pickles them, no
Spark); ``--compare-root DIR`` runs the daemon of another source tree next to this one's at each
shard count (a before/after on the same server); ``--sink-commit pipelined,spark`` runs the
daemon with each ``sink_commit`` in turn (``daemon_pipelined``, ``daemon_spark``: the cost of
committing a batch to Spark only once its sinks hold it); ``--standalone`` starts a Spark
standalone master with two one-core workers on 127.0.0.1 (ivm_layer/bench/standalone_cluster.py) and
runs on it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import time

import psycopg

from .daemon_workload import ROOT, Daemon
from .pg_cluster import SERVER_SETTINGS, Cluster

#: the measured views: a 3-way join with an inequality (about 10 view rows per change of r)
#: and a simple equi-join (one view row per change of r)
SELECTS = {"3way": "SELECT r.a, r.k, s.x, t.y, t.tag FROM r JOIN s ON r.k = s.k JOIN t ON s.x < t.y",
           "simple": "SELECT r.a, r.k, s.x FROM r JOIN s ON r.k = s.k"}


def _lsn(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def load(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("CREATE TABLE r (a int, k int); CREATE TABLE s (k int, x int); CREATE TABLE t (y int, tag text)")
        c.execute("INSERT INTO r SELECT g, g % 2000 FROM generate_series(1, 20000) g")
        c.execute("INSERT INTO s SELECT g % 2000, g FROM generate_series(1, 2000) g")
        c.execute("INSERT INTO t SELECT g * 100, 'x' FROM generate_series(1, 20) g")


def backlog(url: str, n: int) -> int:
    """``n`` inserts into r in 500-row transactions; returns a WAL position inside the last one,
    before its commit (past every earlier commit; its own commit ends after it — read after the
    commit, the position could include WAL the daemon's sinks write meanwhile, which no batch
    ever reaches)."""
    with psycopg.connect(url, autocommit=True) as c:
        starts = list(range(0, n, 500))
        for lo in starts[:-1]:
            c.execute("INSERT INTO r SELECT g, g %% 2000 FROM generate_series(%s, %s) g",
                      [100_000 + lo, 100_000 + min(n, lo + 500) - 1])
        with c.transaction():
            c.execute("INSERT INTO r SELECT g, g %% 2000 FROM generate_series(%s, %s) g",
                      [100_000 + starts[-1], 100_000 + n - 1])
            return _lsn(c.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0])


def server_cpu_seconds(cluster: Cluster) -> float:
    """utime + stime of the postmaster and its children (Linux /proc)."""
    with open(cluster.data / "postmaster.pid") as f:
        root = int(f.readline())
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(pid) == root or int(fields[1]) == root:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def sessions(url: str) -> int:
    with psycopg.connect(url) as c:
        return int(c.execute("SELECT sum(sessions) FROM pg_stat_database").fetchone()[0] or 0)


def one_row_latencies(d: Daemon, url: str, n: int = 5) -> tuple[list[float], list[float]]:
    lat, inner = [], []
    with psycopg.connect(url, autocommit=True) as c:
        for i in range(n):
            before = d.status()["batches"]
            t0 = time.monotonic()
            c.execute("INSERT INTO r VALUES (%s, %s)", [-i, i])
            st = d.wait(lambda s, b=before: s["batches"] > b, 120, "a small batch")
            lat.append(round(time.monotonic() - t0, 2))
            inner.append(round(st["last_batch"]["seconds"], 3))
    return lat, inner


def measure_daemon(cluster: Cluster, args, tmp: str) -> dict:
    res: dict = {}
    url = cluster.create_database()
    load(url)
    views = os.path.join(tmp, "views.sql")
    with open(views, "w") as f:
        f.write(f"CREATE INCREMENTAL MATERIALIZED VIEW v3 AS {SELECTS[args.view]};\n")
    dargs = ["--source", url, "--views", views, "--set-replica-identity", "--master", args.master,
             "--trigger", "1s", "--shards", str(args.shards), "--sink-commit", args.sink_commit]
    ckpt, log = os.path.join(tmp, "ckpt"), os.path.join(tmp, "daemon.log")
    d = Daemon(dargs, ckpt, log, root=args.daemon_root).start()
    try:
        st = d.wait(lambda s: s.get("batches", 0) >= 1, 600, "snapshot")
        res["base_rows"] = BASE_ROWS
        res["snapshot_routed_rows"] = routed_in_log(log)
        res["routing"] = st.get("routing")
        res["snapshot_shards"] = st.get("shards") if isinstance(st.get("shards"), list) else None
        res["cold_start_to_snapshot_applied_s"] = round(time.monotonic() - d.started, 1)
        res["startup_until_query_started_s"] = st.get("startup_seconds")
        res["startup_split_s"] = st.get("startup")
        res["snapshot_batch_s"] = round(st["last_batch"]["seconds"], 3)
        res["snapshot_rows"] = st["last_batch"]["rows_in"]
        lat, inner = one_row_latencies(d, url)
        res["one_row_commit_to_applied_s"], res["one_row_batch_inside_foreachBatch_s"] = lat, inner
        # sustained: a backlog of changes in 500-row transactions
        n = args.changes
        before = d.status()
        t0 = time.monotonic()
        marker = backlog(url, n)
        written = time.monotonic() - t0
        st = d.wait_lsn(marker - 1, timeout=1800)
        total = time.monotonic() - t0
        res["backlog_shards"] = shard_deltas(before, st)
        res["sustained"] = {"changes": n, "write_s": round(written, 1), "applied_after_s": round(total, 1),
                            "changes_per_s": round(n / total), "view_rows": st["last_batch"].get("view_rows")}
        res["sustained"]["batches"] = batch_splits(log)
        res["sustained"]["per_batch"] = per_batch(log)
        lat, inner = one_row_latencies(d, url, 3)
        res["after_backlog_one_row_commit_to_applied_s"] = lat
        if args.quick:
            d.terminate()
            return res
        # idle: PostgreSQL's CPU and the sessions opened while nothing changes
        time.sleep(2)
        cpu0, s0, t0 = server_cpu_seconds(cluster), sessions(url), time.monotonic()
        time.sleep(args.idle)
        secs = time.monotonic() - t0
        res["idle"] = {"seconds": round(secs, 1),
                       "server_cpu_percent": round(100 * (server_cpu_seconds(cluster) - cpu0) / secs, 1),
                       "new_sessions": sessions(url) - s0 - 1}  # minus the one that counts
        with psycopg.connect(url) as c:
            res["idle"]["slot_retained_bytes"] = int(c.execute(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn) FROM pg_replication_slots "
                "WHERE database = current_database()").fetchone()[0])
        # crash and recovery
        d.kill9()
        with psycopg.connect(url, autocommit=True) as c:
            c.execute("INSERT INTO r SELECT g, g % 2000 FROM generate_series(1, 1000) g")
        d = Daemon(dargs, ckpt, log).start()
        d.wait(lambda s: s.get("batches", 0) >= 1, 600, "first batch after restart")
        res["restart_to_first_batch_applied_s"] = round(time.monotonic() - d.started, 1)
        with open(log) as f:
            rec = [ln for ln in f if "recovered the engine" in ln]
        res["engine_recovery_log"] = rec[-1].strip() if rec else None
        d.terminate()
    finally:
        if d.proc.poll() is None:
            d.kill9()
    return res


#: the rows ``load`` writes (r, s, t)
BASE_ROWS = 20_000 + 2_000 + 20


def routed_in_log(log: str) -> int | None:
    """The snapshot batch's routed rows as the daemon logged them (any version's log line)."""
    import re

    with open(log) as f:
        for line in f:
            m = re.search(r"batch 0: (\d+) (?:routed )?rows in", line)
            if m:
                return int(m.group(1))
    return None


def shard_deltas(before: dict | None, after: dict) -> dict | None:
    """Per shard over the backlog: rows routed, bytes shipped to its tasks, rows held at the
    end; and the bytes shipped per batch and per change (``--status``'s ``shards``)."""
    b_sh, a_sh = (before or {}).get("shards"), after.get("shards")
    if not isinstance(a_sh, list) or not a_sh:
        return None
    prev = {x["shard"]: x for x in b_sh} if isinstance(b_sh, list) else {}
    per = [{"shard": x["shard"], "routed_rows": x["routed_rows"] - prev.get(x["shard"], {}).get("routed_rows", 0),
            "shipped_bytes": x["shipped_bytes"] - prev.get(x["shard"], {}).get("shipped_bytes", 0),
            "state_rows": x["state_rows"]} for x in a_sh]
    batches = after["batches"] - (before or {}).get("batches", 0)
    changes = after.get("changes_in", 0) - (before or {}).get("changes_in", 0)
    shipped = sum(x["shipped_bytes"] for x in per)
    return {"per_shard": per, "batches": batches, "changes_in": changes, "shipped_bytes": shipped,
            "shipped_bytes_per_batch": round(shipped / batches) if batches else None,
            "shipped_bytes_per_change": round(shipped / changes, 1) if changes else None}


def shipped_by_planner(root: str, shards: int, changes: int, view: str) -> dict:
    """Without Spark: the bytes Spark ships to the tasks of one change batch of ``changes``
    inserts into r (500-row transactions, as :func:`backlog`), as the ``ivm-cdc-shards``
    planner of the tree ``root`` builds its partitions (each pickled as Spark pickles it)."""
    import subprocess
    import sys

    code = f"""
import datetime, json, pickle, tempfile
from ivm_layer.daemon import shardsource
from ivm_layer.daemon.state import ViewDef
from ivm_layer.io.postgres.pgoutput import Transaction
types = {{"r": {{"a": "integer", "k": "integer"}}, "s": {{"k": "integer", "x": "integer"}},
          "t": {{"y": "integer", "tag": "text"}}}}
d = ViewDef("v3", {SELECTS[view]!r}, True, ["r", "s", "t"] if " t " in {SELECTS[view]!r} else ["r", "s"])
spec = shardsource.shard_spec([d], types, {shards}, tempfile.mkdtemp(), 100)
reader = shardsource.ShardedCdcStreamReader({{"url": "postgresql://x", "slot": "s", "publication": "p",
                                             "tables": ",".join(d.tables), "shardSpec": spec}})
now = datetime.datetime.now(datetime.UTC)
txns = []
for lo in range(0, {changes}, 500):
    t = Transaction(xid=lo, final_lsn=lo + 1, commit_lsn=lo + 1, end_lsn=lo + 1, commit_time=now)
    t.changes["r"] = [((100_000 + g, g % 2000), 1) for g in range(lo, min({changes}, lo + 500))]
    txns.append(t)
parts = reader.route(0, {changes}, txns)
print(json.dumps({{"tasks": len(parts), "bytes": sum(len(pickle.dumps(p, protocol=5)) for p in parts)}}))
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=root, env=dict(os.environ, PYTHONPATH=root),
                         capture_output=True, text=True, check=True).stdout
    got = json.loads(out)
    got["bytes_per_change"] = round(got["bytes"] / changes, 1)
    return got


def batch_splits(log: str) -> list[str]:
    """The backlog's batches as the daemon logged them (rows, seconds, changes/s, split)."""
    with open(log) as f:
        lines = [ln.strip() for ln in f if "view changes out" in ln]
    return [ln[ln.index("batch "):] for ln in lines if " 0 rows in" not in ln][-12:]


def per_batch(log: str, min_rows: int = 100) -> dict:
    """Means over the backlog's batches (≥ ``min_rows`` rows in) of the one-shard daemon's log
    lines: seconds in the query (what sets the throughput) and until the sinks held the batch."""
    import re

    pat = re.compile(r"batch (\d+): (\d+) rows in, .*? in the sinks after ([\d.]+) s, ([\d.]+) s in the query")
    with open(log) as f:
        found = [(int(m.group(2)), float(m.group(3)), float(m.group(4))) for m in map(pat.search, f) if m]
    found = [x for x in found if x[0] >= min_rows]
    if not found:
        return {}
    n = len(found)
    return {"batches": n, "mean_rows": round(sum(x[0] for x in found) / n),
            "mean_query_s": round(sum(x[2] for x in found) / n, 3),
            "mean_until_sinks_hold_s": round(sum(x[1] for x in found) / n, 3),
            "query_s_per_1k_rows": round(1000 * sum(x[2] for x in found) / sum(x[0] for x in found), 4)}


def measure_session(cluster: Cluster, n: int, tmp: str, select: str) -> dict:
    """The in-process PostgreSQL session maintaining the same MATERIALIZED view over the same
    data and backlog (from the first write until ``sync()`` returns)."""
    import ivm_layer

    url = cluster.create_database()
    load(url)
    s = ivm_layer.connect(url, set_replica_identity=True, state_dir=os.path.join(tmp, "session-state"))
    try:
        t0 = time.monotonic()
        s.execute(f"CREATE INCREMENTAL MATERIALIZED VIEW v3 AS {select}")
        created = time.monotonic() - t0
        t0 = time.monotonic()
        backlog(url, n)
        s.sync(timeout=1800)
        total = time.monotonic() - t0
    finally:
        s.close(drop=True)
    return {"create_view_s": round(created, 1), "changes": n, "applied_after_s": round(total, 1),
            "changes_per_s": round(n / total)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--changes", type=int, default=50_000)
    ap.add_argument("--shards", default="1", help="shards, or a list to compare: 1,2")
    ap.add_argument("--standalone", action="store_true",
                    help="start a Spark standalone master with two one-core workers on 127.0.0.1 and use it")
    ap.add_argument("--idle", type=float, default=10.0, help="seconds of idle measurement")
    ap.add_argument("--no-session", action="store_true", help="skip the in-process session comparison")
    ap.add_argument("--master", default="local[2]", help="Spark master, e.g. spark://127.0.0.1:7077")
    ap.add_argument("--view", choices=sorted(SELECTS), default="3way")
    ap.add_argument("--quick", action="store_true",
                    help="stop after the backlog (skip the idle and kill -9 measurements)")
    ap.add_argument("--shared-buffers", help="PostgreSQL shared_buffers for the run (default: the test "
                    "cluster's 64MB), e.g. 512MB")
    ap.add_argument("--sink-commit", default="pipelined",
                    help="the daemon's sink_commit, or a list to compare: pipelined,spark")
    ap.add_argument("--daemon-root", help="run the daemon from this source tree (a baseline, e.g. "
                    "`git archive main | tar -x -C DIR`); default: this tree")
    ap.add_argument("--compare-root", help="also run each shard count with the daemon of this tree "
                    "(keys daemon_shards_N_baseline), alternating with this tree's, on the same server")
    ap.add_argument("--out")
    args = ap.parse_args()
    res: dict = {"shards": args.shards, "view": args.view, "master": args.master,
                 "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}
    if args.shared_buffers:  # the test cluster's 64MB is small for a table of millions of view rows
        SERVER_SETTINGS["shared_buffers"] = args.shared_buffers
    res["shared_buffers"] = SERVER_SETTINGS["shared_buffers"]
    with Cluster() as cluster, contextlib.ExitStack() as stack:
        cluster.wait_ready()
        if args.standalone:   # a master and two one-core workers on 127.0.0.1, started here
            from .standalone_cluster import standalone_cluster

            args.master = res["master"] = stack.enter_context(standalone_cluster(workers=2))
        tmp = tempfile.mkdtemp(prefix="ivm-measure-")
        shard_counts = [int(x) for x in str(args.shards).split(",")]
        commits = str(args.sink_commit).split(",")
        roots = [(args.compare_root, "_baseline"), (args.daemon_root, "")] if args.compare_root else \
            [(args.daemon_root, "")]
        for n in shard_counts:   # --shards 1,2: each next to the other, on the same cluster
            for root, suffix in roots:
                args.daemon_root = root
                for i, mode in enumerate(commits):   # pipelined,spark,pipelined,spark: alternated
                    args.shards, args.sink_commit = n, mode
                    key = "daemon" + ("" if len(shard_counts) == 1 else f"_shards_{n}") + \
                        ("" if len(commits) == 1 else f"_{mode}") + \
                        (f"_{commits[:i].count(mode) + 1}" if commits.count(mode) > 1 else "") + suffix
                    os.makedirs(os.path.join(tmp, key))
                    try:
                        res[key] = measure_daemon(cluster, args, os.path.join(tmp, key))
                    except AssertionError as e:   # a daemon that failed (e.g. a Python worker that
                        # did not start in time on a loaded machine): recorded, the others still run
                        res[key] = {"error": str(e).splitlines()[0][:300]}
                    res[key]["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
                    if n > 1:   # the planner's partitions for one backlog-sized batch, no Spark
                        res[key]["planner_shipped_per_batch"] = shipped_by_planner(
                            root or ROOT, n, min(args.changes, 10_000), args.view)
        if not args.no_session:
            res["session"] = measure_session(cluster, args.changes, tmp, SELECTS[args.view])
    res["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(res, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
