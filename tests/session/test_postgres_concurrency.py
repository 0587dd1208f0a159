"""Concurrent writers against views over a 3-way join with an inequality, fed by logical
replication; the oracle is PostgreSQL evaluating the same SELECT. The second test kills the
consumer (``kill -9`` of a subprocess maintaining the views) mid-stream, twice, and resumes:
no change may be lost or applied twice."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections import Counter
from pathlib import Path

import psycopg

import ivm_layer

Q = ("SELECT a.id AS aid, b.id AS bid, c.id AS cid, a.x, b.y, c.z "
     "FROM a JOIN b ON a.k = b.k JOIN c ON b.j = c.j WHERE b.y < c.z")

ROOT = Path(__file__).resolve().parents[2]


def setup_tables(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as w:
        w.execute("CREATE TABLE a (id int, k int, x int)")
        w.execute("CREATE TABLE b (id int, k int, j int, y int)")
        w.execute("CREATE TABLE c (id int, j int, z int)")
        for t in "abc":
            w.execute(f"ALTER TABLE {t} REPLICA IDENTITY FULL")
        w.execute("INSERT INTO a SELECT i, i % 8, i FROM generate_series(1, 40) i")
        w.execute("INSERT INTO b SELECT i, i % 8, i % 6, i % 13 FROM generate_series(1, 40) i")
        w.execute("INSERT INTO c SELECT i, i % 6, i % 11 FROM generate_series(1, 40) i")


class Writers:
    """Threads doing random inserts, updates (join-key changes too), deletes, duplicates,
    NULLs, multi-statement transactions and rollbacks."""

    def __init__(self, url: str, n: int = 3, seed: int = 7):
        self.url, self.n, self.seed = url, n, seed
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.committed = 0
        self.errors: list[BaseException] = []

    def _one(self, conn, rnd: random.Random, base: int) -> None:
        t = rnd.choice("abc")
        op = rnd.random()
        v = lambda m: None if rnd.random() < 0.05 else rnd.randrange(m)
        if op < 0.35:   # inserts and deletes balance, so the tables and the view stay small
            vals = {"a": (base, v(8), v(40)), "b": (base, v(8), v(6), v(13)), "c": (base, v(6), v(11))}[t]
            conn.execute(f"INSERT INTO {t} VALUES ({', '.join(['%s'] * len(vals))})", vals)
            if rnd.random() < 0.1:                                 # an exact duplicate row
                conn.execute(f"INSERT INTO {t} VALUES ({', '.join(['%s'] * len(vals))})", vals)
        elif op < 0.7:
            col = {"a": rnd.choice(["k", "x"]), "b": rnd.choice(["k", "j", "y"]), "c": rnd.choice(["j", "z"])}[t]
            conn.execute(f"UPDATE {t} SET {col} = %s WHERE id = (SELECT id FROM {t} ORDER BY random() LIMIT 1)",
                         [v(8)])
        else:
            conn.execute(f"DELETE FROM {t} WHERE id = (SELECT id FROM {t} ORDER BY random() LIMIT 1)")

    def _run(self, i: int) -> None:
        rnd = random.Random(self.seed * 100 + i)
        base = 1000 + i * 1_000_000
        try:
            with psycopg.connect(self.url, autocommit=True) as conn:
                while not self.stop.is_set():
                    base += 1
                    if rnd.random() < 0.3:                          # a multi-statement transaction
                        conn.execute("BEGIN")
                        for _ in range(rnd.randint(2, 5)):
                            base += 1
                            self._one(conn, rnd, base)
                        if rnd.random() < 0.3:
                            conn.execute("ROLLBACK")
                            continue
                        conn.execute("COMMIT")
                    else:
                        self._one(conn, rnd, base)
                    self.committed += 1
                    time.sleep(0.005)
        except BaseException as e:  # noqa: BLE001 - re-raised by join()
            self.errors.append(e)

    def start(self) -> Writers:
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(self.n)]
        for t in self.threads:
            t.start()
        return self

    def join(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)
        if self.errors:
            raise self.errors[0]


def oracle(url: str, sql: str) -> Counter:
    with psycopg.connect(url, autocommit=True) as c:
        return Counter(c.execute(sql).fetchall())


def test_concurrent_writers_view_created_mid_stream(pg_url, tmp_path):
    setup_tables(pg_url)
    writers = Writers(pg_url).start()
    try:
        time.sleep(0.5)
        s = ivm_layer.connect(pg_url, state_dir=tmp_path)
        s.execute(f"CREATE INCREMENTAL VIEW v AS {Q}")             # while the writers run
        s.execute(f"CREATE INCREMENTAL MATERIALIZED VIEW mv AS {Q}")
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            s.poll(0.1)
    finally:
        writers.join()
    assert writers.committed > 100
    s.sync()
    want = oracle(pg_url, Q)
    assert sum(want.values()) > 20
    assert Counter({r: k for r, k in s.view("v").rows()}) == want
    assert oracle(pg_url, "SELECT * FROM mv") == want
    assert Counter(s.execute("SELECT * FROM v").fetchall()) == want
    s.close(drop=True)


CONSUMER = """
import sys, time
sys.path.insert(0, {root!r})
import ivm_layer
s = ivm_layer.connect({url!r}, session="crash", state_dir={state!r}, checkpoint_seconds={ckpt!r})
if not s.views:
    s.execute({create_mv!r})
    s.execute({create_v!r})
