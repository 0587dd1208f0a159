"""Parameterized views (paper 004, PARAMETERIZED_VIEWS.md): documented cases, classification, API."""

import pytest

from ivm_layer import compile_view
from ivm_layer.errors import IVMError
from ivm_layer.planner.params import cqap0_reason, fracture
from ivm_layer.query import GCQ, Atom


def look(v, *a, **k):
    return sorted(v.lookup(*a, **k))


T1_SQL = ("SELECT r.b, r.c, s.d, t.e FROM r JOIN s ON r.a = s.a AND r.b = s.b JOIN t ON t.a = r.a "
          "WHERE r.a = $a")
T1_SCHEMA = {"r": ["a", "b", "c"], "s": ["a", "b", "d"], "t": ["a", "e"]}


def _load_t1(v):
    v.apply({"r": [((1, 1, 10), 1), ((1, 2, 11), 1), ((2, 1, 12), 1)],
             "s": [((1, 1, 20), 1), ((1, 1, 21), 1), ((2, 2, 22), 1)],
             "t": [((1, 30), 1), ((1, 31), 1), ((2, 32), 1)]})


@pytest.mark.parametrize("spelling", ["placeholder", "params"])
def test_t1_example9_cqap0(spelling):
    if spelling == "placeholder":
        v = compile_view(T1_SQL, T1_SCHEMA)
    else:
        v = compile_view("SELECT r.a, r.b, r.c, s.d, t.e FROM r JOIN s ON r.a = s.a AND r.b = s.b "
                         "JOIN t ON t.a = r.a", T1_SCHEMA, params=("a",))
    assert v.columns == ["b", "c", "d", "e"] and v.params == ["a"]
    _load_t1(v)
    assert look(v, a=1) == [((1, 10, 20, 30), 1), ((1, 10, 20, 31), 1), ((1, 10, 21, 30), 1), ((1, 10, 21, 31), 1)]
    assert look(v, a=2) == [] and look(v, a=3) == [] and look(v, 1) == look(v, a=1)
    v.insert("s", (2, 1, 23))
    assert look(v, a=2) == [((1, 12, 23, 32), 1)]
    v.delete("t", (1, 31))
    assert look(v, a=1) == [((1, 10, 20, 30), 1), ((1, 10, 21, 30), 1)]
    text = v.explain()
    assert "CQAP0" in text and "not CQAP0" not in text
    assert "{r, s}; {t}" in text or "{t}; {r, s}" in text
    assert v.cqap0 and v.plan.guards().simple
    assert sorted(v.rows()) == [((1, 1, 10, 20, 30), 1), ((1, 1, 10, 21, 30), 1), ((2, 1, 12, 23, 32), 1)]
    assert len(v) == 3


def test_t2_three_path_cqap0_via_fracture():
    v = compile_view("SELECT r.a, t.d FROM r JOIN s ON r.b = s.b JOIN t ON s.c = t.c WHERE s.b = $b AND s.c = $c",
                     {"r": ["a", "b"], "s": ["b", "c"], "t": ["c", "d"]})
    v.apply({"r": [((1, 5), 1), ((2, 5), 1), ((3, 6), 1)], "s": [((5, 7), 1), ((6, 8), 1)],
             "t": [((7, 9), 1), ((7, 10), 1), ((8, 11), 1)]})
    assert look(v, b=5, c=7) == [((1, 9), 1), ((1, 10), 1), ((2, 9), 1), ((2, 10), 1)]
    assert look(v, b=5, c=8) == [] and look(v, b=9, c=9) == []
    assert look(v, b=6, c=8) == [((3, 11), 1)]
    v.insert("s", (5, 8))
    assert look(v, 5, 8) == [((1, 11), 1), ((2, 11), 1)]
    v.delete("t", (8, 11))
    assert look(v, b=6, c=8) == []
    assert v.cqap0 and "CQAP0" in v.explain() and v.plan.guards().simple
    assert sorted(v.rows()) == [((5, 7, 1, 9), 1), ((5, 7, 1, 10), 1), ((5, 7, 2, 9), 1), ((5, 7, 2, 10), 1)]
    assert len(v) == 4
    plain = compile_view("SELECT r.a, t.d, s.b, s.c FROM r JOIN s ON r.b = s.b JOIN t ON s.c = t.c",
                         {"r": ["a", "b"], "s": ["b", "c"], "t": ["c", "d"]})
    assert not plain.plan.guards().simple  # the same view without params: Θ(n) updates


def test_t3_not_cqap0_correct_and_honest():
    v = compile_view("SELECT r.b FROM r JOIN s ON r.b = s.b WHERE r.a = ?", {"r": ["a", "b"], "s": ["b"]})
    v.apply({"r": [((1, 1), 1), ((1, 2), 1), ((2, 2), 1)], "s": [((2,), 1)]})
    assert look(v, 1) == [((2,), 1)] and look(v, 2) == [((2,), 1)] and look(v, p1=3) == []
    v.insert("s", (1,))
    assert look(v, 1) == [((1,), 1), ((2,), 1)]
    text = v.explain()
    assert "not CQAP0" in text and "output r.b dominates input r.a" in text
    assert v.params == ["p1"]


