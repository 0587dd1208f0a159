"""Scale-out: the daemon with ``--shards N`` (source partitions = shards, engines cached in the
Python workers, per-shard log and snapshots in the checkpoint) on ``local[2]`` (also after
``kill -9``) and on a Spark standalone master with two one-core workers started on
127.0.0.1; the union of the shards' outputs equals PostgreSQL evaluating the SELECT — the
same result one shard gives (test_pipeline_daemon.py). Without Spark: the shard engines stay
exact when batches move between workers, are read twice, or a worker is lost."""

from __future__ import annotations

import datetime
import os
import pickle
import random
import time
from collections import Counter

import psycopg
import pyarrow.parquet as pq
import pytest

from ivm_layer.bench.daemon_workload import (
    SELECT,
    VIEWS,
    Daemon,
    Writers,
    create_tables,
    expected,
    materialized,
    valid_changes,
)


def _caught_up_and_equal(d, writers, pg_url: str, tmp_path) -> None:
    """Stop the writers, wait until the daemon applied their last commit, and check both sinks
    (the source table and the Parquet deltas) against PostgreSQL's SELECT."""
    d.wait_lsn(writers.stop(), timeout=300)
    want = expected(pg_url)
    assert sum(want.values()) > 0
    assert materialized(pg_url) == want
    assert _parquet_view(tmp_path / "pq" / "v3") == want


def _parquet_view(directory) -> Counter:
    total: Counter = Counter()
    for f in sorted(directory.glob("batch-*.parquet")):
        for rec in pq.read_table(f).to_pylist():
            total[(rec["a"], rec["k"], rec["x"], rec["y"], rec["tag"])] += rec["ivm_delta"]
    assert not -total, "negative multiplicities in the parquet deltas"
    return +total


def _run_sharded(pg_url, tmp_path, master: str) -> None:
    create_tables(pg_url, seed=3)
    views = tmp_path / "views.sql"
    views.write_text(VIEWS)
    args = ["--source", pg_url, "--views", str(views), "--set-replica-identity", "--master", master, "--shards", "4",
            "--trigger", "1s", "--max-changes-per-batch", "200",
            "--sink", "source", "--sink", f"parquet:{tmp_path / 'pq'}"]
    d = Daemon(args, str(tmp_path / "ckpt"), str(tmp_path / "daemon.log")).start()
    writers = None
    try:
        d.wait(lambda s: s.get("batches", 0) >= 1, 300, "the snapshot batch")
        writers = Writers(pg_url, seed=11).start()
        time.sleep(8)
        _caught_up_and_equal(d, writers, pg_url, tmp_path)
        assert sum(writers.counts.values()) > 20
        assert d.terminate() == 0
    finally:
        if writers is not None:
            writers.stop_event.set()
        if d.proc.poll() is None:
            d.kill9()


@pytest.mark.spark
def test_four_shards_on_local2(pg_url, tmp_path):
    _run_sharded(pg_url, tmp_path, "local[2]")


@pytest.fixture
def standalone_cluster():
    """A Spark standalone master and two one-core workers on 127.0.0.1 (the benchmark's)."""
    from ivm_layer.bench.standalone_cluster import standalone_cluster as cluster

    with cluster(workers=2) as url:
        yield url


@pytest.mark.spark
def test_four_shards_on_standalone_cluster(pg_url, tmp_path, standalone_cluster):
    _run_sharded(pg_url, tmp_path, standalone_cluster)


TYPES = {"r": {"a": "integer", "k": "integer"}, "s": {"k": "integer", "x": "integer"},
         "t": {"y": "integer", "tag": "text"}}


def _row(rnd: random.Random, table: str) -> tuple:
    if table == "r":
        return (rnd.randint(0, 6), rnd.choice([None, 0, 1, 2, 3]))
    if table == "s":
        return (rnd.choice([None, 0, 1, 2, 3]), rnd.randint(0, 40))
    return (rnd.randint(0, 40), rnd.choice(["a", "b", "skip", None]))


