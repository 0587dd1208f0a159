"""The daemon's filesystem layer (:mod:`ivm_layer.daemon.statefs`) and the engine's per-batch
checkpoint (:mod:`ivm_layer.daemon.enginestore`) on a local directory and on S3 (a moto
server on loopback), the same assertions on both."""

from __future__ import annotations

import json
import os
import random
import stat
from collections import Counter

import pytest

from ivm_layer.daemon.commitmark import marker_path, read_marker, write_marker
from ivm_layer.daemon.epoch import resolve
from ivm_layer.daemon.state import EngineState, ViewDef, last_batch_in, open_checkpoint
from ivm_layer.daemon.statefs import StateFS, join, read_file, redact
from ivm_layer.daemon.status import StatusFile, read_status
from ivm_layer.errors import StateError

DEFS = [ViewDef("j", "SELECT r.a, s.b FROM r JOIN s ON r.k = s.k", False, ["r", "s"])]
SCHEMA = {"r": {"a": "integer", "k": "integer"}, "s": {"k": "integer", "b": "text"}}


@pytest.fixture(params=["local", "s3"])
def location(request, tmp_path):
    if request.param == "local":
        return str(tmp_path / "state")
    return request.getfixturevalue("s3_url")


def test_reads_writes_lists_and_deletes(location):
    fs = StateFS(location)
    fs.ensure_root()
    assert fs.read("a/x.json") is None and fs.list("a") == [] and not fs.exists("a/x.json")
    fs.write("a/x.json", b"one")
    fs.write("a/y", b"\x00" * 70_000)
    assert fs.read("a/x.json") == b"one" and fs.list("a") == ["x.json", "y"]
    fs.write("a/x.json", b"two")                  # replaced whole
    assert fs.read("a/x.json") == b"two" and len(fs.read("a/y")) == 70_000
    assert fs.read_head("a/y", 10) == b"\x00" * 10 and fs.read_head("a/none") is None   # a ranged read
    assert read_file(join(location, "a", "x.json")) == b"two"
    fs.delete("a/x.json")
    fs.delete("a/x.json")                         # deleting what is gone is no error
    assert fs.list("a") == ["y"] and fs.read("a/x.json") is None
    fs.delete_dir("a")
    assert fs.list("a") == []
    if fs.local:                                  # private: 0700 directories, 0600 files
        fs.write("b", b"1")
        assert stat.S_IMODE(os.stat(fs.root).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(fs.path("b")).st_mode) == 0o600
        assert [n for n in os.listdir(fs.root) if n.startswith(".")] == []   # no temporary left
        assert fs.create("c", b"7") is True and fs.create("c", b"8") is False and fs.read("c") == b"7"
    else:
        assert fs.create("c", b"7") is None       # no exclusive create on an object store


def test_marker_and_status_round_trip(location):
    StateFS(location).ensure_root()
    assert read_marker(marker_path(location)) is None
    write_marker(location, 3, 0x16B3F28)
    assert read_marker(marker_path(location))["batch_id"] == 3
    st = StatusFile(location, "d", "local[2]", 1)
    st.batch(batch_id=3, rows_in=5, changes_out=2, lsn=1, lsn_text="0/1", seconds=0.1)
    got = read_status(location)
    assert got["batches"] == 1 and got["sinks_committed_batch"] == 3


def test_credentials_are_refused_in_urls_and_never_shown():
    with pytest.raises(StateError, match="credentials in the URL are refused") as e:
        StateFS("s3://AKIAXX:secretkey@bucket/prefix")
    assert "secretkey" not in str(e.value) and "AKIAXX" not in str(e.value)
    assert redact("s3://bucket/p?endpoint_override=h:1&secret_key=zzz") == "s3://bucket/p"


def _stream(seed: int, n: int):
    rng = random.Random(seed)
    rows = {"r": Counter(), "s": Counter()}
    for _ in range(n):
        ch = {}
        for t in ("r", "s"):
            d: dict = {}
            for _ in range(rng.randint(0, 6)):
                row = (rng.randint(0, 4), rng.randint(0, 3)) if t == "r" else (rng.randint(0, 3), rng.choice("xy"))
                if rows[t][row] > 0 and rng.random() < 0.4:
                    rows[t][row] -= 1
                    d[row] = d.get(row, 0) - 1
                else:
                    rows[t][row] += 1
                    d[row] = d.get(row, 0) + 1
            d = {r: k for r, k in d.items() if k}
            if d:
                ch[t] = d
        yield ch


def _oracle(st: EngineState) -> Counter:
    r, s = st.base["r"], st.base["s"]
    out: Counter = Counter()
    for (a, k1), n in r.items():
        for (k2, b), m in s.items():
            if k1 == k2:
                out[(a, b)] += n * m
    return +out


