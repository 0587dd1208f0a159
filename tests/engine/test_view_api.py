"""The engine half of the public API (DESIGN.md): behaviour beyond raw correctness."""

import pytest

import ivm_layer
from ivm_layer import ConcurrentModificationError, IVMError, UpdateError

SCHEMA = {"r": ["a", "k"], "s": ["d", "k"]}
Q = "SELECT r.a, s.d, r.k FROM r, s WHERE r.k = s.k AND r.a < s.d"

FRAUD = ("SELECT * FROM trans S1, trans S2, trans L WHERE S1.ts < S2.ts AND S2.ts < L.ts "
         "AND L.ts < S1.ts + 3600 AND S1.acc = S2.acc AND S2.acc = L.acc "
         "AND S1.amnt < 100 AND S2.amnt < 100 AND L.amnt > 400")


def make():
    v = ivm_layer.compile_view(Q, SCHEMA)
    v.apply({"r": [((1, 7), 1), ((5, 7), 2)], "s": [((3, 7), 1), ((9, 7), 1), ((2, 8), 1)]})
    return v


def test_columns_rows_len_and_bag():
    v = make()
    assert v.columns == ["a", "d", "k"]
    assert dict(v.rows()) == {(1, 3, 7): 1, (1, 9, 7): 1, (5, 9, 7): 2}
    assert len(v) == 4
    assert sorted(v) == [(1, 3, 7), (1, 9, 7), (5, 9, 7), (5, 9, 7)]


def test_bad_delete_raises_and_changes_nothing():
    v = make()
    before = dict(v.rows())
    with pytest.raises(UpdateError, match="not present"):
        v.delete("r", (42, 7))
    with pytest.raises(UpdateError):
        v.apply({"r": [((1, 7), -1), ((5, 7), -3)]})  # second entry deletes too many
    with pytest.raises(UpdateError):
        v.apply({"r": [((2, 7), 1)], "s": [((100, 100), -1)]})  # bad entry in another table
    assert dict(v.rows()) == before and len(v) == 4


def test_bad_rows_and_tables():
    v = make()
    with pytest.raises(UpdateError, match="tuple of 2"):
        v.insert("r", (1, 2, 3))
    with pytest.raises(UpdateError, match="unknown table"):
        v.insert("nope", (1, 2))
    with pytest.raises(UpdateError, match="cannot be compared"):
        v.insert("r", ("x", 7))  # r.a is compared with numbers
    with pytest.raises(UpdateError, match="multiplicity"):
        v.apply({"r": [((1, 7), 1.5)]})
    assert len(v) == 4


def test_diff_and_subscribe():
    v = make()
    seen = []
    unsubscribe = v.subscribe(seen.append)
    change = v.diff({"s": [((4, 7), 1)]})
    assert change == [((1, 4, 7), 1)]
    assert seen == [[((1, 4, 7), 1)]]
    v.insert("r", (100, 8))  # joins nothing: no callback
    assert len(seen) == 1
    v.delete("s", (4, 7))
    assert seen[-1] == [((1, 4, 7), -1)]
    unsubscribe()
    v.insert("s", (4, 7))
    assert len(seen) == 2


def test_update_during_enumeration_raises():
    v = make()
    it = v.rows()
    next(it)
    v.insert("s", (50, 7))
    with pytest.raises(ConcurrentModificationError):
        next(it)
    assert len(list(v.rows())) == 5 and len(v) == 7


def test_nulls_never_join_but_are_output_values():
    v = ivm_layer.compile_view("SELECT r.a, s.d FROM r, s WHERE r.k = s.k", SCHEMA)
    v.apply({"r": [((None, 1), 1), ((2, None), 1)], "s": [((3, 1), 1), ((4, None), 1)]})
    assert dict(v.rows()) == {(None, 3): 1}
    v.delete("r", (2, None))  # a stored but never-joined row can be deleted
    assert len(v) == 1


def test_self_join_counts_each_pair():
    v = ivm_layer.compile_view("SELECT x.a, y.a FROM r x, r y WHERE x.k = y.k AND x.a < y.a", SCHEMA)
    v.apply({"r": [((1, 1), 1), ((2, 1), 2), ((3, 1), 1)]})
    assert dict(v.rows()) == {(1, 2): 2, (1, 3): 1, (2, 3): 2}
    assert v.diff({"r": [((2, 1), -2)]}) in ([((1, 2), -2), ((2, 3), -2)], [((2, 3), -2), ((1, 2), -2)])