@pytest.mark.parametrize(("select", "shards"), [(SELECT, 2), (SELECT, 3), ("SELECT r.a, r.k, s.x FROM r JOIN s ON r.k = s.k", 2),
                                              ("SELECT s.x, t.y FROM r JOIN s ON r.k = s.k JOIN t ON s.x < t.y", 4)])
def test_shard_engines_survive_worker_moves_rereads_and_loss(tmp_path, select, shards):
    """The read path of ``ivm-cdc-shards`` without Spark: each partition read on a random one
    of two simulated Python workers (module cache swapped), sometimes read twice, sometimes
    with every worker lost (engines rebuilt from the snapshots and logs, with snapshots
    every 2 batches so that pruning is exercised); the union of the outputs is the view."""
    from ivm_layer.daemon import shardsource
    from ivm_layer.daemon.state import EngineState, ViewDef, batch_changes
    from ivm_layer.io.postgres.pgoutput import Transaction

    d = ViewDef("v3", select, True, ["r", "s", "t"] if " t " in select else ["r", "s"])
    spec = shardsource.shard_spec([d], TYPES, shards, str(tmp_path), snapshot_every=2)
    reader = shardsource.ShardedCdcStreamReader({"url": "postgresql://unused", "slot": "s", "publication": "p",
                                                 "tables": ",".join(d.tables), "shardSpec": spec})
    saved = shardsource._CACHE
    workers: list[dict] = [{}, {}]
    try:
        shardsource._CACHE = workers[0]
        for k in range(shards):   # the initial snapshot of empty tables, at LSN 100
            shardsource.shard_engine(reader.spec, 0, k, reader.routers()[0]).load_snapshot(100, {})
        single = EngineState([d], TYPES)
        rnd = random.Random(shards)
        union: Counter = Counter()
        lsn, now = 100, datetime.datetime.now(datetime.UTC)
        stream = list(valid_changes(rnd, 60, "".join(d.tables), _row, 6))
        while stream:
            txns = []
            for _ in range(rnd.randint(1, 3)):
                if not stream:
                    break
                lsn += 10
                t = Transaction(xid=lsn, final_lsn=lsn, commit_lsn=lsn, end_lsn=lsn, commit_time=now)
                for i, (tb, row, k) in enumerate(stream.pop(0)):
                    t.changes.setdefault(tb, []).append((row, k))
                    single.apply(batch_changes([(lsn, i, tb, k, row)], single.base))
                txns.append(t)
            start, end = txns[0].end_lsn - 10, txns[-1].end_lsn
            if rnd.random() < 0.15:
                workers = [{}, {}]    # every worker lost (a restarted daemon): rebuilt from the files
            union_batch: Counter = Counter()
            for part in reader.route(start, end, txns):
                reads = []
                for _ in range(2 if rnd.random() < 0.3 else 1):   # a partition read again: same output
                    shardsource._CACHE = rnd.choice(workers)
                    got: Counter = Counter()
                    for batch in reader.read(part):
                        for view, raw in zip(batch.column("view").to_pylist(), batch.column("changes").to_pylist()):
                            if view is not None:
                                for row, n in pickle.loads(raw):
                                    got[row] += n
                    reads.append(got)
                assert all(r == reads[0] for r in reads)
                if reader.routers()[0].disjoint:   # no row in two shards' changes
                    assert not set(reads[0]) & set(union_batch)
                union_batch.update(reads[0])
            union.update(union_batch)
            union = Counter({r: n for r, n in union.items() if n})
            assert union == Counter(dict(single.views["v3"].rows())), f"after LSN {end}"
        for k in range(shards):   # pruned: at most two snapshots, logs only after the older one
            names = os.listdir(tmp_path / "shards" / "v3" / str(k))
            snaps = sorted(n for n in names if n.startswith("snap-"))
            assert 1 <= len(snaps) <= 2
            assert all(n > snaps[0].replace("snap-", "log-") for n in names if n.startswith("log-"))
    finally:
        shardsource._CACHE = saved