print("ready", flush=True)
while True:
    s.poll(0.05)
"""


def _start_consumer(url: str, state: Path, checkpoint_seconds: float = 0.2) -> subprocess.Popen:
    code = CONSUMER.format(root=str(ROOT), url=url, state=str(state), ckpt=checkpoint_seconds,
                           create_mv=f"CREATE INCREMENTAL MATERIALIZED VIEW mv AS {Q}",
                           create_v=f"CREATE INCREMENTAL VIEW v AS {Q}")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, cwd=str(ROOT))
    line = p.stdout.readline()
    if line.strip() != "ready":
        p.kill()
        raise AssertionError(f"consumer did not start: {line!r} {p.stderr.read()}")
    return p


def test_consumer_killed_mid_stream_resumes_exactly_once(pg_url, tmp_path):
    setup_tables(pg_url)
    writers = Writers(pg_url, seed=11).start()
    try:
        for _ in range(2):
            p = _start_consumer(pg_url, tmp_path)
            time.sleep(1.5)                                          # stream, checkpoint, write the table
            os.kill(p.pid, signal.SIGKILL)
            p.wait(10)
            assert p.returncode == -signal.SIGKILL
            time.sleep(0.5)                                          # writes while nobody consumes
        with warnings.catch_warnings():
            warnings.simplefilter("error")                           # a resume, not a rebuild
            s = ivm_layer.connect(pg_url, session="crash", state_dir=tmp_path)
        assert s.views == ["mv", "v"]
        time.sleep(0.5)
        s.poll(0.2)
    finally:
        writers.join()
    s.sync()
    want = oracle(pg_url, Q)
    assert sum(want.values()) > 20
    assert oracle(pg_url, "SELECT * FROM mv") == want               # no lost or doubled change
    assert Counter({r: k for r, k in s.view("v").rows()}) == want
    assert Counter({r: k for r, k in s.view("mv").rows()}) == want
    s.close(drop=True)


def test_killed_after_table_writes_beyond_checkpoint(pg_url, tmp_path):
    """Deterministic crash point: the view table is ahead of the checkpoint (checkpoints only
    at creation), so on resume the engine replays transactions the table already has and
    the table receives only the later ones."""
    setup_tables(pg_url)
    p = _start_consumer(pg_url, tmp_path, checkpoint_seconds=3600)
    with psycopg.connect(pg_url, autocommit=True) as w:
        for i in range(20):
            w.execute("INSERT INTO b VALUES (%s, %s, %s, 0)", [500 + i, i % 8, i % 6])
            w.execute("UPDATE c SET z = z + 1 WHERE id = %s", [i + 1])
        deadline = time.monotonic() + 30
        while oracle(pg_url, "SELECT * FROM mv") != oracle(pg_url, Q):   # the consumer caught up
            assert time.monotonic() < deadline, "the consumer did not apply the writes"
            time.sleep(0.05)
        os.kill(p.pid, signal.SIGKILL)
        p.wait(10)
        table_before = oracle(pg_url, "SELECT * FROM mv")
        assert table_before == oracle(pg_url, Q)
        w.execute("DELETE FROM b WHERE id >= 510")
        w.execute("INSERT INTO c VALUES (900, 1, 12)")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = ivm_layer.connect(pg_url, session="crash", state_dir=tmp_path)
    mv = s._views["mv"]
    assert mv.checkpoint_lsn < mv.table_lsn                   # the case under test
    s.sync()
    want = oracle(pg_url, Q)
    assert want != table_before
    assert oracle(pg_url, "SELECT * FROM mv") == want
    assert Counter({r: k for r, k in s.view("mv").rows()}) == want
    assert Counter({r: k for r, k in s.view("v").rows()}) == want
    s.close(drop=True)
