"""The derived chain (engine/chain.py): the join below the derived top join of an inequality
chain (000 Q4/Q7: a < d < g) is not stored, so an update of any of the three tables costs
O(log n). Randomized against DuckDB: every side, batches and diffs (delta enumeration),
deletes, self-joins, offsets, both directions of each inequality, projections, NULLs."""

from __future__ import annotations

import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from querygen import Pred, Query, chain_atoms, finish_query, random_ineq
from test_differential import run_random_queries

import ivm_layer
from ivm_layer.engine import pairaxis

SCHEMA = {"r": ["r_a", "r_b", "r_c"], "s": ["s_a", "s_b"], "t": ["t_a", "t_b"]}


def _query(rng: random.Random) -> Query:
    tables, atoms = chain_atoms(rng, SCHEMA)
    mid = ("x1", rng.choice(SCHEMA[tables[1]]))

    def col(i):
        return (atoms[i][0], rng.choice(SCHEMA[atoms[i][1]]))

    preds = [random_ineq(rng, col(0), mid), random_ineq(rng, mid, col(2))]
    if rng.random() < 0.3:
        preds.append(Pred(col(0), rng.choice(("<", ">=")), None, const=rng.randint(1, 4)))
    return finish_query(rng, SCHEMA, tables, atoms, preds, 0.4, 3)


def test_chain_matches_duckdb(monkeypatch):
    # tiny chunks for half the cases: the axis splits and drops chunks inside the engine too
    cases, chains = run_random_queries(
        _query, range(31_000, 31_030), n_steps=70, iter_every=9, uses=lambda v: v._trep.chain is not None,
        before=lambda seed: monkeypatch.setattr(pairaxis, "CHUNK", 2 if seed % 2 else 128))
    assert cases >= 25
    assert chains >= 12, f"only {chains} of {cases} queries used the derived chain"


def test_chain_keeps_no_fanout_state():
    """An insert into R of Q4 touches O(1) index entries (ρ of {s.d} is not stored)."""
    schema = {"r": ["a", "b"], "s": ["d", "e"], "t": ["g", "h"]}
    v = ivm_layer.compile_view("SELECT * FROM r, s, t WHERE r.a < s.d AND s.d < t.g", schema)
    assert v._trep.chain is not None
    v.apply({"s": [((i, 0), 1) for i in range(300)], "t": [((i, 0), 1) for i in range(300)]})
    before = v.stats()["index_entries"]
    v.insert("r", (-1, 0))
    assert v.stats()["index_entries"] - before <= 3
    assert len(v) == 300 * 299 // 2 == sum(k for _, k in v.rows())
    assert v.contains((-1, 0, 5, 0, 9, 0)) == 1 and v.contains((-1, 0, 5, 0, 5, 0)) == 0
    v.delete("r", (-1, 0))
    assert len(v) == 0 and list(v.rows()) == []
    assert "derived chain" in v.explain()


def test_pair_axis_folds_match_brute_force():
    old = pairaxis.CHUNK
    pairaxis.CHUNK = 4  # small chunks: splits, merges and the tree are exercised
    try:
        rng = random.Random(3)
        for _ in range(6):
            ax, ref = pairaxis.PairAxis(), {}
            for _ in range(300):
                s = rng.randrange(3)
                k = (rng.randrange(40), 1 if s == 1 else rng.choice((0, 2)))
                cur = ref.get((s, k), 0)
                d = max(rng.choice((1, 2, -1, -2)), -cur)
                ref[(s, k)] = cur + d
                ax.add(s, k, d)
                q = (rng.randrange(42), rng.randrange(3))
                items = sorted((k, s, w) for (s, k), w in ref.items() if w)

                def fold(its):
                    x = y = z = xy = yz = 0
                    for _, s_, w in its:
                        if s_ == 0:
                            x += w
                        elif s_ == 1:
                            xy += w * x
                            y += w
                        else:
                            yz += w * y
                            z += w
                    return (x, y, z, xy, yz)

                assert ax.prefix(q) == fold([i for i in items if i[0] < q])
                assert ax.total() == fold(items)
                assert pairaxis.suffix(ax.total(), ax.prefix(q)) == fold([i for i in items if i[0] >= q])
    finally:
        pairaxis.CHUNK = old