@pytest.mark.spark
@pytest.mark.slow   # 2 minutes; test_daemon_run.py's kill -9 round covers the one-engine daemon in CI
def test_two_shards_kill9_restart_is_exact(pg_url, tmp_path):
    """``kill -9`` of a two-shard daemon mid-stream (snapshots every 3 batches), then a
    restart on the same checkpoint: the engines are rebuilt from the shard files, the sinks
    hold every change exactly once."""
    create_tables(pg_url, seed=5)
    views = tmp_path / "views.sql"
    views.write_text(VIEWS)
    toml = tmp_path / "daemon.toml"
    toml.write_text("[daemon]\nsnapshot_every = 3\n")
    args = ["--config", str(toml), "--source", pg_url, "--views", str(views), "--set-replica-identity",
            "--master", "local[2]", "--shards", "2", "--trigger", "1s", "--max-changes-per-batch", "50",
            "--sink", "source", "--sink", f"parquet:{tmp_path / 'pq'}"]
    ckpt, log = str(tmp_path / "ckpt"), str(tmp_path / "daemon.log")
    d = Daemon(args, ckpt, log).start()
    d2 = writers = None
    try:
        d.wait(lambda s: s.get("batches", 0) >= 1, 300, "the snapshot batch")
        writers = Writers(pg_url, seed=13).start()
        d.wait(lambda s: s.get("batches", 0) >= 6, 300, "a few change batches")
        d.kill9()
        time.sleep(2)
        d2 = Daemon(args, ckpt, log).start()
        d2.wait(lambda s: s.get("batches", 0) >= 1, 300, "the first batch after the restart")
        time.sleep(3)
        _caught_up_and_equal(d2, writers, pg_url, tmp_path)
        shard_files = [n for k in "01" for n in os.listdir(os.path.join(ckpt, "shards", "v3", k))]
        assert sum(n.startswith("snap-") for n in shard_files) >= 3   # snapshots were taken (and pruned)
        assert d2.terminate() == 0
    finally:
        if writers is not None:
            writers.stop_event.set()
        for p in (d, d2):
            if p is not None and p.proc.poll() is None:
                p.kill9()


def test_partitions_hold_only_their_shards_rows(tmp_path):
    """A change batch is one task per shard holding only the rows routed to that shard
    (routed once, pickled once): the bytes shipped per batch stay O(batch) as the shards grow
    (not N × batch), and each task's rows are exactly the ones the router sends its shard."""
    from ivm_layer.daemon import shardsource
    from ivm_layer.daemon.state import ViewDef
    from ivm_layer.io.postgres.pgoutput import Transaction

    d = ViewDef("v", "SELECT r.a, r.k, s.x FROM r JOIN s ON r.k = s.k", True, ["r", "s"])
    now = datetime.datetime.now(datetime.UTC)
    t = Transaction(xid=1, final_lsn=110, commit_lsn=110, end_lsn=110, commit_time=now)
    t.changes["r"] = [((i, i % 97), 1) for i in range(4000)]
    t.changes["s"] = [((i % 97, i), 1) for i in range(400)]
    shipped = {}
    for shards in (1, 2, 4):
        spec = shardsource.shard_spec([d], TYPES, shards, str(tmp_path), snapshot_every=100)
        reader = shardsource.ShardedCdcStreamReader({"url": "postgresql://unused", "slot": "s", "publication": "p",
                                                     "tables": "r,s", "shardSpec": spec})
        router = reader.routers()[0]
        tasks = reader.route(100, 110, [t])
        assert sorted(p.shard for p in tasks) == list(range(shards))
        assert sum(p.changes_in for p in tasks) == 4400 and sum(p.rows for p in tasks) == 4400
        for p in tasks:
            items = pickle.loads(p.payload)[0]
            assert len(items) == p.rows
            assert all(next(iter(router.route(tb.split("_", 2)[2], row)))[0] == p.shard
                       for _, _, tb, _, row in items)
            # a task pickles its own rows only: no other shard's rows travel with it
            assert len(pickle.dumps(p, protocol=pickle.HIGHEST_PROTOCOL)) < len(p.payload) + 1000
        shipped[shards] = sum(len(p.payload) for p in tasks)
    assert shipped[4] <= 1.1 * shipped[1] and shipped[2] <= 1.1 * shipped[1]


