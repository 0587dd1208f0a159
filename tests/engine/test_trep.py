"""The (T, N)-representation on the paper's worked example (002 Fig. 3/4) and its structures."""

import random

import pytest

from ivm_layer.engine.groups import OrderedGroup
from ivm_layer.engine.view import View
from ivm_layer.planner import plan_from_tree
from ivm_layer.planner.gjt import Node
from ivm_layer.query import GCQ, Atom


def fig4_view():
    atoms = [Atom("r", "r", ("x", "y", "z")), Atom("s", "s", ("x", "y", "v")), Atom("t", "t", ("x", "u"))]
    q = GCQ(atoms, [], ["x", "y", "u"], ["x", "y", "u"],
            schema={"r": ["x", "y", "z"], "s": ["x", "y", "v"], "t": ["x", "u"]})
    r, s, t = Node(frozenset("xyz"), atom=0), Node(frozenset("xyv"), atom=1), Node(frozenset("xu"), atom=2)
    xy = Node(frozenset("xy"), children=[r, s])
    x = Node(frozenset("x"), children=[xy, t])
    p = plan_from_tree(q, x, {x.id, xy.id, t.id})
    view = View(p)
    view.apply({
        "r": [((1, 2, 3), 2), ((2, 2, 4), 3), ((2, 2, 8), 4)],
        "s": [((1, 2, 4), 2), ((1, 3, 5), 3), ((2, 2, 4), 3)],
        "t": [((1, 6), 2), ((1, 3), 4), ((4, 5), 5)],
    })
    return view, {"x": x, "xy": xy, "r": r, "s": s, "t": t}


def test_fig4_representation_is_reproduced_exactly():
    view, n = fig4_view()
    trep = view._trep
    assert trep.rho(n["xy"].id) == {(1, 2): 4, (2, 2): 21}
    assert trep.rho(n["x"].id) == {(1,): 24}
    assert trep.rho(n["r"].id) == {(1, 2, 3): 2, (2, 2, 4): 3, (2, 2, 8): 4}
    assert trep.rho(n["s"].id) == {(1, 2, 4): 2, (1, 3, 5): 3, (2, 2, 4): 3}
    assert trep.rho(n["t"].id) == {(1, 6): 2, (1, 3): 4, (4, 5): 5}

def test_fig4_enumeration():
    view, _ = fig4_view()
    assert sorted(view.rows()) == [((1, 2, 3), 16), ((1, 2, 6), 8)]
    assert len(view) == 24


def test_fig4_update_delete_restores():
    view, n = fig4_view()
    view.delete("t", (1, 6))
    assert sorted(view.rows()) == [((1, 2, 3), 16), ((1, 2, 6), 4)]
    view.insert("t", (1, 6))
    assert sorted(view.rows()) == [((1, 2, 3), 16), ((1, 2, 6), 8)]
    view.apply({"r": [((2, 2, 4), -3), ((2, 2, 8), -4)]})
    assert view._trep.rho(n["xy"].id) == {(1, 2): 4}


@pytest.mark.parametrize("load", [3, 256])  # 3: many chunks, splits and the Fenwick tree
def test_ordered_group_against_reference(load, monkeypatch):
    import ivm_layer.engine.groups as groups

    monkeypatch.setattr(groups, "_LOAD", load)
    rng = random.Random(7)
    for _ in range(50):
        g, ref = OrderedGroup(0), {}
        for _ in range(300):
            t = (rng.randint(0, 60), rng.randint(0, 3))
            d = -rng.randint(1, ref[t]) if ref.get(t) and rng.random() < 0.4 else rng.randint(1, 3)
            g.add(t, d)
            ref[t] = ref.get(t, 0) + d
            if not ref[t]:
                del ref[t]
            lo, hi = rng.choice([None, rng.randint(-1, 61)]), rng.choice([None, rng.randint(-1, 61)])
            li, hii = rng.random() < 0.5, rng.random() < 0.5

            def inside(v, lo=lo, li=li, hi=hi, hii=hii):
                return ((lo is None or v > lo or (li and v == lo))
                        and (hi is None or v < hi or (hii and v == hi)))

            assert g.range_sum(lo, li, hi, hii) == sum(m for u, m in ref.items() if inside(u[0]))
            x = rng.randint(-1, 61)  # the one-sided sums the generated update code calls
            assert g.below(x) == sum(m for u, m in ref.items() if u[0] < x)
            assert g.upto(x) == sum(m for u, m in ref.items() if u[0] <= x)
            assert g.above(x) == sum(m for u, m in ref.items() if u[0] > x)
            assert g.atleast(x) == sum(m for u, m in ref.items() if u[0] >= x)
            got = list(g.irange(lo, li, hi, hii))
            assert sorted(got) == sorted((u, m) for u, m in ref.items() if inside(u[0]))
            assert [u[0] for u, _ in got] == sorted(u[0] for u, _ in got)
            assert [kv for b in g.buckets_in(lo, li, hi, hii) for kv in b.items()] == got
            ks, vs = g.flat_in(lo, li, hi, hii)
            assert list(zip(ks, vs)) == got
            assert g.nonunit == sum(1 for m in ref.values() if m != 1)


