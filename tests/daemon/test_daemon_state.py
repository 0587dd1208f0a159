"""The daemon's engine state and checkpoints without Spark or PostgreSQL: one store of base rows
(the views'), snapshot + append-only log in the typed-JSON checkpoint format, never a pickle."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import os
import pickle
import random
from collections import Counter

import pytest

from ivm_layer import compile_view
from ivm_layer.bench.daemon_workload import valid_changes
from ivm_layer.daemon.state import (
    EngineState,
    StateError,
    ViewDef,
    batch_changes,
    decode_changes,
    encode_changes,
    last_batch_in,
    open_checkpoint,
    parse_views,
)
from ivm_layer.errors import IVMError, UpdateError
from ivm_layer.maintain import checkpoint as ckpt

SCHEMA = {"r": {"a": "integer", "k": "integer", "f": "double precision", "d": "date"},
          "s": {"k": "integer", "name": "text", "amt": "numeric"}}
JOIN = "SELECT r.a, r.f, r.d, s.name, s.amt FROM r JOIN s ON r.k = s.k"
GROUPED = "SELECT s.k, COUNT(*) AS n FROM s GROUP BY s.k"
DEFS = [ViewDef("j", JOIN, False, ["r", "s"]), ViewDef("g", GROUPED, True, ["s"])]


def _recover(directory: str, defs: list, state) -> int:
    """Open the engine checkpoint in ``directory`` and load it into ``state``: the last batch id."""
    return state.recover(open_checkpoint(directory, defs))[0]


def _row(rnd: random.Random, table: str) -> tuple:
    if table == "r":
        f = rnd.choice([None, 0.5, -1.25, math.inf, 1e300])
        d = rnd.choice([None, dt.date(2024, 1, rnd.randint(1, 28))])
        return (rnd.randint(0, 5), rnd.choice([None, 0, 1, 2]), f, d)
    return (rnd.choice([None, 0, 1, 2]), rnd.choice(["x", "y", None, "é\n\"q\""]),
            rnd.choice([None, decimal.Decimal("1.10"), decimal.Decimal(-3)]))


def _stream(seed: int, steps: int):
    """Consolidated batches of inserts/deletes (duplicates, NULLs, typed values), always valid."""
    for items in valid_changes(random.Random(seed), steps, "rs", _row, 10):
        yield batch_changes([(0, i, t, k, r) for i, (t, r, k) in enumerate(items)], {})


def _state() -> EngineState:
    return EngineState(DEFS, SCHEMA)


def _views(st: EngineState) -> dict:
    return {n: Counter(dict(v.rows())) for n, v in st.views.items()}


def _base(st: EngineState) -> dict:
    return {t: dict(rows) for t, rows in st.base.items()}


def _oracle(st: EngineState) -> dict:
    """Every view recomputed from scratch from the state's base rows."""
    out = {}
    for d in DEFS:
        v = compile_view(d.select_sql, SCHEMA, dialect="postgres")
        v.apply({t: list(st.base[t].items()) for t in v.tables if st.base[t]})
        out[d.name] = Counter(dict(v.rows()))
    return out