@pytest.mark.parametrize("seed", [0, 1])
def test_engine_checkpoint_recovers_exactly(location, seed):
    """Batches logged one object each, snapshots now and then (older objects deleted);
    a fresh engine recovered from the location equals one that applied everything, and the
    recorded source LSN is the last batch's."""
    engine_loc = join(location, "engine")
    st = EngineState(DEFS, SCHEMA)
    store = open_checkpoint(engine_loc, DEFS)
    st.recover(store)
    for b, ch in enumerate(_stream(seed, 12)):
        st.apply(ch)
        store.next_source_lsn = 1000 + b
        st.log(b, ch)
        if b in (4, 8):
            st.snapshot(b)
    fs = StateFS(engine_loc)
    assert fs.list() == [f"snap-{9:020d}", "views.json"] and fs.list_dirs() == [f"logs-{9:020d}"]
    assert fs.list(f"logs-{9:020d}") == [f"log-{b:020d}" for b in (9, 10, 11)]
    assert last_batch_in(engine_loc) == 11
    again = EngineState(DEFS, SCHEMA)
    reopened = open_checkpoint(engine_loc, DEFS)
    assert reopened.position == 11 and reopened.source_lsn == 1011
    last, held = again.recover(reopened, hold_after=10)
    assert last == 11 and [b for b, _ in held] == [11]
    for _, ch in held:
        again.apply(ch)
    assert dict(again.base["r"]) == dict(st.base["r"]) and dict(again.base["s"]) == dict(st.base["s"])
    assert _oracle(again) == _oracle(st)
    with pytest.raises(StateError, match="other view definitions"):
        open_checkpoint(engine_loc, [ViewDef("j", "SELECT r.a FROM r", False, ["r"])])


def test_spark_checkpoint_epochs(location, tmp_path):
    """Spark's checkpoint (a local directory) goes with the state it started with; lost or
    foreign, it is rebuilt from the state: batch ids continue, the stream resumes after the
    state's LSN."""
    state = StateFS(location)
    state.ensure_root()
    spark = str(tmp_path / "spark")
    fresh = resolve(state, spark, -1, None)
    assert (fresh.batch_base, fresh.start_lsn, fresh.rebuilt) == (0, -1, False)
    assert resolve(state, spark, 5, 0x500) == fresh          # the same pair: resume
    (tmp_path / "spark" / "offsets").mkdir()
    import shutil

    shutil.rmtree(tmp_path / "spark")                         # the driver's machine was replaced
    e = resolve(state, spark, 5, 0x500)
    assert (e.batch_base, e.start_lsn, e.rebuilt) == (6, 0x500, True)
    assert resolve(state, spark, 9, 0x900).batch_base == 6    # and it goes with it from now on
    other = str(tmp_path / "other")                           # a Spark checkpoint of another state
    os.makedirs(other)
    with open(os.path.join(other, "ivm-epoch.json"), "w") as f:
        json.dump({"epoch": "someone-else"}, f)
    assert resolve(state, other, 9, 0x900).batch_base == 10
    with pytest.raises(StateError, match="does not record the LSN"):
        resolve(state, str(tmp_path / "gone"), 9, None)
    mine = tmp_path / "someone's directory"                    # never deleted: refused
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    for last, lsn in ((9, 0x900), (-1, None)):
        with pytest.raises(StateError, match="not a Spark checkpoint this daemon made"):
            resolve(state, str(mine), last, lsn)
    assert (mine / "notes.txt").read_text() == "keep"


