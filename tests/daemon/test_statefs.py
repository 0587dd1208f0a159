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