def test_non_free_connex_view_is_materialized_and_says_so():
    v = ivm_layer.compile_view("SELECT r.a, s.d FROM r, s WHERE r.k = s.k AND r.a < s.d", SCHEMA)
    assert v.query_class == "acyclic-not-free-connex"
    v.apply({"r": [((1, 1), 1), ((1, 2), 1)], "s": [((5, 1), 1), ((5, 2), 1)]})
    assert dict(v.rows()) == {(1, 5): 2}
    assert "materialized" in v.explain()


def test_fraud_query_end_to_end_with_core():
    v = ivm_layer.compile_view(FRAUD, {"trans": ["id", "acc", "ts", "amnt"]})
    assert "materialized core" in v.explain()
    rows = [(1, 7, 100, 50), (2, 7, 200, 60), (3, 7, 300, 500), (4, 7, 4000, 900), (5, 8, 250, 10)]
    changes = [v.diff({"trans": [(r, 1)]}) for r in rows]
    assert changes[2] == [((1, 7, 100, 50, 2, 7, 200, 60, 3, 7, 300, 500), 1)]
    assert changes[3] == []  # outside the one-hour window
    assert len(v) == 1
    v.delete("trans", (2, 7, 200, 60))
    assert len(v) == 0 and list(v.rows()) == []


def test_static_and_params_entry_points():
    with pytest.raises(IVMError, match="not in the schema"):
        ivm_layer.compile_view(Q, SCHEMA, static=("nation",))
    v = ivm_layer.compile_view(Q, SCHEMA, static=("r",))
    assert "static" in v.explain()  # inequality join: outside 003, planned as usual
    p = ivm_layer.compile_view(Q, SCHEMA, params=("k",))
    p.apply({"r": [((1, 7), 1)], "s": [((2, 7), 1), ((0, 7), 1)]})
    assert list(p.lookup(k=7)) == [((1, 2), 1)] and list(p.lookup(k=8)) == []
    with pytest.raises(IVMError, match="params="):
        ivm_layer.compile_view(Q, SCHEMA, params=("zz",))
    with pytest.raises(IVMError, match="no input parameters"):
        next(make().lookup(k=7))


def test_cli_explain(capsys):
    from ivm_layer.cli import main

    assert main(["explain", Q, "--schema", "r(a,k); s(d,k)"]) == 0
    out = capsys.readouterr().out
    assert "class:" in out and "GJT" in out
    assert main(["explain", "SELECT * FROM r, s, t WHERE r.y = s.y AND s.z = t.z AND t.x = r.x",
                 "--schema", "r(x,y); s(y,z); t(z,x)"]) == 1
    assert "cyclic" in capsys.readouterr().err


def test_stats_account_for_stored_tuples():
    import ivm_layer

    v = ivm_layer.compile_view("SELECT r.a, s.c FROM r, s WHERE r.b = s.b", {"r": ["a", "b"], "s": ["b", "c"]})
    assert v.stats()["stored"] == 0
    v.apply({"r": [((1, 2), 1), ((1, 2), 1), ((3, 4), 1)], "s": [((2, 9), 1)]})
    st = v.stats()
    assert st["base_rows"] == 3 and st["index_entries"] > 0 and st["core_entries"] == 0
    assert st["stored"] == sum(x for k, x in st.items() if k != "stored")
    assert f"state: {st['base_rows']} base rows, {st['index_entries']} index entries" in v.explain()
    g = ivm_layer.compile_view("SELECT r.a, MIN(r.b), COUNT(*) FROM r GROUP BY r.a", {"r": ["a", "b"]})
    g.apply({"r": [((1, 2), 1), ((1, 5), 1), ((7, 5), 1)]})
    gs = g.stats()
    assert gs["groups"] == 2 and gs["multiset_values"] == 3 and gs["base_rows"] == 3
    g.delete("r", (7, 5))
    assert g.stats()["groups"] == 1 and g.stats()["multiset_values"] == 2


def test_two_phase_update_is_all_or_nothing_across_views():
    """prepare() validates without changing anything; commit() applies; a stale prepared batch
    is refused (sessions update several views through this pair)."""
    from ivm_layer import UpdateError, compile_view

    schema = {"r": ["a", "b"], "s": ["b", "c"]}
    v1 = compile_view("SELECT r.a, s.c FROM r JOIN s ON r.b = s.b", schema)
    v2 = compile_view("SELECT b, count(*) FROM r GROUP BY b", schema)
    good = {"r": [((1, 2), 1)], "s": [((2, 3), 1)]}
    p1, p2 = v1.prepare(good), v2.prepare({"r": good["r"]})
    assert len(v1) == 0 and len(v2) == 0
    assert v1.commit(p1, want_change=True) == [((1, 3), 1)]
    assert v2.commit(p2, want_change=True) == [((2, 1), 1)]
    with pytest.raises(UpdateError):
        v1.prepare({"r": [((9, 9), -1)]})
    assert sorted(v1.rows()) == [((1, 3), 1)]
    stale = v1.prepare({"r": [((5, 2), 1)]})
    v1.insert("r", (6, 2))
    with pytest.raises(UpdateError, match="stale"):
        v1.commit(stale)
    assert len(v1) == 2


