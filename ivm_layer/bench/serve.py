"""``ivm bench serve`` / ``python -m bench.serve``: what ``ivm serve`` costs over the wire.

One DuckDB file with ``accts(k BIGINT, owner VARCHAR, bal DECIMAL(12,2))`` of n rows (default
1M) and the parameterized incremental view ``by_k AS SELECT k, owner, bal FROM accts WHERE
k = $k``; ``ivm serve`` runs on it as a child process. Measured in the same run:

- ``point_read``: latency p50/p95/p99 of ``SELECT * FROM by_k WHERE k = $1`` over the wire,
  one client, prepared (pgbench ``-M prepared``, per-transaction log: the C client adds
  almost nothing), beside, in process: plain DuckDB's indexed point query
  (``SELECT … FROM accts WHERE k = ?`` with an ART index on k), the session's SQL read of the
  view and ``view.lookup()``;
- ``reads_per_s``: the same read with 1, 4 and 16 pgbench clients (``-j 2``);
- ``subscribe``: commit → SUBSCRIBE delivery, p50/p99: a writer's 1-row INSERT into
  ``accts`` (psycopg) and a subscriber of a view over it (psycopg streaming, another thread);
  measured from the writer's acknowledgement (and from just before it sent the statement);
- ``write``: a 1-row INSERT through the server (psycopg, prepared) vs the in-process session
  vs plain DuckDB.

Writes JSON (``--out``, default ``bench-results/serve.json``) with the machine, ``uptime``
load before and after, and prints it. Wall-clock figures on a shared machine: compare numbers
of the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q / 100 * len(s)))]


def _summary_ms(values_s: list[float]) -> dict:
    ms = [v * 1000 for v in values_s]
    return {"p50_ms": round(_pct(ms, 50), 4), "p95_ms": round(_pct(ms, 95), 4), "p99_ms": round(_pct(ms, 99), 4),
            "mean_ms": round(statistics.fmean(ms), 4), "n": len(ms)}


def _load() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _machine() -> dict:
    info = {"cpu_count": os.cpu_count(), "python": sys.version.split()[0]}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import duckdb

    info["duckdb"] = duckdb.__version__
    return info


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build(path: str, n: int) -> None:
    import duckdb

    c = duckdb.connect(path)
    c.execute("CREATE TABLE accts (k BIGINT, owner VARCHAR, bal DECIMAL(12,2))")
    c.execute(f"INSERT INTO accts SELECT i, 'owner ' || (i % 1000), (i % 10000) / 100 FROM range({n}) t(i)")
    c.execute("CREATE TABLE feed (id BIGINT, k BIGINT, amt INT)")
    c.close()


def in_process(path: str, n: int, reads: int, rng: random.Random) -> dict:
    """Plain DuckDB (indexed) and the session on a copy of the same file."""
    import duckdb

    import ivm_layer

    plain_path = path + ".plain.duckdb"
    shutil.copy(path, plain_path)
    plain = duckdb.connect(plain_path)
    plain.execute("CREATE INDEX accts_k ON accts (k)")
    keys = [rng.randrange(n) for _ in range(reads)]
    for k in keys[:50]:
        plain.execute("SELECT k, owner, bal FROM accts WHERE k = ?", [k]).fetchall()
    lat = []
    for k in keys:
        t0 = time.perf_counter()
        plain.execute("SELECT k, owner, bal FROM accts WHERE k = ?", [k]).fetchall()
        lat.append(time.perf_counter() - t0)
    out = {"plain_duckdb_indexed_point_query": _summary_ms(lat)}
    wl = []
    for i in range(300):
        t0 = time.perf_counter()
        plain.execute("INSERT INTO feed VALUES (?, ?, ?)", [i, i % n, 1])
        wl.append(time.perf_counter() - t0)
    out["plain_duckdb_insert"] = _summary_ms(wl)
    plain.close()
    os.remove(plain_path)

    sess_path = path + ".session.duckdb"
    shutil.copy(path, sess_path)
    s = ivm_layer.connect("duckdb:///" + sess_path, progress=False)
    t0 = time.perf_counter()
    s.execute("CREATE INCREMENTAL VIEW by_k AS SELECT k, owner, bal FROM accts WHERE k = $k")
    s.execute("CREATE INCREMENTAL VIEW feed_sum AS SELECT k, sum(amt) AS s FROM feed GROUP BY k")
    out["create_view_s"] = round(time.perf_counter() - t0, 3)
    for k in keys[:50]:
        s.execute("SELECT * FROM by_k WHERE k = ?", [k]).fetchall()
    lat = []
    for k in keys:
        t0 = time.perf_counter()
        s.execute("SELECT * FROM by_k WHERE k = ?", [k]).fetchall()
        lat.append(time.perf_counter() - t0)
    out["session_sql_point_read"] = _summary_ms(lat)
    view = s.view("by_k")
    lat = []
    for k in keys:
        t0 = time.perf_counter()
        list(view.lookup(k=k))
        lat.append(time.perf_counter() - t0)
    out["engine_lookup"] = _summary_ms(lat)
    wl = []
    for i in range(300):
        t0 = time.perf_counter()
        s.execute("INSERT INTO feed VALUES (?, ?, ?)", [i, i % n, 1])
        wl.append(time.perf_counter() - t0)
    out["session_insert"] = _summary_ms(wl)
    s.close()
    os.remove(sess_path)
    return out


class Server:
    def __init__(self, path: str, log: str):
        self.port = _free_port()
        self.log = open(log, "ab")  # noqa: SIM115 - closed by stop()
        self.proc = subprocess.Popen([sys.executable, "-m", "ivm_layer", "serve", path, "--port", str(self.port),
                                      "--log-level", "WARNING"], cwd=ROOT, stdout=subprocess.PIPE, stderr=self.log)
        while True:
            line = self.proc.stdout.readline()
            if line.startswith(b"ivm serve:"):
                break
            if not line and self.proc.poll() is not None:
                raise RuntimeError("ivm serve did not start; see " + log)

    @property
    def url(self) -> str:
        return f"postgresql://ivm@127.0.0.1:{self.port}/bench"

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def _pgbench(server: Server, script: str, clients: int, seconds: float | None, transactions: int | None,
             workdir: str, log: bool) -> dict:
    path = os.path.join(workdir, "read.sql")
    with open(path, "w") as f:
        f.write(script)
    env = dict(os.environ, PGHOST="127.0.0.1", PGPORT=str(server.port), PGUSER="ivm", PGDATABASE="bench")
    cmd = ["pgbench", "-n", "-M", "prepared", "-f", path, "-c", str(clients), "-j", str(min(clients, 2))]
    cmd += ["-T", str(int(seconds))] if seconds else ["-t", str(transactions)]
    if log:
        cmd += ["-l", "--log-prefix", os.path.join(workdir, "pgb")]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=workdir, timeout=600, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"pgbench failed: {res.stdout}\n{res.stderr}")
    tps = float(next(x for x in res.stdout.splitlines() if x.startswith("tps")).split("=")[1].split()[0])
    out = {"clients": clients, "tps": round(tps, 1)}
    if log:
        lat = []
        for name in os.listdir(workdir):
            if name.startswith("pgb"):
                with open(os.path.join(workdir, name)) as f:
                    lat += [int(line.split()[2]) / 1e6 for line in f if line.strip()]
                os.remove(os.path.join(workdir, name))
        out.update(_summary_ms(lat))
    return out


def over_the_wire(server: Server, n: int, reads: int, seconds: float, workdir: str) -> dict:
    import psycopg

    script = f"\\set k random(0, {n - 1})\nSELECT * FROM by_k WHERE k = :k;\n"
    out: dict = {}
    _pgbench(server, script, 1, None, 200, workdir, log=False)          # warm up
    out["point_read"] = _pgbench(server, script, 1, None, reads, workdir, log=True)
    out["reads_per_s"] = [_pgbench(server, script, c, seconds, None, workdir, log=False) for c in (1, 4, 16)]
    # a 1-row write through the server
    with psycopg.connect(server.url, autocommit=True) as c:
        wl = []
        for i in range(300):
            t0 = time.perf_counter()
            c.execute("INSERT INTO feed VALUES (%s, %s, %s)", (10_000_000 + i, i % n, 1), prepare=True)
            wl.append(time.perf_counter() - t0)
        out["server_insert"] = _summary_ms(wl)
        out["server_count_read"] = _summary_ms(_timed(lambda i: c.execute("SELECT count(*) FROM by_k WHERE k = %s",
                                                                          (i,), prepare=True).fetchone(), 300))
    out["subscribe"] = subscribe_latency(server, n)
    return out


def _timed(fn, reps: int) -> list[float]:
    lat = []
    for i in range(reps):
        t0 = time.perf_counter()
        fn(i)
        lat.append(time.perf_counter() - t0)
    return lat


def subscribe_latency(server: Server, n: int, commits: int = 300) -> dict:
    """A subscriber of ``feed_sum`` and a writer of 1-row INSERTs into ``feed``."""
    import psycopg

    arrived: dict[int, float] = {}
    ready = threading.Event()
    done = threading.Event()
    sub = psycopg.connect(server.url, autocommit=True)

    def follow() -> None:
        try:
            for row in sub.cursor().stream("SUBSCRIBE feed_sum WITH (SNAPSHOT = false)"):
                now = time.perf_counter()
                ready.set()
                k = row[2]
                if k is not None and k >= 900_000_000:
                    arrived.setdefault(k, now)
                if done.is_set() and len(arrived) >= commits:
                    return
        except psycopg.Error:
            pass
    t = threading.Thread(target=follow, daemon=True)
    t.start()
    sent, acked = {}, {}
    with psycopg.connect(server.url, autocommit=True) as w:
        w.execute("INSERT INTO feed VALUES (0, 899999999, 1)")
        ready.wait(10)
        for i in range(commits):
            k = 900_000_000 + i
            sent[k] = time.perf_counter()
            w.execute("INSERT INTO feed VALUES (%s, %s, 1)", (k, k), prepare=True)
            acked[k] = time.perf_counter()
            time.sleep(0.005)
    done.set()
    deadline = time.monotonic() + 10
    while len(arrived) < commits and time.monotonic() < deadline:
        time.sleep(0.01)
    sub.cancel_safe()
    t.join(5)
    with __import__("contextlib").suppress(Exception):
        sub.close()
    keys = [k for k in sent if k in arrived]
    after_ack = [max(arrived[k] - acked[k], 0.0) for k in keys]
    after_send = [arrived[k] - sent[k] for k in keys]
    out = {"commits": commits, "delivered": len(keys),
           "commit_ack_to_delivery": _summary_ms(after_ack) if keys else None,
           "send_to_delivery": _summary_ms(after_send) if keys else None,
           "delivered_before_ack": sum(1 for k in keys if arrived[k] < acked[k])}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ivm bench serve", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000, help="rows of the table behind the parameterized view")
    p.add_argument("--reads", type=int, default=5000, help="point reads for the latency percentiles")
    p.add_argument("--seconds", type=float, default=5.0, help="seconds per reads/s measurement")
    p.add_argument("--quick", action="store_true", help="100k rows, 1000 reads, 2 s each (a smoke run)")
    p.add_argument("--out", default="bench-results/serve.json")
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args(argv)
    if args.quick:
        args.rows, args.reads, args.seconds = 100_000, 1000, 2.0
    if shutil.which("pgbench") is None:
        print("ivm bench serve: needs pgbench on PATH (Debian: postgresql-client)", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    result = {"rows": args.rows, "machine": _machine(), "load_before": _load(),
              "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    with tempfile.TemporaryDirectory(prefix="ivm-bench-serve-") as d:
        path = os.path.join(d, "bench.duckdb")
        build(path, args.rows)
        result["in_process"] = in_process(path, args.rows, args.reads, rng)
        srv_path = os.path.join(d, "served.duckdb")
        shutil.copy(path, srv_path)
        import psycopg

        server = Server(srv_path, os.path.join(d, "serve.log"))
        try:
            with psycopg.connect(server.url, autocommit=True) as c:
                t0 = time.perf_counter()
                c.execute("CREATE INCREMENTAL VIEW by_k AS SELECT k, owner, bal FROM accts WHERE k = $k")
                c.execute("CREATE INCREMENTAL VIEW feed_sum AS SELECT k, sum(amt) AS s FROM feed GROUP BY k")
                result["server_create_view_s"] = round(time.perf_counter() - t0, 3)
            result["over_the_wire"] = over_the_wire(server, args.rows, args.reads, args.seconds, d)
        finally:
            server.stop()
    result["load_after"] = _load()
    wire = result["over_the_wire"]["point_read"]
    plain = result["in_process"]["plain_duckdb_indexed_point_query"]
    result["ratio_wire_p50_to_plain_duckdb_p50"] = round(wire["p50_ms"] / plain["p50_ms"], 2)
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result, indent=1))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
