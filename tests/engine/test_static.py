"""Static tables (paper 003, STATIC_TABLES.md): the documented cases, classification, plans."""

import random

import pytest

from ivm_layer import compile_view
from ivm_layer.errors import IVMError, UpdateError
from ivm_layer.planner.static import C_EXP, C_LIN, C_POLY, OUTSIDE, classify
from ivm_layer.query import GCQ, Atom


def rows(v):
    return sorted(v.rows())


def dynamic_leaves_on_guard_paths(v):
    rep = v.plan.guards()
    dyn = [a for a in rep.leaves if a not in v.plan.static_atoms]
    return bool(dyn) and all(rep.leaves[a].guard_path and rep.leaves[a].cost == "O(1)" for a in dyn)


def test_t1_q1_c_lin():
    v = compile_view("SELECT r.a, s.b, t.c FROM r JOIN s ON r.a = s.a JOIN t ON s.b = t.b",
                     {"r": ["a", "d"], "s": ["a", "b"], "t": ["b", "c"]}, static=("t",))
    v.apply({"t": [((1, 10), 1), ((1, 11), 1), ((2, 20), 1)]})
    v.apply({"r": [((1, "x"), 1), ((1, "y"), 1), ((2, "z"), 1)],
             "s": [((1, 1), 1), ((1, 2), 1), ((2, 2), 1), ((3, 1), 1)]})
    assert rows(v) == sorted({(1, 1, 10): 2, (1, 1, 11): 2, (1, 2, 20): 2, (2, 2, 20): 1}.items())
    v.insert("r", (3, "w"))
    assert rows(v) == sorted({(1, 1, 10): 2, (1, 1, 11): 2, (1, 2, 20): 2, (2, 2, 20): 1,
                              (3, 1, 10): 1, (3, 1, 11): 1}.items())
    v.delete("s", (1, 1))
    assert rows(v) == sorted({(1, 2, 20): 2, (2, 2, 20): 1, (3, 1, 10): 1, (3, 1, 11): 1}.items())
    v.delete("r", (1, "x"))
    before = rows(v)
    assert before == sorted({(1, 2, 20): 1, (2, 2, 20): 1, (3, 1, 10): 1, (3, 1, 11): 1}.items())
    with pytest.raises(UpdateError, match="static"):
        v.insert("t", (5, 5))
    with pytest.raises(UpdateError, match="static"):
        v.apply({"r": [((9, "q"), 1)], "t": [((5, 5), 1)]})
    assert rows(v) == before and len(v) == 4
    assert "C_lin" in v.explain()
    assert dynamic_leaves_on_guard_paths(v)


def test_t2_three_path_middle_dynamic_c_lin():
    v = compile_view("SELECT r.a, r.b, s.c, t.d FROM r JOIN s ON r.b = s.b JOIN t ON s.c = t.c",
                     {"r": ["a", "b"], "s": ["b", "c"], "t": ["c", "d"]}, static=("r", "t"))
    v.apply({"r": [((1, 5), 1), ((2, 5), 1), ((3, 6), 1)], "t": [((7, 9), 1), ((7, 10), 1), ((8, 11), 1)]})
    assert rows(v) == []
    v.insert("s", (5, 7))
    assert rows(v) == [((1, 5, 7, 9), 1), ((1, 5, 7, 10), 1), ((2, 5, 7, 9), 1), ((2, 5, 7, 10), 1)]
    v.insert("s", (6, 8))
    assert ((3, 6, 8, 11), 1) in rows(v) and len(v) == 5
    v.delete("s", (5, 7))
    assert rows(v) == [((3, 6, 8, 11), 1)]
    assert dynamic_leaves_on_guard_paths(v) and "C_lin" in v.explain()


def test_t3_q3_not_c_lin_correct_and_honest():
    v = compile_view("SELECT r.a, s.b FROM r JOIN s ON r.a = s.a JOIN t ON s.b = t.b",
                     {"r": ["a"], "s": ["a", "b"], "t": ["b"]}, static=("s",))
    v.apply({"s": [((1, 1), 1), ((1, 2), 1), ((2, 2), 1)], "r": [((1,), 1)], "t": [((2,), 1)]})
    assert rows(v) == [((1, 2), 1)]
    v.insert("t", (1,))
    assert rows(v) == [((1, 1), 1), ((1, 2), 1)]
    v.insert("r", (2,))
    assert rows(v) == [((1, 1), 1), ((1, 2), 1), ((2, 2), 1)]
    text = v.explain()
    assert "not tractable" in text and "C_exp" in text and "s.b" in text and "r.a" in text


def test_t4_static_triangle_under_dynamic_atom():
    v = compile_view("SELECT u.a, u.b, u.c FROM u JOIN r ON r.a=u.a AND r.b=u.b JOIN s ON s.b=u.b AND s.c=u.c "
                     "JOIN t ON t.a=u.a AND t.c=u.c",
                     {"r": ["a", "b"], "s": ["b", "c"], "t": ["a", "c"], "u": ["a", "b", "c"]},
                     static=("r", "s", "t"))
    v.apply({"r": [((1, 2), 1), ((2, 3), 1)], "s": [((2, 3), 1), ((3, 4), 1)], "t": [((1, 3), 1), ((2, 4), 1)]})
    v.apply({"u": [((1, 2, 3), 1), ((2, 3, 4), 1), ((1, 2, 4), 1)]})
    assert rows(v) == [((1, 2, 3), 1), ((2, 3, 4), 1)]
    v.delete("u", (1, 2, 3))
    assert rows(v) == [((2, 3, 4), 1)]
    assert "C_lin" in v.explain() and dynamic_leaves_on_guard_paths(v)


