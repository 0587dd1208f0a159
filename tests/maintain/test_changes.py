"""``Changes``: the one shape of a batch — consolidated, no zero entries, built in O(rows)
from every edge's shape, and exactly what the engine and the checkpoint log take."""

from __future__ import annotations

import math
import random
from collections import Counter

from ivm_layer import compile_view
from ivm_layer.engine.values import NAN
from ivm_layer.maintain.changes import Changes


def test_consolidates_and_drops_zeros():
    c = Changes()
    c.add("r", (1,), 1)
    c.add("r", (1,), -1)
    assert c == {} and "r" not in c           # a row inserted and deleted: not there at all
    c.add_rows("r", [(1,), (2,), (1,)], 1)
    c.add_pairs("s", [((3,), 2), ((3,), -2), ((4,), -1)])
    assert c == {"r": {(1,): 2, (2,): 1}, "s": {(4,): -1}}
    assert c.size == 3 and c.volume() == 4
    assert c.negated() == {"r": {(1,): -2, (2,): -1}, "s": {(4,): 1}}
    assert c.only(["s", "x"]) == {"s": {(4,): -1}}
    assert Changes().merge(c).merge(c.negated()) == {}


def test_every_shape_callers_hold_becomes_the_same_changes():
    pairs = {"r": [((1, "a"), 1), ((1, "a"), 1), ((2, None), 1), ((2, None), -1)]}
    want = {"r": {(1, "a"): 2}}
    assert Changes.of(pairs) == want
    assert Changes.of({"r": {(1, "a"): 2}}) == want
    assert Changes.of({"r": Counter({(1, "a"): 2, (3, "c"): 0})}) == want
    c = Changes.of(pairs)
    assert Changes.of(c) is c
    upd = Changes.from_rows("r", deleted=[(1, "a"), (2, "b")], inserted=[(1, "a"), (2, "c")])
    assert upd == {"r": {(2, "b"): -1, (2, "c"): 1}}        # an UPDATE that left (1, 'a') alone


def test_truncate_is_relative_to_the_rows_held_before():
    held = {(1,): 2, (2,): 1}
    c = Changes()
    c.add("t", (3,), 1)                    # added earlier in the batch, then truncated
    c.truncate("t", held)
    c.add("t", (1,), 1)                    # re-inserted after the TRUNCATE
    assert c == {"t": {(1,): -1, (2,): -1}}
    assert c.applied_to(held, "t") == {(1,): 1}
    empty = Changes()
    empty.truncate("t", {})
    assert empty == {}


def test_canonical_nan_from_duckdb_rows_meets_the_engines_rows():
    c = Changes.from_rows("r", deleted=[(float("nan"), 1)], inserted=[(float("nan"), 1)], canonical=True)
    assert c == {}                                   # one NaN: the update cancels out
    d = Changes.from_rows("r", inserted=[(math.nan, 1)], canonical=True)
    (row,) = d["r"]
    assert row[0] is NAN


def test_the_engine_takes_a_changes_batch_unchanged():
    rnd = random.Random(3)
    v = compile_view("SELECT r.a, s.b FROM r JOIN s ON r.k = s.k", {"r": ["a", "k"], "s": ["k", "b"]})
    held: dict = {"r": Counter(), "s": Counter()}
    for _ in range(40):
        c = Changes()
        for _ in range(rnd.randint(1, 6)):
            t = rnd.choice("rs")
            row = (rnd.randint(0, 3), rnd.randint(0, 2))
            if held[t][row] + c.get(t, {}).get(row, 0) > 0 and rnd.random() < 0.4:
                c.add(t, row, -1)
            else:
                c.add(t, row, 1)
        v.apply(c.batch())
        for t, d in c.items():
            held[t].update(d)
        oracle = Counter()
        for (a, k), m in held["r"].items():
            for (k2, b), n in held["s"].items():
                if k == k2:
                    oracle[(a, b)] += m * n
        assert Counter(dict(v.rows())) == +oracle