def test_t4_bag_multiplicities():
    v = compile_view("SELECT r.a FROM r JOIN s ON r.b = s.b WHERE r.b = $b", {"r": ["a", "b"], "s": ["b", "c"]})
    v.apply({"r": [((1, 5), 1), ((2, 5), 2), ((3, 6), 1)], "s": [((5, 100), 1), ((5, 101), 1), ((6, 102), 1)]})
    assert look(v, b=5) == [((1,), 2), ((2,), 4)]
    assert look(v, b=6) == [((3,), 1)] and look(v, b=7) == [] and look(v, b=None) == []
    assert v.cqap0


def test_errors_and_boolean_and_input_in_select():
    v = compile_view(T1_SQL, T1_SCHEMA)
    with pytest.raises(IVMError, match="needs a"):
        v.lookup()
    with pytest.raises(IVMError, match="unknown parameter"):
        v.lookup(a=1, z=2)
    b = compile_view("SELECT r.a FROM r JOIN t ON t.a = r.a WHERE r.a = $a AND t.e = $e", T1_SCHEMA)
    assert b.columns == ["a"]  # the input column is also an output: its value is the input
    _load_t1(b)
    assert look(b, a=1, e=31) == [((1,), 2)]
    boolean = compile_view("SELECT r.a FROM r JOIN t ON t.a = r.a", T1_SCHEMA, params=("a",))
    assert boolean.columns == []
    _load_t1(boolean)
    assert look(boolean, a=1) == [((), 4)] and look(boolean, a=5) == []
    same = compile_view("SELECT r.c FROM r JOIN t ON t.a = r.a WHERE r.a = $a AND t.a = $a", T1_SCHEMA)
    assert same.params == ["a"]
    _load_t1(same)
    assert look(same, a=1) == [((10,), 2), ((11,), 2)]
    with pytest.raises(IVMError):
        compile_view("SELECT r.b FROM r WHERE r.a <> $a", T1_SCHEMA)
    with pytest.raises(IVMError):
        compile_view("SELECT r.b FROM r WHERE r.a = $a + 1", T1_SCHEMA)


def _q(atoms, out, inputs):
    return GCQ([Atom(r, r, tuple(vs)) for r, vs in atoms], [], list(out) + list(inputs), list(out) + list(inputs))


def _cqap0(atoms, out, inputs):
    q = _q([(r, list(vs)) for r, vs in atoms], out, inputs)
    fr = fracture(q, frozenset(inputs))
    return cqap0_reason(fr.atoms, fr.inputs, fr.inputs | (frozenset(out) - frozenset(inputs)), fr.origin) is None


EX7 = [("r", "ABC"), ("s", "ABD"), ("t", "AE")]


@pytest.mark.parametrize("atoms,out,inputs,expected", [
    (EX7, "CDE", "AB", True), (EX7, "BCDE", "A", True), (EX7, "ABCDE", "", True), (EX7, "", "ABCDE", True),
    (EX7, "ACDE", "B", False), (EX7, "ACD", "BE", False), (EX7, "AE", "BCD", False), (EX7, "AB", "CDE", False),
    (EX7, "DE", "AC", False),
    ([("s", "AB"), ("t", "B")], "A", "B", True),  # Ex. 2
    ([("r", "AB"), ("s", "AC")], "BC", "A", True),
    ([("r", "AB"), ("s", "BC"), ("t", "CD")], "AD", "BC", True),  # 3-path
    ([("r", "AB"), ("s", "BC"), ("t", "CA")], "", "ABC", True),  # triangle, all inputs
    ([("r", "AB"), ("s", "BC"), ("t", "CD"), ("u", "AD")], "AC", "BD", False),  # 4-cycle
    ([("s", "AB"), ("t", "B")], "B", "A", False),
    # edge-triangle detection: 004's introduction says CQAP0, Definition 1 says no (see params.py)
    ([("r", "AB"), ("s", "BC"), ("t", "CA")], "", "AB", False),
    ([("r", "A"), ("s", "AB"), ("t", "B")], "AB", "", False),
    ([("r", "AB"), ("s", "B")], "A", "", False),
    ([("r", "AB"), ("s", "B")], "", "A", False),
    ([("r", "AB"), ("s", "B")], "B", "A", False),
    ([("r", "AB"), ("s", "BC"), ("t", "CA")], "BC", "A", False),
])
def test_classification_table(atoms, out, inputs, expected):
    assert _cqap0(atoms, out, inputs) == expected


