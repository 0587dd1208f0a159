"""Wiring a T-representation's nodes: the indexes each parent needs and each node's
propagation closure ``up`` (the four cases of paper 000 Alg. 2, the derived chain, and the
multi-level box indexes of edges with several inequalities), built once per plan.

Each closure takes a node's delta ``{tuple: Δ}`` and returns its parent's: a projection, a
filter, a range sum through the sibling's index when the node guards its parent (Thm. 2),
a range scan (or, from :func:`sweep_min` tuples per group, one sorted sweep) otherwise, a
box sum over a :class:`~.boxgroup.BoxGroup` for several inequalities. Cost per closure call:
O(|Δ| · log n) for a guard step, O(|Δ| + output) for a scan; nothing proportional to data
that did not change.
"""

from __future__ import annotations

from .boxgroup import BoxGroup
from .index import Index
from .predicates import (
    box_vars,
    compile_bounds,
    compile_box_bounds,
    compile_cross_check,
    compile_filter,
    flip_all,
    key_fn,
    oriented_cross,
    projector,
    split_on_sort_var,
)
from .rnode import RNode


def wire(trep, n: RNode) -> None:
    """Create the indexes n's parent needs and n's propagation closure ``up``."""
    p = n.parent
    if p is None:
        return
    s = n.sibling
    if p.fused:
        # p carries n's tuples: only p's filter (over var(p) ⊆ var(n)) applies on the way up.
        pf = compile_filter(p.node.filters, n.pos)
        n.up = _identity if pf is None else _make_filter(pf)
        n.step = ("fused", pf)
    elif s is None:
        n.up = _make_project(projector(p.form, n.pos), p.filter)
        n.step = ("project",)
    elif n.is_guard and s.chain is not None:
        # T under the derived top join whose other child p1 is derived too: ρ_p1's range
        # sum is a pair count on the chain's axis (engine/chain.py).
        n.v_key = key_fn([], p.pos)
        n.up = s.chain.t_up(projector(p.form, n.pos))
        n.step = ("chain",)
    elif n.is_guard and box_vars(oriented_cross(s.node, p.node) if not s.is_guard else []):
        # Case B on an edge with inequalities on several of s's variables: S_s is a
        # multi-level box index, the range sum a box sum (engine/boxgroup.py).
        key_vars = sorted(s.node.vars & n.node.vars)
        cross = oriented_cross(s.node, p.node)
        bv = box_vars(cross)
        idx = trep.make_index(s, key_vars, None, None, tuple(bv))
        n.v_index, n.v_key = idx, key_fn(key_vars, p.pos)
        n.up = _make_box_guard_up(idx, key_fn(key_vars, n.pos), projector(p.form, n.pos), p.filter,
                                  compile_box_bounds(cross, bv, n.pos))
        n.step = ("guard", idx, key_vars, cross, [])
    elif not n.is_guard and box_vars(flip_all(oriented_cross(n.node, p.node))):
        # Case C on such an edge: S_s (π_var(p) ρ_s) is a box index on p's variables; a large
        # delta is itself boxed and each sibling tuple sums it (no quadratic fan-out).
        key_vars = sorted(s.node.vars & n.node.vars)
        orig = oriented_cross(n.node, p.node)  # n_var op parent_var + c
        cross = flip_all(orig)  # parent_var op n_var + c
        bv = box_vars(cross)
        idx = trep.make_index(s, key_vars, p.form, p.filter, tuple(bv))
        n.v_index, n.v_key = idx, key_fn(key_vars, n.pos)
        n.v_bounds = compile_box_bounds(cross, bv, n.pos)  # the derived join's box sum
        rv = sorted({q.left for q in orig}, key=lambda v: (-sum(q.left == v for q in orig), v))
        n.up = _make_box_nonguard_up(
            idx, key_fn(key_vars, n.pos), compile_box_bounds(cross, bv, n.pos),
            tuple(n.pos[v] for v in rv), compile_box_bounds(orig, rv, p.pos))
        n.step = ("nonguard", idx, key_vars, cross, [])
    elif n.is_guard:
        # Case B: n guards p. Probe S_s, grouped by var(s) ∩ var(n), ordered on s's side.
        key_vars = sorted(s.node.vars & n.node.vars)
        cross = oriented_cross(s.node, p.node) if not s.is_guard else []
        sort_var, on, rest = split_on_sort_var(cross)
        idx = trep.make_index(s, key_vars, None, None, sort_var)
        n.v_index, n.v_key = idx, key_fn(key_vars, p.pos)
        n.up = _make_guard_up(
            idx, key_fn(key_vars, n.pos), projector(p.form, n.pos), p.filter,
            compile_bounds(on, n.pos) if on else None,
            compile_cross_check(rest, s.pos, n.pos),
        )
        n.step = ("guard", idx, key_vars, on, rest)
    else:
        # Case C: s guards p. Probe S_s holding π_var(p) ρ_s, ordered on the parent-side variable.
        key_vars = sorted(s.node.vars & n.node.vars)
        cross = flip_all(oriented_cross(n.node, p.node))  # parent_var op n_var + c
        sort_var, on, rest = split_on_sort_var(cross)
        idx = trep.make_index(s, key_vars, p.form, p.filter, sort_var)
        n.v_index, n.v_key = idx, key_fn(key_vars, n.pos)
        n.v_bounds = compile_bounds(on, n.pos) if on else None
        n.up = _make_nonguard_up(
            idx, key_fn(key_vars, n.pos),
            compile_bounds(on, n.pos) if on else None,
            compile_cross_check(rest, p.pos, n.pos),
        )
        n.step = ("nonguard", idx, key_vars, on, rest)
    if n.in_n and not p.fused:
        key_vars = sorted(n.node.vars & p.node.vars)
        cross = oriented_cross(n.node, p.node)  # n_var op parent_var + c
        sort_var, on, rest = split_on_sort_var(cross)
        ranged = sort_var is None and n.node.order_by is not None
        if ranged:  # a range parameter's column (planner/params.py): ordered, every value read
            sort_var = n.node.order_by
        end = n  # the lowest node of n's chain of fused nodes inside N
        while end.fused and end.children[0].in_n:
            end = end.children[0]
        bv = box_vars(cross) if n.chain is None else None
        if n.virtual is not None:
            pass  # derived on demand: no P_n
        elif bv is not None:
            # several variables compared: P_n is a multi-level box index, read box by box
            n.p_index = trep.make_index(n, key_vars, end.own if end.fused else None, None, tuple(bv))
            if end.fused:
                n.enum_pos = end.own_pos
            n.p_box = compile_box_bounds(cross, bv, p.pos)
            on, rest = [], []
        elif n.chain is not None:
            # derived: P_n is S's group (π_var(n) ρ_S, ordered on d), read inside the
            # range R's extreme tuple admits (e_bounds below)
            n.p_index = trep.make_index(n.chain.gs, key_vars, n.form, None, sort_var)
        elif end.fused:
            # The chain ends at a fused frontier node: distinct output rows need its tuples
            # aggregated onto var(end), so the index projects (and the chain aliases read that).
            n.enum_pos = end.own_pos
            n.p_index = trep.make_index(n, key_vars, end.own, None, sort_var)
        else:
            n.p_index = trep.make_index(n, key_vars, None, None, sort_var)
        n.p_key_vars = key_vars
        n.p_bounds = compile_bounds(on, p.pos) if on else (_unbounded if ranged else None)
        if n.chain is not None:
            n.e_bounds = n.chain.p1_bounds(n.p_bounds)
        n.p_sort_pos = n.pos[sort_var] if on or ranged else None
        n.p_resid = compile_cross_check(rest, n.enum_pos, p.pos)
        n.p_check = compile_cross_check(cross, n.pos, p.pos)