@pytest.mark.parametrize("shards", [3])
def test_shard_engines_on_s3_survive_worker_loss(s3_url, shards):
    """The read path of ``ivm-cdc-shards`` without Spark, its shard state on S3: partitions
    read by one of two simulated Python workers, sometimes twice, sometimes with every worker
    lost (engines rebuilt from the objects; snapshots every 2 batches, so pruning runs);
    shards are assigned by task index (no exclusive create on S3); the union of the outputs
    is the view, and :func:`discard_after` drops exactly the batches past an LSN."""
    import datetime
    import pickle

    from ivm_layer.bench.daemon_workload import SELECT, valid_changes
    from ivm_layer.daemon import shardsource
    from ivm_layer.daemon.state import batch_changes
    from ivm_layer.io.postgres.pgoutput import Transaction

    types = {"r": {"a": "integer", "k": "integer"}, "s": {"k": "integer", "x": "integer"},
             "t": {"y": "integer", "tag": "text"}}
    d = ViewDef("v3", SELECT, True, ["r", "s", "t"])
    spec = shardsource.shard_spec([d], types, shards, s3_url, snapshot_every=2)
    reader = shardsource.ShardedCdcStreamReader({"url": "postgresql://unused", "slot": "s", "publication": "p",
                                                 "tables": "r,s,t", "shardSpec": spec})
    assert reader.spec["checkpoint"] == s3_url
    saved = shardsource._CACHE
    workers: list[dict] = [{}, {}]

    def row(rnd, table):
        if table == "r":
            return (rnd.randint(0, 6), rnd.choice([None, 0, 1, 2, 3]))
        if table == "s":
            return (rnd.choice([None, 0, 1, 2, 3]), rnd.randint(0, 40))
        return (rnd.randint(0, 40), rnd.choice(["a", "b", "skip", None]))

    try:
        shardsource._CACHE = workers[0]
        for k in range(shards):
            shardsource.shard_engine(reader.spec, 0, k, reader.routers()[0]).load_snapshot(100, {})
        single = EngineState([d], types)
        rnd = random.Random(shards)
        union: Counter = Counter()
        lsn, now = 100, datetime.datetime.now(datetime.UTC)
        stream = list(valid_changes(rnd, 24, "rst", row, 5))
        while stream:
            txns = []
            for _ in range(rnd.randint(1, 3)):
                if not stream:
                    break
                lsn += 10
                t = Transaction(xid=lsn, final_lsn=lsn, commit_lsn=lsn, end_lsn=lsn, commit_time=now)
                for i, (tb, r, k) in enumerate(stream.pop(0)):
                    t.changes.setdefault(tb, []).append((r, k))
                    single.apply(batch_changes([(lsn, i, tb, k, r)], single.base))
                txns.append(t)
            start, end = txns[0].end_lsn - 10, txns[-1].end_lsn
            if rnd.random() < 0.25:
                workers = [{}, {}]
            for part in reader.route(start, end, txns):
                reads = []
                for _ in range(2 if rnd.random() < 0.3 else 1):
                    shardsource._CACHE = rnd.choice(workers)
                    got: Counter = Counter()
                    for batch in reader.read(part):
                        for view, raw in zip(batch.column("view").to_pylist(), batch.column("changes").to_pylist()):
                            if view is not None:
                                for r, n in pickle.loads(raw):
                                    got[r] += n
                    reads.append(got)
                assert all(x == reads[0] for x in reads)
                union.update(reads[0])
            union = Counter({r: n for r, n in union.items() if n})
            assert union == Counter(dict(single.views["v3"].rows())), f"after LSN {end}"
        fs = StateFS(s3_url)
        for k in range(shards):
            names = fs.list(f"shards/v3/{k}")
            snaps = [n for n in names if n.startswith("snap-")]
            assert 1 <= len(snaps) <= 2
        shardsource.discard_after(s3_url, ["v3"], shards, lsn - 10)
        left = [int(n.split("-")[1]) for k in range(shards) for n in fs.list(f"shards/v3/{k}")]
        assert left and max(left) <= lsn - 10
    finally:
        shardsource._CACHE = saved


def test_config_with_a_url_checkpoint(tmp_path, monkeypatch):
    """A URL checkpoint is kept as given (not made a path); the daemon's name comes from its
    last segment; Spark's checkpoint defaults to a local directory; a URL with credentials is
    refused before anything starts."""
    from ivm_layer.daemon.config import DaemonConfig
    from ivm_layer.errors import IVMError

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    views = tmp_path / "v.sql"
    views.write_text("CREATE INCREMENTAL VIEW v AS SELECT a FROM r;")
    cfg = DaemonConfig(source="postgresql://u@h/db", views=str(views), checkpoint="s3://bkt/ivm/shop").validate()
    assert cfg.checkpoint == "s3://bkt/ivm/shop" and cfg.name.startswith("ivm_shop_")
    assert cfg.spark_checkpoint == str(tmp_path / "state" / "ivm-layer" / "spark-checkpoints" / cfg.name)
    local = DaemonConfig(source="postgresql://u@h/db", views=str(views), checkpoint=str(tmp_path / "c")).validate()
    assert local.spark_checkpoint == str(tmp_path / "c" / "spark")
    with pytest.raises(IVMError, match="credentials in the URL are refused"):
        DaemonConfig(source="postgresql://u@h/db", views=str(views), checkpoint="s3://K:S@bkt/p").validate()


def test_status_of_a_daemon_on_another_host_is_taken_at_its_word(tmp_path):
    """With the state on an object store, ``--status`` may run on another machine than the
    daemon: its pid means nothing here, so the status is shown as the daemon wrote it."""
    import time

    from ivm_layer.daemon.status import format_status

    st = {"daemon": "d", "pid": 2**22 + 7, "host": "elsewhere-host", "state": "running",
          "started_at": time.time() - 5, "batches": 3, "master": "local[2]", "shards": 1}
    text = format_status(st)
    assert "on elsewhere-host  running" in text and "crashed" not in text
    import socket

    assert "stopped (the process is gone" in format_status(dict(st, host=socket.gethostname()))


def test_secret_spark_settings_are_not_written_to_the_status():
    """``--conf`` values of credential settings (for ``--shards N`` executors, or s3a) are
    shown as ``***`` in the status file; other settings as Spark reads them back."""
    from ivm_layer.daemon.runner import SECRET_SETTING

    hidden = ["spark.hadoop.fs.s3a.secret.key", "spark.hadoop.fs.s3a.access.key",
              "spark.executorEnv.AWS_SECRET_ACCESS_KEY", "spark.executorEnv.AWS_SESSION_TOKEN",
              "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net"]
    shown = ["spark.sql.shuffle.partitions", "spark.ui.port", "spark.executorEnv.AWS_ENDPOINT_URL"]
    assert all(SECRET_SETTING.search(k) for k in hidden)
    assert not any(SECRET_SETTING.search(k) for k in shown)