def test_range_parameters_filter_the_equality_lookup():
    v = compile_view("SELECT t.id, t.amount FROM trans t WHERE t.acc = $acc AND t.ts > $since",
                     {"trans": ["id", "acc", "ts", "amount"]})
    assert v.params == ["acc", "since"] and v.columns == ["id", "amount"]
    v.apply({"trans": [((1, 7, 100, 50), 1), ((2, 7, 200, 60), 1), ((3, 8, 300, 70), 1), ((4, 7, None, 5), 1)]})
    assert look(v, acc=7, since=150) == [((2, 60), 1)]
    assert look(v, 7, 50) == [((1, 50), 1), ((2, 60), 1)]
    assert look(v, acc=7, since=200) == [] and look(v, acc=9, since=0) == [] and look(v, acc=7, since=None) == []
    assert "range parameters $since (>)" in v.explain() and v.cqap0
    b = compile_view("SELECT t.acc FROM trans t WHERE t.ts BETWEEN ? AND ?", {"trans": ["id", "acc", "ts", "amount"]})
    b.apply({"trans": [((1, 7, 100, 50), 1), ((2, 7, 200, 60), 1), ((3, 8, 300, 70), 1)]})
    assert b.params == ["p1", "p2"] and look(b, 100, 250) == [((7,), 2)] and look(b, 301, 400) == []
    v.insert("trans", (5, 7, 400, 1))
    assert look(v, acc=7, since=150) == [((2, 60), 1), ((5, 1), 1)]


def test_explain_of_range_parameters_names_them_and_derives_the_ordered_index():
    """Issue 28 item 5: the range-only view printed an empty ``parameters:`` line and an O(1)
    lookup; EXPLAIN names the range inputs and the ordered index's bounds (O(log n + answer)
    lookups, O(log n) updates of the indexed table, in the class line and under update cost)."""
    schema = {"trans": ["id", "acc", "ts", "amount"]}
    eq = compile_view("SELECT t.id FROM trans t WHERE t.acc = $acc AND t.ts > $since", schema).explain()
    only = compile_view("SELECT t.acc FROM trans t WHERE t.ts BETWEEN $lo AND $hi", schema).explain()
    assert "parameters: acc, since (>)" in eq and "under the equality inputs (acc)" in eq
    assert "parameters: lo (>=), hi (<=)" in only and "over the whole view (no equality input)" in only
    for text in (eq, only):
        assert "O(1) delay (O(1) for an empty answer)" not in text and "no ordered index" not in text
        assert "ordered index on t.ts" in text and "O(log n + answer)" in text
        assert "O(log n) update (as derived" in text and "update cost: O(log n) per single-tuple update" in text
    two = compile_view("SELECT t.id, t.ts, t.amount FROM trans t WHERE t.ts >= $lo AND t.amount < $cap", schema).explain()
    assert "$cap (< on t.amount) checked row by row inside that range" in two and "merged" not in two
    # the compared column below a variable shared by two atoms: no single order, filtered (said so)
    deep = compile_view("SELECT r.b, r.ts, s.c FROM r JOIN s ON r.acc = s.acc AND r.b = s.b "
                        "WHERE r.acc = $acc AND r.ts > $x", {"r": ["acc", "b", "ts"], "s": ["acc", "b", "c"]})
    assert deep.cqap0 and "no ordered index (r.ts is not bound right under the inputs" in deep.explain()
    assert "O(rows under the equality key)" in deep.explain()
    # outside CQAP0 the answer map's rows are ordered
    dist = compile_view("SELECT DISTINCT t.id FROM trans t WHERE t.acc = $acc AND t.ts > $since", schema)
    assert not dist.cqap0 and "each input value's rows in the answer map" in dist.explain()

def test_distinct_and_component_without_inputs():
    schema = {"r": ["a", "b"], "s": ["c"]}
    d = compile_view("SELECT DISTINCT r.b FROM r WHERE r.a = $a", schema)
    d.apply({"r": [((1, 5), 1), ((1, 5), 1), ((1, 6), 1)]})
    assert look(d, a=1) == [((5,), 1), ((6,), 1)]
    d.delete("r", (1, 5))
    assert look(d, a=1) == [((5,), 1), ((6,), 1)]
    d.delete("r", (1, 5))
    assert look(d, a=1) == [((6,), 1)]
    x = compile_view("SELECT r.b, s.c FROM r, s WHERE r.a = $a", schema)  # Q(B,C|A) = R(A,B), S(C)
    assert x.cqap0
    x.apply({"r": [((1, 5), 1)]})
    assert look(x, a=1) == []  # the input-free component is empty: every lookup is empty
    x.apply({"s": [((7,), 2), ((8,), 1)]})
    assert look(x, a=1) == [((5, 7), 2), ((5, 8), 1)] and look(x, a=2) == []


def test_open_lookup_raises_after_an_update():
    from ivm_layer.errors import ConcurrentModificationError

    for sql in (T1_SQL, "SELECT r.b FROM r JOIN s ON r.a = s.a AND r.b = s.b WHERE r.c = $c"):
        v = compile_view(sql, T1_SCHEMA)
        _load_t1(v)
        v.insert("r", (1, 1, 12))
        key = 1 if "$a" in sql else 10
        it = v.lookup(key)
        next(it)
        v.insert("t", (1, 33))
        with pytest.raises(ConcurrentModificationError):
            list(it)