def _identity(delta: dict) -> dict:
    return delta


def _unbounded(parent: tuple) -> tuple:
    """The range of an ordered ``P_n`` without an inequality edge: every sort value."""
    return None, False, None, False


def _make_filter(pfilter):
    def up(delta):
        return {t: d for t, d in delta.items() if pfilter(t)}
    return up


def _make_project(proj, pfilter):
    if pfilter is None:
        def up(delta):
            out = {}
            get = out.get
            for t, d in delta.items():
                pt = proj(t)
                out[pt] = get(pt, 0) + d
            return out
    else:
        def up(delta):
            out = {}
            get = out.get
            for t, d in delta.items():
                pt = proj(t)
                if pfilter(pt):
                    out[pt] = get(pt, 0) + d
            return out
    return up


def _make_guard_up(idx: Index, key, proj, pfilter, bounds, resid):
    """Δp[π t] += Δn(t) · Σ{ρ_s(u) : u in t's group, θ(u, t)} — a range sum (Thm. 2)."""
    groups = idx.groups

    def up(delta):
        out = {}
        for t, d in delta.items():
            g = groups.get(key(t))
            if g is None:
                continue
            if resid is not None:
                it = g.irange(*bounds(t)) if bounds is not None else g.items()
                s = 0
                for u, m in it:
                    if resid(u, t):
                        s += m
            elif bounds is not None:
                s = g.range_sum(*bounds(t))
            else:
                s = g.total
            if s:
                pt = proj(t)
                if pfilter is None or pfilter(pt):
                    out[pt] = out.get(pt, 0) + d * s
        return out

    return up