def test_rows_batches_match_rows_and_guard_updates():
    import gc

    from ivm_layer.errors import ConcurrentModificationError

    v = ivm_layer.compile_view("SELECT * FROM r, s WHERE r.a < s.d", {"r": ["a", "b"], "s": ["c", "d"]})
    v.apply({"r": [((i, i % 3), 1 + i % 2) for i in range(60)], "s": [((i, i), 1) for i in range(0, 80, 3)]})
    batches = list(v.rows_batches(17))
    assert all(isinstance(b, list) and 0 < len(b) <= 17 for b in batches)
    assert sorted(x for b in batches for x in b) == sorted(v.rows())
    assert gc.isenabled()
    it = v.rows_batches(5)
    next(it)
    assert gc.isenabled()  # the collector is paused only while a batch is built
    v.insert("r", (-5, 0))
    with pytest.raises(ConcurrentModificationError):
        next(it)
    agg = ivm_layer.compile_view("SELECT r.b, count(*) FROM r GROUP BY r.b", {"r": ["a", "b"]})
    agg.apply({"r": [((i, i % 4), 1) for i in range(10)]})
    assert sorted(x for b in agg.rows_batches(3) for x in b) == sorted(agg.rows())


def test_contains_gives_the_multiplicity():
    schema = {"r": ["a", "b"], "s": ["c", "d"]}
    v = ivm_layer.compile_view("SELECT * FROM r, s WHERE r.a < s.d", schema)
    v.apply({"r": [((1, 2), 2), ((4, None), 1)], "s": [((5, 3), 1), ((0, 0), 1), ((7, 9), 3)]})
    for row, k in v.rows():
        assert v.contains(row) == k
    assert v.contains((4, None, 7, 9)) == 3
    assert v.contains((1, 2, 0, 0)) == 0 and v.contains((9, 9, 9, 9)) == 0
    assert v.contains([1, 2, 5, 3]) == 2
    with pytest.raises(IVMError):
        v.contains((1, 2))
    with pytest.raises(IVMError):
        v.contains((1, 2, [3], 4))
    d = ivm_layer.compile_view("SELECT DISTINCT r.a FROM r, s WHERE r.b = s.c", schema)
    d.apply({"r": [((1, 2), 2)], "s": [((2, 0), 1), ((2, 1), 1)]})
    assert d.contains((1,)) == 1 and d.contains((2,)) == 0
    nf = ivm_layer.compile_view("SELECT r.a, s.d FROM r, s WHERE r.b = s.c", schema)
    nf.apply({"r": [((1, 2), 1), ((1, 3), 1)], "s": [((2, 7), 1), ((3, 7), 1)]})
    assert nf.contains((1, 7)) == 2 == dict(nf.rows())[(1, 7)]
    agg = ivm_layer.compile_view("SELECT r.a, count(*) FROM r GROUP BY r.a", schema)
    agg.apply({"r": [((1, 2), 3)]})
    assert agg.contains((1, 3)) == 1 and agg.contains((1, 2)) == 0


def test_explain_says_what_the_engine_does_per_edge():
    schema = {"r": ["a", "b"], "s": ["c", "d"]}
    q1 = ivm_layer.compile_view("SELECT * FROM r, s WHERE r.a < s.c", schema).explain()
    assert "derived join" in q1 and "O(log n)" in q1
    two = ivm_layer.compile_view("SELECT * FROM r, s WHERE r.a < s.c AND r.b < s.d", schema).explain()
    # two inequalities on one edge: multi-level box indexes (engine/boxgroup.py), not a scan
    assert "multi-level box index on the 2 compared variables" in two and "O(log^3 n) delay" in two
    assert "tuple by tuple" not in two
    band = ivm_layer.compile_view("SELECT * FROM r, s WHERE r.b = s.d AND r.a < s.c AND s.c < r.a + 5",
                                  schema).explain()
    assert "tuple by tuple" not in band  # both bounds are on one order