def test_t5_fig4_cyclic_only_through_static_tables_c_poly():
    v = compile_view("SELECT r.a, r.b FROM r JOIN s ON r.a=s.a JOIN y ON y.a=r.a JOIN z ON z.c=s.c AND z.d=y.d",
                     {"r": ["a", "b"], "s": ["a", "c"], "y": ["a", "d"], "z": ["c", "d"]}, static=("y", "z"))
    v.apply({"y": [((1, 1), 1), ((1, 2), 1), ((2, 3), 1), ((3, 9), 1)], "z": [((5, 1), 1), ((6, 3), 1), ((7, 9), 1)]})
    v.apply({"r": [((1, 10), 1), ((2, 20), 1), ((3, 30), 1)],
             "s": [((1, 5), 1), ((1, 7), 1), ((2, 6), 1), ((3, 5), 1)]})
    assert rows(v) == [((1, 10), 1), ((2, 20), 1)]
    v.insert("s", (3, 7))
    assert rows(v) == [((1, 10), 1), ((2, 20), 1), ((3, 30), 1)]
    v.delete("r", (1, 10))
    assert rows(v) == [((2, 20), 1), ((3, 30), 1)]
    text = v.explain()
    assert "C_poly" in text and "static pre-join" in text
    assert dynamic_leaves_on_guard_paths(v)
    with pytest.raises(UpdateError, match="static"):
        v.insert("z", (1, 1))
    assert sorted(v.tables) == ["r", "s", "y", "z"]


def _q(atoms, out):
    return GCQ([Atom(r, r, tuple(vs)) for r, vs in atoms], [], list(out), list(out))


@pytest.mark.parametrize("atoms,static,out,expected", [
    ([("r", "AD"), ("s", "AB"), ("t", "BC")], "t", "ABC", C_LIN),  # Q1
    ([("r", "AD"), ("s", "AB"), ("t", "BC"), ("u", "D")], "st", "ACD", C_POLY),  # Q2
    ([("r", "A"), ("s", "AB"), ("t", "B")], "s", "AB", C_EXP),  # Q3
    ([("r", "AB"), ("s", "AC"), ("t", "BC")], "t", "ABC", OUTSIDE),  # Q4
    ([("r", "AB"), ("s", "AC"), ("t", "BC")], "t", "BC", OUTSIDE),  # Q5
    ([("r", "A"), ("s", "AB"), ("t", "BC"), ("u", "C")], "u", "AB", OUTSIDE),  # Q6
    ([("r", "AB"), ("s", "BC"), ("t", "AC"), ("u", "ABC")], "rst", "ABC", C_LIN),  # Q7
    ([("r", "AB"), ("s", "BC"), ("t", "AC")], "rs", "AC", C_POLY),  # Q8
    ([("r", "AB"), ("s", "AC"), ("y", "AD"), ("z", "CD")], "yz", "AB", C_POLY),  # Fig. 4
    ([("r", "AB"), ("s", "BC"), ("t", "CD")], "rt", "ABCD", C_LIN),  # 3-path
])
def test_classification_table(atoms, static, out, expected):
    q = _q([(r, list(vs)) for r, vs in atoms], list(out))
    klass, _ = classify(q, {i for i, (r, _) in enumerate(atoms) if r in static})
    assert klass == expected


def test_sanity_all_dynamic_is_q_hierarchical_all_static_is_free_connex():
    from ivm_layer.planner.classify import is_q_hierarchical
    from ivm_layer.planner.static import free_connex

    rnd = random.Random(3)
    for _ in range(300):
        n = rnd.randint(1, 4)
        atoms = [(f"r{i}", rnd.sample("ABCDE", rnd.randint(1, 3))) for i in range(n)]
        allv = sorted({v for _, vs in atoms for v in vs})
        out = rnd.sample(allv, rnd.randint(0, len(allv)))
        q = _q(atoms, out)
        edges = [frozenset(vs) for _, vs in atoms]
        lin = classify(q, set())[0] == C_LIN
        assert lin == (is_q_hierarchical(edges, frozenset(out)) and free_connex(edges, frozenset(out)))
        assert (classify(q, set(range(n)))[0] == C_LIN) == free_connex(edges, frozenset(out))


def test_api_errors_and_sql_option():
    schema = {"r": ["a", "d"], "s": ["a", "b"], "t": ["b", "c"]}
    with pytest.raises(IVMError, match="not in the schema"):
        compile_view("SELECT r.a FROM r", schema, static=("nation",))
    v = compile_view("SELECT r.a, s.b, t.c FROM r JOIN s ON r.a = s.a JOIN T ON s.b = T.b", schema, static=("T",))
    v.insert("T", (1, 10))  # loading before the first dynamic update is fine
    v.insert("s", (1, 1))
    v.insert("r", (1, "x"))
    assert list(v.rows()) == [((1, 1, 10), 1)]
    with pytest.raises(UpdateError):
        v.delete("t", (1, 10))
    assert list(v.rows()) == [((1, 1, 10), 1)]
    from ivm_layer.sql.statements import classify as classify_stmt

    st = classify_stmt("CREATE INCREMENTAL MATERIALIZED VIEW v WITH (static = 'nation, Region') AS SELECT 1 AS x")
    assert st.static == ["nation", "region"]
    assert classify_stmt(st.definition()).static == ["nation", "region"]