def _make_box_guard_up(idx: Index, key, proj, pfilter, box):
    """Δp[π t] += Δn(t) · Σ{ρ_s(u) : u in t's group, u inside t's box}: one box sum,
    O(log^(k+1) n) (engine/boxgroup.py)."""
    groups = idx.groups

    def up(delta):
        out = {}
        for t, d in delta.items():
            g = groups.get(key(t))
            if g is None:
                continue
            s = g.box_sum(box(t))
            if s:
                pt = proj(t)
                if pfilter is None or pfilter(pt):
                    out[pt] = out.get(pt, 0) + d * s
        return out

    return up


#: delta tuples of one key from which a box fan-out is computed the other way round
BOX_REVERSE_MIN = 64


def _make_box_nonguard_up(idx: Index, key, box, rdims: tuple, rbox):
    """Δp[u] += Δn(t) · ρ(u) for every sibling tuple u inside t's box: a box report per delta
    tuple (output-sensitive). A key with :data:`BOX_REVERSE_MIN` delta tuples or more (a bulk
    load) boxes its delta tuples instead (``rdims``: their compared positions) and gives each
    sibling tuple u of the group one box sum over them (``rbox(u)``): O((|group| + |Δ|)
    log^(k+1)) for the key, never |group| · |Δ|."""
    groups = idx.groups

    def up(delta):
        out = {}
        get = out.get
        by_key: dict = {}
        for t, d in delta.items():
            if d:
                k = key(t)
                lst = by_key.get(k)
                if lst is None:
                    by_key[k] = [(t, d)]
                else:
                    lst.append((t, d))
        for k, items in by_key.items():
            g = groups.get(k)
            if g is None:
                continue
            if len(items) >= BOX_REVERSE_MIN:
                tmp = BoxGroup.from_items(rdims, dict(items))
                for u, m in g.items():
                    w = tmp.box_sum(rbox(u))
                    if w:
                        out[u] = get(u, 0) + w * m
                continue
            for t, d in items:
                for u, m in g.box_items(box(t)):
                    out[u] = get(u, 0) + d * m
        return out

    return up


_SWEEP_MIN = 8  # delta tuples per group from which the sorted sweep beats one range scan each