class Planted:
    """Unpickling this writes a marker file: proof that a pickle was (not) loaded."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_one_store_of_base_rows():
    st = _state()
    for ch in _stream(1, 10):
        st.apply(ch)
    assert "base" not in vars(st)          # no second copy: base reads the views' own rows
    for t in st.tables:
        assert st.base[t] is not None and dict(st.base[t]) == dict(st.views["j"].base_rows(t))
    assert dict(st.base["s"]) == dict(st.views["g"].base_rows("s"))
    assert _views(st) == _oracle(st)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_recovery_is_snapshot_plus_log_and_equals_applying_everything(tmp_path, seed):
    st = _state()
    store = open_checkpoint(str(tmp_path), DEFS)
    assert store.position == -1 and last_batch_in(str(tmp_path)) == -1
    for b, ch in enumerate(_stream(seed, 14)):
        st.apply(ch)
        store.append(b, ch)
        if b in (3, 9):
            store.write_snapshot({"batch": b}, st.base, b)
    assert store.position == 13 and store.log_entries == 4
    assert last_batch_in(str(tmp_path)) == 13
    again = _state()
    reopened = open_checkpoint(str(tmp_path), DEFS)
    assert again.recover(reopened)[0] == 13 and reopened.log_entries == 4
    assert _base(again) == _base(st) and _views(again) == _views(st) == _oracle(st)
    # one object per batch since the last snapshot (snap-10 covers batches 0-9), nothing older
    assert sorted(os.listdir(tmp_path)) == [f"logs-{10:020d}", f"snap-{10:020d}", "views.json"]
    logs = tmp_path / f"logs-{10:020d}"
    assert sorted(os.listdir(logs)) == [f"log-{b:020d}" for b in (10, 11, 12, 13)]
    files = [tmp_path / f"snap-{10:020d}", tmp_path / "views.json", *logs.iterdir()]
    assert all(os.stat(p).st_mode & 0o077 == 0 for p in [*files, logs])
    # the recovered store goes on: more batches, recover again
    for b, ch in enumerate(_stream(seed + 100, 3), start=14):
        again.apply(ch)
        reopened.append(b, ch)
    third = _state()
    assert _recover(str(tmp_path), DEFS, third) == 16
    assert _views(third) == _views(again) == _oracle(again)


def test_a_gap_in_the_log_is_refused_and_leftovers_are_ignored(tmp_path):
    """Objects are written whole (no torn line); a missing batch in the middle of the log is
    damage, refused; logs a newer snapshot covers (a crash before they were deleted) are
    ignored."""
    st = _state()
    store = open_checkpoint(str(tmp_path), DEFS)
    batches = list(_stream(7, 6))
    for b, ch in enumerate(batches[:5]):
        st.apply(ch)
        store.append(b, ch)
    assert last_batch_in(str(tmp_path)) == 4
    log2 = tmp_path / f"logs-{0:020d}" / f"log-{2:020d}"
    kept = log2.read_bytes()
    log2.unlink()
    with pytest.raises(StateError, match="log of batch 2 is missing"):
        _recover(str(tmp_path), DEFS, _state())
    log2.write_bytes(kept)
    os.chmod(log2, 0o600)
    store.write_snapshot({"batch": 4}, st.base, 4)
    assert not log2.parent.exists()                      # the snapshot's older logs are gone
    log2.parent.mkdir(mode=0o700)
    log2.write_bytes(kept)                               # as if the deletes had not run
    again = _state()
    store2 = open_checkpoint(str(tmp_path), DEFS)
    assert again.recover(store2)[0] == 4
    assert _views(again) == _views(st)
    again.apply(batches[5])
    store2.append(5, batches[5])
    third = _state()
    assert _recover(str(tmp_path), DEFS, third) == 5
    assert _views(third) == _views(again) == _oracle(again)


def test_a_checkpoint_of_the_previous_layout_is_converted_exactly(tmp_path):
    """``state.snap`` + appended ``state.log`` (the previous release) become objects, with the
    logged batches kept apart (``hold_after``: a sink may still lack them)."""
    from pathlib import Path

    from ivm_layer.maintain.checkpoint import CheckpointStore

    st = _state()
    old = CheckpointStore(Path(tmp_path), "state", columnar=True, sync_each=True)
    batches = list(_stream(4, 6))
    old.write_snapshot({"batch": -1}, {}, -1)
    for b, ch in enumerate(batches):
        st.apply(ch)
        old.append(b, ch)
        if b == 2:
            old.write_snapshot({"batch": 2}, st.base, 2)
    old.close()
    assert last_batch_in(str(tmp_path)) == 5
    again = _state()
    store = open_checkpoint(str(tmp_path), DEFS)
    last, held = again.recover(store, hold_after=4)
    assert last == 5 and [b for b, _ in held] == [5]
    for _, ch in held:
        again.apply(ch)
    assert _views(again) == _views(st) == _oracle(st)
    assert not (tmp_path / "state.snap").exists() and not (tmp_path / "state.log").exists()


def test_a_lost_snapshot_is_not_mistaken_for_a_fresh_checkpoint(tmp_path):
    store = open_checkpoint(str(tmp_path), DEFS)
    store.append(0, next(_stream(2, 1)))
    for n in os.listdir(tmp_path):
        if n.startswith("snap-"):
            (tmp_path / n).unlink()
    with pytest.raises(StateError, match="lost its snapshot"):
        open_checkpoint(str(tmp_path), DEFS)


def test_no_pickle_is_ever_loaded(tmp_path):
    marker = str(tmp_path / "ran")
    payload = pickle.dumps(Planted(marker))
    # 1. an old (pickle) checkpoint directory is refused, with how to start over
    old = tmp_path / "old"
    (old / "log").mkdir(parents=True, mode=0o700)
    (old / "snapshot-000000000004.pkl").write_bytes(payload)
    (old / "log" / "000000000005.pkl").write_bytes(payload)
    for call in (lambda: last_batch_in(str(old)), lambda: open_checkpoint(str(old), DEFS)):
        with pytest.raises(StateError, match="older version.*pickles.*new --checkpoint"):
            call()
    (old / "snapshot-000000000004.pkl").unlink()
    with pytest.raises(StateError, match="pickles"):      # a planted log pickle alone is refused too
        open_checkpoint(str(old), DEFS)
    # 2. a pickle planted under the new names is malformed JSON, not code
    new = tmp_path / "new"
    st = _state()
    store = open_checkpoint(str(new), DEFS)
    ch = next(_stream(1, 1))
    st.apply(ch)
    store.append(0, ch)
    snap = new / f"snap-{0:020d}"
    snap.write_bytes(payload)
    os.chmod(snap, 0o600)
    with pytest.raises(StateError, match="malformed"):
        _recover(str(new), DEFS, _state())
    store.write_snapshot({"batch": 0}, st.base, 0)
    (new / f"logs-{1:020d}").mkdir(mode=0o700)
    (new / f"logs-{1:020d}" / f"log-{1:020d}").write_bytes(payload + b"\n")
    with pytest.raises(StateError, match="malformed"):
        _recover(str(new), DEFS, _state())
    # 3. the shards' in-memory snapshot (EngineState.load) refuses a pickle
    with pytest.raises(StateError, match="not an engine state snapshot"):
        _state().load(payload)
    # ... and so do the shards' logged batches (encode_changes / decode_changes)
    with pytest.raises(StateError, match="not a batch"):
        decode_changes(payload)
    assert decode_changes(encode_changes(ch)) == ch
    # 4. files others can write are refused
    os.chmod(new, 0o777)
    with pytest.raises(StateError, match="written by other users"):
        open_checkpoint(str(new), DEFS)
    assert not os.path.exists(marker)


def test_dump_load_round_trip_with_typed_values():
    st = _state()
    for ch in _stream(11, 12):
        st.apply(ch)
    st.apply({"r": {(9, 1, math.nan, None): 2}})
    data = st.dump()
    assert not data.startswith(b"\x80")      # not a pickle
    again = _state()
    again.load(data)
    assert repr(sorted(map(repr, _base(again).items()))) == repr(sorted(map(repr, _base(st).items())))
    assert _views(again).keys() == _views(st).keys()
    assert len(again.views["j"]) == len(st.views["j"])
    with pytest.raises(StateError, match="empty state"):
        again.load(data)


def test_truncate_expands_against_the_engine_rows():
    st = _state()
    st.apply({"s": {(1, "x", None): 2, (2, "y", None): 1}, "r": {(5, 1, None, None): 1}})
    rows = [(10, 0, "s", 1, (3, "z", None)), (11, 0, "s", 0, None), (11, 1, "s", 1, (1, "x", None))]
    ch = batch_changes(rows, st.base)
    assert ch == {"s": {(1, "x", None): -1, (2, "y", None): -1}}
    out = st.apply(ch)
    assert dict(st.base["s"]) == {(1, "x", None): 1}
    assert Counter(dict(out["g"])) == Counter({(1, 2): -1, (1, 1): 1, (2, 1): -1})
    assert _views(st) == _oracle(st)


@pytest.mark.parametrize("order", [1, -1])
def test_a_bad_batch_changes_nothing(order):
    st = EngineState(DEFS[::order], SCHEMA)    # -1: view g prepares its share before j fails
    for ch in _stream(5, 6):
        st.apply(ch)
    before_views, before_base = _views(st), _base(st)
    bad = [
        {"r": {(1, 1, None, None): 1}, "s": {(42, "nope", None): -1}},     # delete of a missing row
        {"s": {(1, "x", None): 1}, "r": {(1, 2): 1}},                      # a row of the wrong arity
        {"s": {(1, "x", None): 1}, "nosuch": {(1,): 1}},                   # a table no view reads
    ]
    for ch in bad:
        with pytest.raises(UpdateError):
            st.apply(ch)
        assert _views(st) == before_views and _base(st) == before_base
    with pytest.raises(IVMError, match="does not hold"):
        st.apply(bad[0])


STATIC_SCHEMA = {"o": {"id": "integer", "nk": "integer"}, "n": {"nk": "integer", "name": "text"},
                 "y": {"nk": "integer", "d": "integer"}, "z": {"c": "integer", "d": "integer"}}
STATIC_VIEWS = """
CREATE INCREMENTAL VIEW sv WITH (static = 'n') AS SELECT o.id, n.name FROM o JOIN n ON o.nk = n.nk;
CREATE INCREMENTAL VIEW dv AS SELECT o.id, n.name FROM o JOIN n ON o.nk = n.nk;
CREATE INCREMENTAL VIEW pj WITH (static = 'y, z') AS
  SELECT o.id, o.nk FROM o JOIN n ON o.nk = n.nk JOIN y ON y.nk = o.nk JOIN z ON z.c = n.nk AND z.d = y.d;