def test_groups_built_with_of_equal_built_with_add():
    """``HashGroup.of`` / ``OrderedGroup.of`` (one call in generated update code) make the same
    group as a new group plus ``add``: same tuples, totals, sums and later behaviour."""
    from ivm_layer.engine.groups import HashGroup

    for d in (1, 3):
        a, b = HashGroup.of((1, 2), d), HashGroup()
        b.add((1, 2), d)
        assert (dict(a), a.total, a.nonunit) == (dict(b), b.total, b.nonunit)
        a, b = OrderedGroup.of(0, (5, 2), d), OrderedGroup(0)
        b.add((5, 2), d)
        for g in (a, b):
            for t in [(3, 1), (9, 0), (5, 7), (5, 2)]:
                g.add(t, 1)
        assert a.buckets == b.buckets and a.total == b.total and a.nonunit == b.nonunit
        assert [a.below(x) for x in range(11)] == [b.below(x) for x in range(11)]
        assert [a.above(x) for x in range(11)] == [b.above(x) for x in range(11)]
        assert list(a.irange(None, False, None, False)) == list(b.irange(None, False, None, False))


@pytest.mark.parametrize("load", [3, 256])
def test_groups_built_from_items_equal_groups_built_by_add(load, monkeypatch):
    """The bulk builders (``from_items``: one sort) make the groups ``add`` makes one by one."""
    import ivm_layer.engine.groups as groups
    from ivm_layer.engine.groups import HashGroup

    monkeypatch.setattr(groups, "_LOAD", load)
    rng = random.Random(11)
    for _ in range(30):
        items = {(rng.randint(0, 40), rng.randint(0, 5)): rng.choice([1, 1, 1, 2, 5]) for _ in range(rng.randint(1, 90))}
        a, b = OrderedGroup.from_items(0, dict(items)), OrderedGroup(0)
        h, hb = HashGroup.from_items(dict(items)), HashGroup()
        for t, d in items.items():
            b.add(t, d)
            hb.add(t, d)
        assert (dict(h), h.total, h.nonunit) == (dict(hb), hb.total, hb.nonunit)
        assert a.buckets == b.buckets and a.total == b.total and a.nonunit == b.nonunit
        for x in range(-1, 43):
            assert (a.below(x), a.upto(x), a.above(x), a.atleast(x)) == (b.below(x), b.upto(x), b.above(x), b.atleast(x))
        assert list(a.irange(None, False, None, False)) == list(b.irange(None, False, None, False))
        for t in list(items)[:5]:  # and they keep behaving alike
            a.add(t, -items[t])
            b.add(t, -items[t])
        assert [a.below(x) for x in range(43)] == [b.below(x) for x in range(43)]


@pytest.mark.parametrize("load", [3, 256])
def test_weight_order_against_reference(load, monkeypatch):
    """WeightOrder (the keyed chain's value -> weight axis): every range sum equals a dict's."""
    import ivm_layer.engine.weightorder as wo

    monkeypatch.setattr(wo, "_LOAD", load)
    rng = random.Random(5)
    for _ in range(20):
        w, ref = wo.WeightOrder(), {}
        for _ in range(400):
            v = rng.randint(0, 80)
            d = -ref[v] if ref.get(v) and rng.random() < 0.3 else rng.choice([1, 2, -1, 5])
            w.add(v, d)
            ref[v] = ref.get(v, 0) + d
            x = rng.randint(-1, 82)
            assert w.below(x) == sum(c for u, c in ref.items() if u < x)
            assert w.upto(x) == sum(c for u, c in ref.items() if u <= x)
            assert w.above(x) == sum(c for u, c in ref.items() if u > x)
            assert w.atleast(x) == sum(c for u, c in ref.items() if u >= x)
            lo, hi = sorted((rng.randint(-1, 82), rng.randint(-1, 82)))
            li, hii = rng.random() < 0.5, rng.random() < 0.5
            assert w.range_sum(lo, li, hi, hii) == sum(
                c for u, c in ref.items() if (u > lo or (li and u == lo)) and (u < hi or (hii and u == hi)))