def sweep_min() -> int:
    """Delta tuples from which a non-guard step sweeps a group once instead of scanning a
    range per tuple (generated batch code hands such deltas to the interpreter)."""
    return _SWEEP_MIN


def _make_nonguard_up(idx: Index, key, bounds, resid):
    """Δp[u] += Δn(t) · ρ(u) for every parent-projected sibling tuple u matching t.

    One delta tuple scans its range of the sibling's group. A group with many delta tuples
    (a fan-out from below) is swept once instead (000 Thm. 2): the delta's range bounds are
    sorted and the group is walked in order while a running sum tracks the weight of the
    ranges covering the current value, so the cost is O(K log K + output), not O(K · output).
    """
    groups = idx.groups

    def up(delta):
        out = {}
        get = out.get
        rest = delta
        if bounds is not None and resid is None and len(delta) >= _SWEEP_MIN:
            by_key: dict = {}
            for t, d in delta.items():
                k = key(t)
                lst = by_key.get(k)
                if lst is None:
                    by_key[k] = [(t, d)]
                else:
                    lst.append((t, d))
            rest = {}  # groups with few delta tuples take the per-tuple loop below
            for k, items in by_key.items():
                if len(items) < _SWEEP_MIN:
                    rest.update(items)
                    continue
                g = groups.get(k)
                if g is not None:
                    _sweep(g, [(bounds(t), d) for t, d in items], out)
        for t, d in rest.items():
            g = groups.get(key(t))
            if g is None:
                continue
            it = g.irange(*bounds(t)) if bounds is not None else g.items()
            if resid is None:
                for u, m in it:
                    out[u] = get(u, 0) + d * m
            else:
                for u, m in it:
                    if resid(u, t):
                        out[u] = get(u, 0) + d * m
        return out

    return up


def _sweep(g, entries, out: dict) -> None:
    """Add Σ_{ranges covering u's sort value} d · ρ(u) to ``out`` for the tuples u of group g.

    A value covered only by ranges whose weights cancel still gets a (zero) entry: it marks
    the parent tuple as touched, which delta enumeration of a batch relies on.
    """
    starts = []  # (lo, 0 inclusive / 1 exclusive, d)
    ends = []  # (hi, 0 exclusive / 1 inclusive, d)
    always_w = always_n = 0
    lo_min = hi_max = None
    lo_unbounded = hi_unbounded = False
    for (lo, li, hi, hii), d in entries:
        if lo is not None and hi is not None and (lo > hi or (lo == hi and not (li and hii))):
            continue  # empty range
        if lo is None:
            always_w += d
            always_n += 1
            lo_unbounded = True
        else:
            starts.append((lo, 0 if li else 1, d))
            if lo_min is None or lo < lo_min:
                lo_min = lo
        if hi is None:
            hi_unbounded = True
        else:
            ends.append((hi, 1 if hii else 0, d))
            if hi_max is None or hi > hi_max:
                hi_max = hi
    if not starts and not always_n:
        return
    starts.sort(key=lambda e: (e[0], e[1]))
    ends.sort(key=lambda e: (e[0], e[1]))
    i = j = 0
    ns, ne = len(starts), len(ends)
    w, cnt = always_w, always_n
    get = out.get
    sort_pos = g.sort_pos
    for b in g.buckets_in(None if lo_unbounded else lo_min, True, None if hi_unbounded else hi_max, True):
        v = next(iter(b))[sort_pos]
        while i < ns and (starts[i][0] < v or (starts[i][0] == v and starts[i][1] == 0)):
            w += starts[i][2]
            cnt += 1
            i += 1
        while j < ne and (ends[j][0] < v or (ends[j][0] == v and ends[j][1] == 0)):
            w -= ends[j][2]
            cnt -= 1
            j += 1
        if cnt:
            for u, m in b.items():
                out[u] = get(u, 0) + w * m