def _except_all_both_ways(url: str, select: str) -> int:
    """Rows in the ``source`` sink's v3 (expanded by ``ivm_count``) but not in PostgreSQL's
    SELECT, plus the other way round (bags: EXCEPT ALL)."""
    with psycopg.connect(url) as c:
        return c.execute(
            f"WITH m AS (SELECT a, k, x, y, tag FROM v3, generate_series(1, ivm_count)), q AS ({select}) "
            "SELECT (SELECT count(*) FROM (SELECT * FROM m EXCEPT ALL SELECT * FROM q) d1) + "
            "(SELECT count(*) FROM (SELECT * FROM q EXCEPT ALL SELECT * FROM m) d2)").fetchone()[0]


@pytest.mark.spark
@pytest.mark.parametrize("shards", [pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow), 4])
def test_three_way_view_routes_by_variables(pg_url, tmp_path, shards):
    """``r JOIN s ON r.k = s.k JOIN t ON s.x < t.y`` with a 20-row t (the benchmark's shape, a
    tenth of its size): r and s are hashed on k and t replicated, so at 4 shards the rows
    routed are ≤ 1.25× the base rows and each shard holds ≤ 0.35 of the rows one shard holds;
    ``--status --json`` says so per shard; after inserts, updates and deletes the sink equals
    PostgreSQL's SELECT (EXCEPT ALL both ways)."""
    select = "SELECT r.a, r.k, s.x, t.y, t.tag FROM r JOIN s ON r.k = s.k JOIN t ON s.x < t.y"
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("CREATE TABLE r (a int, k int); CREATE TABLE s (k int, x int); CREATE TABLE t (y int, tag text)")
        c.execute("INSERT INTO r SELECT g, g % 200 FROM generate_series(1, 2000) g")
        c.execute("INSERT INTO s SELECT g % 200, g FROM generate_series(1, 200) g")
        c.execute("INSERT INTO t SELECT g * 10, 'x' FROM generate_series(1, 20) g")
        c.execute("ANALYZE r; ANALYZE s; ANALYZE t")
    base = 2220
    views = tmp_path / "views.sql"
    views.write_text(f"CREATE INCREMENTAL MATERIALIZED VIEW v3 AS {select};\n")
    args = ["--source", pg_url, "--views", str(views), "--set-replica-identity", "--master", "local[2]",
            "--shards", str(shards), "--trigger", "1s", "--sink", "source"]
    d = Daemon(args, str(tmp_path / "ckpt"), str(tmp_path / "daemon.log")).start()
    try:
        st = d.wait(lambda s: s.get("batches", 0) >= 1, 300, "the snapshot batch")
        per = st["shards"]
        assert [x["shard"] for x in per] == list(range(shards)) and st["changes_in"] == base
        routed = sum(x["routed_rows"] for x in per)
        assert routed == base + 20 * (shards - 1)          # t replicated, r and s routed once
        if shards == 4:
            assert routed <= 1.25 * base
            assert all(0 < x["state_rows"] <= 0.35 * base for x in per), per
            assert st["routing"]["v3"]["shares"] == {"r.k": 4}
            assert "t: replicated to all 4 shards" in st["routing"]["v3"]["tables"]
            assert "routing of v3: r: hashed on r.k (share 4)" in d.status_text()
        with psycopg.connect(pg_url, autocommit=True) as c:
            c.execute("INSERT INTO r SELECT g, g % 200 FROM generate_series(5000, 5600) g")
            c.execute("UPDATE s SET x = x + 7 WHERE k % 3 = 0")
            c.execute("DELETE FROM r WHERE a % 11 = 0")
            c.execute("INSERT INTO t VALUES (55, 'y'), (NULL, 'z')")
            c.execute("DELETE FROM t WHERE y = 100")
            lsn = c.execute("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn").fetchone()[0]
        st = d.wait_lsn(int(lsn) - 1, timeout=300)
        assert st["changes_in"] > base
        assert _except_all_both_ways(pg_url, select) == 0
        assert sum(expected(pg_url, select).values()) > 1000
        assert d.terminate() == 0
    finally:
        if d.proc.poll() is None:
            d.kill9()