"""


def _static_oracle(st: EngineState) -> dict:
    out = {}
    for d in st.defs:
        v = compile_view(d.select_sql, STATIC_SCHEMA, dialect="postgres")
        v.apply({t: list(st.base[t].items()) for t in v.tables if st.base[t]})
        out[d.name] = Counter(dict(v.rows()))
    return out


def test_static_rebuild_reads_the_engine_rows(tmp_path):
    """Static tables (one shared with a view where it is dynamic, two in a pre-joined part):
    a change to one rebuilds the view from its own rows; a bad static change changes nothing;
    snapshot + log recovery equals the live state."""
    defs = parse_views(STATIC_VIEWS)
    st = EngineState(defs, STATIC_SCHEMA)
    store = open_checkpoint(str(tmp_path), defs)
    rnd = random.Random(2)
    seen = {d.name: Counter() for d in defs}

    def feed(b, changes):
        for name, change in st.apply(changes).items():
            for row, k in change:
                seen[name][row] += k
        store.append(b, changes)

    feed(0, {"n": {(i, f"n{i}"): 1 for i in range(4)}, "y": {(i, i % 2): 1 for i in range(4)},
             "z": {(i, i % 2): 1 for i in range(4)}})
    feed(1, {"o": {(i, i % 4): 1 for i in range(12)}})
    assert st.rebuilds == {"sv": 0, "dv": 0, "pj": 0}
    for b in range(2, 14):
        if b % 4 == 0:
            feed(b, {"n": {(rnd.randint(0, 5), f"x{b}"): 1}})
        elif b % 5 == 0:
            feed(b, {"z": {(rnd.randint(0, 5), rnd.randint(0, 1)): 1}})
        else:
            feed(b, {"o": {(100 + b, rnd.randint(0, 5)): 1}})
        if b == 7:
            store.write_snapshot({"batch": b}, st.base, b)
        assert {n: +c for n, c in seen.items()} == _views_of(st) == _static_oracle(st)
    assert st.rebuilds["sv"] == 3 and st.rebuilds["pj"] == 2 and st.rebuilds["dv"] == 0
    before = _views_of(st), {t: dict(r) for t, r in st.base.items()}
    with pytest.raises(UpdateError, match="does not hold"):
        st.apply({"o": {(999, 1): 1}, "z": {(77, 77): -1}})
    assert (_views_of(st), {t: dict(r) for t, r in st.base.items()}) == before
    again = EngineState(defs, STATIC_SCHEMA)
    assert _recover(str(tmp_path), defs, again) == 13
    assert _views_of(again) == _views_of(st)


def _views_of(st: EngineState) -> dict:
    return {n: Counter(dict(v.rows())) for n, v in st.views.items()}


def test_columnar_chunks_round_trip_and_refuse_malformed_input():
    rows = [((1, "a", None, True, 1.5, math.nan, decimal.Decimal("NaN"), dt.datetime(2024, 5, 1, 3, 4),
              b"\x00\xff", (1, None, "x")), 3),
            ((2, "b", None, False, -0.0, math.inf, decimal.Decimal("2.50"), dt.datetime(2024, 5, 1, 3, 4,
              tzinfo=dt.UTC), b"", ()), 1)]
    back = ckpt.decode_columns(json.loads(json.dumps(ckpt.encode_columns(rows))))
    assert repr(back) == repr(rows)
    plain = [((i, f"s{i}", None), 1) for i in range(5)]
    enc = ckpt.encode_columns(plain)
    assert enc["k"] is None and all(type(c) is list for c in enc["cols"])
    assert ckpt.decode_columns(enc) == plain
    assert ckpt.decode_columns({"n": 2, "cols": [], "k": [1, 2]}) == [((), 1), ((), 2)]
    for bad in ({"n": 2, "cols": [[1, 2], [1]], "k": None},          # ragged columns
                {"n": 1, "cols": [[[1, 2]]], "k": None},              # a list where a plain value goes
                {"n": 1, "cols": [{"v": [["zz", 1]]}], "k": None},    # an unknown tag
                {"n": 1, "cols": [[1]], "k": ["1"]},                  # a count that is not an int
                {"cols": [[1]], "k": None}):
        with pytest.raises(ckpt.CheckpointError):
            ckpt.decode_columns(bad)


def _is_nan(v) -> bool:
    return isinstance(v, float) and v != v


def test_columns_of_one_type_decode_column_wise_like_value_by_value():
    """A column of floats, decimals, timestamps, dates or times decodes with one ``map`` (no
    Python call per value): the same values as value by value, NaN the canonical one."""
    from ivm_layer.engine.values import NAN, canonical_float

    cols = [[1.5, -0.0, math.inf, 1e-300], [1.5, math.nan], [decimal.Decimal("NaN"), decimal.Decimal("2.50")],
            [dt.datetime(2024, 5, 1, 3, 4, tzinfo=dt.UTC), dt.datetime(2024, 5, 1)], [dt.date(2024, 1, 2)] * 2,
            [dt.time(1, 2, 3), dt.time(0)], [1.5, None], [1.0, decimal.Decimal(1)]]
    for col in cols:
        enc = json.loads(json.dumps(ckpt.encode_columns([((v,), 1) for v in col])))
        back = [r[0] for r, _ in ckpt.decode_columns(enc)]
        assert repr(back) == repr(col)
        assert [type(v) for v in back if v is not NAN] == [type(v) for v in col if not _is_nan(v)]
        assert [v is NAN for v in back] == [_is_nan(v) for v in col]   # every float NaN the one SQL NaN
    nan = ckpt.decode_columns(ckpt.encode_columns([((math.nan,), 1), ((2.0,), 1)]))[0][0][0]
    assert nan is canonical_float(math.nan) is NAN
    for bad in (["f", "zz"], ["ts", "2024-13-01"], ["n", "x"]):
        with pytest.raises(ckpt.CheckpointError):
            ckpt.decode_columns({"n": 2, "cols": [{"v": [bad, bad]}], "k": None})
