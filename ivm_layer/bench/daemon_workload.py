"""Workload and harness for the daemon's tests and measurements: three tables changed by concurrent writers, a
3-way view with an inequality join, the daemon run as a subprocess in its own process group
(so ``kill -9`` of the group kills the driver and its JVM), and a multiset oracle."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import psycopg

# the directory that holds the ivm_layer package (a checkout's root, or site-packages)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SELECT = ("SELECT r.a, r.k, s.x, t.y, t.tag FROM r JOIN s ON r.k = s.k JOIN t ON s.x < t.y "
          "AND t.tag <> 'skip'")
VIEWS = f"CREATE INCREMENTAL MATERIALIZED VIEW v3 AS\n{SELECT};\n"
COLUMNS = "a, k, x, y, tag"
# a grouped view over the same join (single-shard daemons only): its sink columns are typed by
# the source database (COUNT → bigint, SUM(int) → bigint)
AGG_SELECT = ("SELECT r.k, COUNT(*) AS n, SUM(t.y) AS total FROM r JOIN s ON r.k = s.k "
              "JOIN t ON s.x < t.y AND t.tag <> 'skip' GROUP BY r.k")
AGG_VIEWS = f"CREATE INCREMENTAL MATERIALIZED VIEW g3 AS\n{AGG_SELECT};\n"


def valid_changes(rnd: random.Random, steps: int, tables: str, make_row, max_items: int):
    """``steps`` lists of ``(table, row, ±1)``: inserts of ``make_row(rnd, table)`` and deletes of
    rows present (duplicates and NULLs included), so every list is valid after the ones before."""
    have: dict[str, Counter] = {t: Counter() for t in tables}
    for _ in range(steps):
        items = []
        for _ in range(rnd.randint(1, max_items)):
            t = rnd.choice(tables)
            if have[t] and rnd.random() < 0.35:
                row = rnd.choice(sorted(have[t], key=repr))
                have[t][row] -= 1
                have[t] = +have[t]
                items.append((t, row, -1))
            else:
                row = make_row(rnd, t)
                have[t][row] += 1
                items.append((t, row, 1))
        yield items


def create_tables(url: str, seed: int = 1) -> None:
    rnd = random.Random(seed)
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("CREATE TABLE r (a int, k int); CREATE TABLE s (k int, x int); "
                  "CREATE TABLE t (y int, tag text)")
        for _ in range(60):
            c.execute("INSERT INTO r VALUES (%s, %s)", [rnd.randint(0, 9), _maybe(rnd, rnd.randint(0, 9))])
        for _ in range(40):
            c.execute("INSERT INTO s VALUES (%s, %s)", [_maybe(rnd, rnd.randint(0, 9)), rnd.randint(0, 40)])
        for _ in range(30):
            c.execute("INSERT INTO t VALUES (%s, %s)", [rnd.randint(0, 40), rnd.choice(["a", "b", "skip", None])])


def _maybe(rnd: random.Random, v):
    return None if rnd.random() < 0.08 else v


def _writer(url: str, table: str, seed: int, stop: threading.Event, counts: Counter) -> None:
    rnd = random.Random(seed)
    with psycopg.connect(url, autocommit=True) as c:
        size = c.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        while not stop.is_set():
            with c.transaction():
                for _ in range(rnd.randint(1, 4)):
                    # a random walk kept in a band, so the tables (and the view) neither die out nor explode
                    op = 0.0 if size < 25 else 0.6 if size > 70 else rnd.random()
                    size += 1 if op < 0.45 else -1 if op < 0.9 else 0
                    if op < 0.45:
                        if table == "r":
                            vals = [rnd.randint(0, 9), _maybe(rnd, rnd.randint(0, 9))]
                        elif table == "s":
                            vals = [_maybe(rnd, rnd.randint(0, 9)), rnd.randint(0, 40)]
                        else:
                            vals = [rnd.randint(0, 40), rnd.choice(["a", "b", "skip", None])]
                        c.execute(f"INSERT INTO {table} VALUES (%s, %s)", vals)
                    elif op < 0.9:
                        c.execute(f"DELETE FROM {table} WHERE ctid = (SELECT ctid FROM {table} "
                                  "ORDER BY random() LIMIT 1)")
                    else:
                        col = {"r": "k", "s": "x", "t": "y"}[table]
                        c.execute(f"UPDATE {table} SET {col} = {col} + 1 WHERE ctid = "
                                  f"(SELECT ctid FROM {table} ORDER BY random() LIMIT 1)")
                    counts[table] += 1
            time.sleep(0.05 + rnd.random() * 0.1)


class Writers:
    """Three writer threads, one per table, until stop()."""

    def __init__(self, url: str, seed: int = 7):
        self.url, self.stop_event, self.counts = url, threading.Event(), Counter()
        self.threads = [threading.Thread(target=_writer, args=(url, t, seed + i, self.stop_event, self.counts),
                                         daemon=True) for i, t in enumerate("rst")]

    def start(self) -> Writers:
        for t in self.threads:
            t.start()
        return self

    def stop(self) -> int:
        """Stop the writers, then commit a marker transaction; returns an LSN below the
        marker's end LSN and above every earlier commit (caught up = a batch LSN ≥ it)."""
        self.stop_event.set()
        for t in self.threads:
            t.join()
        with psycopg.connect(self.url, autocommit=True) as c, c.transaction():
            c.execute("INSERT INTO t VALUES (-1, 'marker')")
            lsn = c.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]
        hi, lo = lsn.split("/")
        return (int(hi, 16) << 32) | int(lo, 16)


