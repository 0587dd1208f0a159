"""Inequality chains with an equality key on one edge (000 Q5/Q6/Q8/Q9: a < d < g with
R.k = S.k or S.k = T.k). The planner picks the GJT whose keyless edge sits at the derived top
join (planner/layout.py), so an update of the keyed side fans out only inside its key group
instead of over the whole relation. Randomized against DuckDB: both key positions, both
directions of each inequality, offsets, self-joins, projections, NULLs, duplicates, deletes,
batches and diffs (delta enumeration)."""

from __future__ import annotations

import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from querygen import Pred, Query, chain_atoms, finish_query, random_ineq, render_sql
from test_differential import run_random_queries

import ivm_layer
from ivm_layer.planner.layout import rank

SCHEMA = {"r": ["r_a", "r_b", "r_c"], "s": ["s_a", "s_b"], "t": ["t_a", "t_b"]}


def _query(rng: random.Random) -> Query:
    tables, atoms = chain_atoms(rng, SCHEMA)
    cols = {i: rng.sample(SCHEMA[tables[i]], 2) for i in range(3)}  # (inequality column, key column)
    mid = ("x1", cols[1][0])
    preds = [random_ineq(rng, ("x0", cols[0][0]), mid), random_ineq(rng, mid, ("x2", cols[2][0]))]
    keyed = rng.choice((0, 2))  # the edge R–S (Q5) or S–T (Q6) carries the key
    preds.append(Pred(("x1", cols[1][1]), "=", (f"x{keyed}", cols[keyed][1])))
    if rng.random() < 0.25:
        preds.append(Pred(("x0", cols[0][0]), rng.choice(("<", ">=")), None, const=rng.randint(1, 4)))
    return finish_query(rng, SCHEMA, tables, atoms, preds, 0.5, 2)


def _no_keyless_fanout(view) -> bool:
    """No leaf's update path fans out over a whole relation (layout's class 3 = Θ(n))."""
    plan = getattr(view, "plan", None)
    return plan is not None and max(rank(plan.root)) < 3


def test_keyed_chains_match_duckdb():
    cases, good = run_random_queries(_query, range(47_000, 47_030), n_steps=60, iter_every=9,
                                     uses=_no_keyless_fanout)
    assert cases >= 25
    assert good >= 12, f"only {good} of {cases} keyed chains got a tree without a keyless fan-out"


def _schema():
    return {"r": ["a", "k"], "s": ["d", "k"], "t": ["g", "k"]}


def test_q5_and_q6_fan_out_only_inside_the_key_group():
    """An insert of the keyed side moves at most its key group's tuples, not the relation."""
    for sql, keyed in (("SELECT * FROM r, s, t WHERE r.a < s.d AND s.d < t.g AND r.k = s.k", "r"),
                       ("SELECT * FROM r, s, t WHERE r.a < s.d AND s.d < t.g AND s.k = t.k", "t")):
        v = ivm_layer.compile_view(sql, _schema())
        rows = {t: [((i, i % 20), 1) for i in range(400)] for t in ("r", "s", "t")}
        v.apply(rows)
        atom = next(i for i, a in enumerate(v.plan.gcq.atoms) if a.relation == keyed)
        record = {}
        v._trep.propagate(atom, {(200, 3): 1} if keyed == "r" else {(201, 3): 1}, record)
        # below the derived top join (whose recorded delta is only the output change to enumerate)
        top = {v._trep.virtual.p.id, v._trep.root.id}
        assert max(len(d) for nid, d in record.items() if nid not in top) <= 20, sql  # k = 3's group
        v._trep.propagate(atom, {(200, 3): -1} if keyed == "r" else {(201, 3): -1})
        other = "t" if keyed == "r" else "r"
        before = v.stats()["index_entries"]
        v.insert(other, (200, 3))  # the keyless side: one range sum at the derived top join
        assert v.stats()["index_entries"] - before <= 3, sql
        assert len(v) == sum(m for _, m in v.rows())
        assert "tuples with equal" in v.explain() and "derived join" in v.explain()


def _frontier_query(rng: random.Random) -> Query:
    """Q9's shape: the key on the S–T edge and R not in the output, so R hangs below N's
    frontier (the derived keyed chain, engine/keyedchain.py), plus variations."""
    q = _query(rng)
    keyed = next(p for p in q.preds if p.op == "=")
    if keyed.right[0] == "x0":  # move the key to the x1–x2 edge
        cols = SCHEMA[dict(q.atoms)["x2"]]
        other = next(c for c in cols if all(p.left != ("x2", c) and p.right != ("x2", c) for p in q.preds)
                     ) if len(cols) > 1 else cols[0]
        q.preds[q.preds.index(keyed)] = Pred(keyed.left, "=", ("x2", other))
    every = [(a, c) for a, t in q.atoms if a != "x0" for c in SCHEMA[t]]
    q.select = rng.sample(every, rng.randint(2, len(every))) if rng.random() < 0.5 else every
    q.sql = render_sql(q, rng)
    return q


def test_derived_keyed_chain_matches_duckdb():
    cases, used = run_random_queries(_frontier_query, range(48_000, 48_030), n_steps=60, iter_every=7,
                                     uses=lambda v: getattr(getattr(v, "_trep", None), "kchain", None) is not None)
    assert cases >= 25
    assert used >= 10, f"only {used} of {cases} queries used the derived keyed chain"


def test_q9_r_update_touches_no_index_entry_of_s():
    sql = "SELECT s.d, s.k, t.g FROM r, s, t WHERE r.a < s.d AND s.d < t.g AND s.k = t.k"
    v = ivm_layer.compile_view(sql, _schema())
    assert v._trep.kchain is not None
    v.apply({t: [((i, i % 20), 1) for i in range(400)] for t in ("r", "s", "t")})
    before = v.stats()["index_entries"]
    v.insert("r", (-5, 0))  # partners every S tuple: no fan-out
    assert v.stats()["index_entries"] - before <= 2
    assert len(v) == sum(m for _, m in v.rows())
    assert v.contains((10, 10, 30)) == 11  # r.a < 10: 10 rows plus (-5, 0)
    assert "derived keyed chain" in v.explain() and "O(log n) delay" in v.explain()


def test_planner_keeps_the_tree_with_the_cheaper_worst_path():
    """Q5: Algorithm 3's own tree fans T out over every S tuple (Θ(n)); the keys-first tree
    (keyless edge at the derived top join) is chosen. Q4 (no key): both orders agree."""
    from ivm_layer.planner.layout import modelled_derived

    v5 = ivm_layer.compile_view("SELECT * FROM r, s, t WHERE r.a < s.d AND s.d < t.g AND r.k = s.k", _schema())
    top = v5.plan.root.children[0]
    assert top.vars == frozenset({"t.g"}) and max(rank(v5.plan.root)) == 2
    assert {c.id for c in top.children} <= modelled_derived(v5.plan.root)
    v4 = ivm_layer.compile_view("SELECT * FROM r, s, t WHERE r.a < s.d AND s.d < t.g", _schema())
    assert v4._trep.chain is not None and max(rank(v4.plan.root)) == 1