def restart_server(cluster, mode: str = "fast", timeout: int = 60) -> float:
    """``pg_ctl restart -m <mode>`` of the test cluster (same options); returns its seconds.
    pg_ctl fails if the server has not shut down and come back within ``timeout``."""
    cmd = [str(cluster.bindir / "pg_ctl"), "-D", str(cluster.data), "-l", str(cluster.log), "-m", mode,
           "-w", "-t", str(timeout), "restart"]
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, capture_output=True, cwd="/", timeout=3 * timeout)
    return time.monotonic() - t0


def expected(url: str, select: str = SELECT) -> Counter:
    with psycopg.connect(url) as c:
        return Counter(c.execute(select).fetchall())


def materialized(url: str, view: str = "v3", columns: str = COLUMNS) -> Counter:
    with psycopg.connect(url) as c:
        out = Counter()
        for *row, n in c.execute(f"SELECT {columns}, ivm_count FROM {view}").fetchall():
            out[tuple(row)] += n
        return out


class Daemon:
    """``python -m ivm_layer daemon …`` in its own process group."""

    def __init__(self, args: list[str], checkpoint: str, log_path: str, env: dict[str, str] | None = None,
                 root: str | None = None):
        self.args, self.checkpoint, self.log_path = args, checkpoint, log_path
        self.env = env or {}
        self.root = root or ROOT   # the source tree the daemon runs from (a benchmark's baseline)
        self.proc: subprocess.Popen | None = None

    def start(self) -> Daemon:
        env = dict(os.environ, PYTHONPATH=self.root) | self.env
        self.log = open(self.log_path, "ab")
        self.started = time.monotonic()
        self.proc = subprocess.Popen([sys.executable, "-m", "ivm_layer", "daemon", *self.args,
                                      "--checkpoint", self.checkpoint], cwd=self.root, env=env,
                                     stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        return self

    def status(self) -> dict | None:
        try:
            with open(os.path.join(self.checkpoint, "status.json")) as f:
                st = json.load(f)
        except (FileNotFoundError, json.JSONDecodeError):
            return None
        return st if self.proc is not None and st.get("pid") == self.proc.pid else None

    def status_text(self) -> str:
        """What ``ivm daemon --status`` prints for this daemon's checkpoint."""
        env = dict(os.environ, PYTHONPATH=ROOT)
        return subprocess.run([sys.executable, "-m", "ivm_layer", "daemon", "--status", "--checkpoint",
                               self.checkpoint], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=60, check=True).stdout

    def wait(self, pred, timeout: float, what: str) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.status()
            if st is not None and st.get("state") == "failed":
                raise AssertionError(f"daemon failed: {st.get('error')}\n{self.tail()}")
            if st is not None and pred(st):
                return st
            if self.proc.poll() is not None and not (st and pred(st)):
                raise AssertionError(f"daemon exited ({self.proc.returncode}) while waiting for {what}\n{self.tail()}")
            time.sleep(0.3)
        raise AssertionError(f"timed out waiting for {what}\n{self.tail()}")

    def wait_lsn(self, lsn: int, timeout: float = 240) -> dict:
        return self.wait(lambda st: (st.get("last_batch") or {}).get("lsn") is not None
                         and st["last_batch"]["lsn"] >= lsn, timeout, f"LSN {lsn:X}")

    def kill9(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        self.log.close()

    def terminate(self, timeout: float = 60, group: bool = False) -> int:
        """SIGTERM to the daemon (the driver stops the query and exits); ``group``: to its whole
        process group, Spark's JVM included, as a supervisor or Ctrl-C in a terminal does."""
        if self.proc.poll() is None:
            (os.killpg if group else os.kill)(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(30)
        self.log.close()
        return self.proc.returncode

    def batch_sizes(self) -> dict[int, int]:
        """``{batch id: rows in}`` from the daemon's progress log lines."""
        import re

        with open(self.log_path, "rb") as f:
            text = f.read().decode(errors="replace")
        return {int(m.group(1)): int(m.group(2))
                for m in re.finditer(r"ivm daemon: batch (\d+): (\d+) (?:routed )?rows in", text)}

    def tail(self, n: int = 4000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except FileNotFoundError:
            return ""
