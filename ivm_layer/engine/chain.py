"""A derived chain: the join below the derived top join is not stored either (Q4/Q7 of 000).

Shape (see :func:`find_chain`): the root's child p is derived (:class:`Virtual`) with
guard T (z) and non-guard p1; p1 joins its guard S (y) and a non-guard R (x); both edges carry
one inequality on the same variable d of p1 and no equality. Then

    ρ_p1(d) = s(d) · #{x : d ∈ I_x}        count = Σ_z Σ_{d ∈ I_z} ρ_p1(d)

where I_x, I_z are the half-lines of d admitted by an R and a T tuple. Stored ρ_p1 would make
an R update rewrite up to n entries. Instead R, S and T tuples are placed on one order of d
(:class:`~ivm_layer.engine.pairaxis.PairAxis`: S at ``(d, 1)``, an R or T tuple at its
half-line's end, before or after the S tuples at that value as the bound's strictness says),
and the two sums Algorithm 2 needs are pair counts over a prefix or suffix of that order:

* an update of T: ``Σ_{d ∈ I_z} s(d) · #{x : d ∈ I_x}`` (replaces T's range sum over ρ_p1);
* an update of R: ``Σ_{d ∈ I_x} s(d) · #{z : d ∈ I_z}``, the change of the view's count;
* an update of S keeps Algorithm 2's path (one range sum on R's side, one on T's).

Each is O(log n) (plus O(B) C-level work in one chunk). Enumeration reads p1 as S's group
restricted to the half-line of R's extreme tuple (every d there has a partner): O(1) delay.
Delta enumeration (push mode) still fans an R update out to its p1 tuples: that delta is
what it enumerates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .pairaxis import PairAxis, suffix
from .predicates import compile_bounds, flip_all, oriented_cross, split_on_sort_var

if TYPE_CHECKING:
    from .rnode import Host, RNode
    from .virtual import Virtual


def _key_fn(bounds: Callable, lower: bool) -> Callable[[tuple], Any]:
    """The axis key of a tuple whose admitted d-range is ``bounds(t)``: the end of its half-line,
    placed before (rank 0) or after (rank 2) the S tuples at that value."""
    if lower:
        def key(t):
            lo, li, _, _ = bounds(t)
            return (lo, 0 if li else 2)
    else:
        def key(t):
            _, _, hi, hii = bounds(t)
            return (hi, 2 if hii else 0)
    return key


def intersect(a: tuple, b: tuple) -> tuple:
    """The intersection of two ranges ``(lo, lo_incl, hi, hi_incl)`` (None = unbounded)."""
    lo, li, hi, hii = a
    blo, bli, bhi, bhii = b
    if blo is not None:
        if lo is None or blo > lo:
            lo, li = blo, bli
        elif blo == lo:
            li = li and bli
    if bhi is not None:
        if hi is None or bhi < hi:
            hi, hii = bhi, bhii
        elif bhi == hi:
            hii = hii and bhii
    return lo, li, hi, hii


class Chain:
    """The derived lower join p1 of a derived top join (see the module docstring)."""

    __slots__ = (
        "a_var",
        "axis",
        "d_var",
        "gs",
        "gt",
        "mr",
        "p1",
        "r_extreme",
        "r_groups",
        "s_groups",
        "trep",
        "v",
        "x_bounds",
        "x_key",
        "x_lower",
        "y_pos",
        "z_key",
        "z_lower",
    )

    def __init__(self, trep: Host, v: Virtual, gs: RNode, mr: RNode, d_var: str,
                 x_bounds: Callable, x_lower: bool, z_bounds: Callable, z_lower: bool):
        self.trep, self.v, self.p1, self.gs, self.mr, self.gt = trep, v, v.m, gs, mr, v.g
        self.axis = PairAxis()
        self.x_bounds, self.x_lower = x_bounds, x_lower
        self.x_key = _key_fn(x_bounds, x_lower)
        self.z_key, self.z_lower = _key_fn(z_bounds, z_lower), z_lower
        self.y_pos = gs.pos[d_var]
        # the extreme R tuple admits the widest half-line: every d inside has a partner
        self.r_extreme = "min_tuple" if x_lower else "max_tuple"
        self.s_groups: dict = {}
        self.r_groups: dict = {}

    def finish(self, s_index, r_index) -> None:
        """``s_index``: π_var(p1) ρ_S ordered on d; ``r_index``: ρ_R ordered on its variable."""
        self.s_groups, self.r_groups = s_index.groups, r_index.groups
        add = self.axis.add
        xk, yp, zk = self.x_key, self.y_pos, self.z_key

        def feed_x(delta):
            for t, d in delta.items():
                if d:
                    add(0, xk(t), d)

        def feed_y(delta):
            for t, d in delta.items():
                if d:
                    add(1, (t[yp], 1), d)

        def feed_z(delta):
            for t, d in delta.items():
                if d:
                    add(2, zk(t), d)

        self.mr.appliers.append(feed_x)
        self.gs.appliers.append(feed_y)
        self.gt.appliers.append(feed_z)

    # -- the two pair sums ------------------------------------------------------------
    def _pairs(self, key, p_suffix: bool, other: int, other_before: bool) -> int:
        """Σ over the S weight y of one side of ``key`` (the suffix or the prefix) of y times
        the weight of stream ``other`` (0 = R, 2 = T) before / after that S key."""
        axis = self.axis
        tot = axis.total()
        if other == 0:  # pairs (x before y): the X, Y, XY components
            pu, pv, puv = axis.prefix_pairs(key, 0)
            tu, tv, tuv = tot[0], tot[1], tot[3]
        else:  # pairs (y before z): Y, Z, YZ
            pu, pv, puv = axis.prefix_pairs(key, 1)
            tu, tv, tuv = tot[1], tot[2], tot[4]
        if p_suffix:
            u, v = tu - pu, tv - pv
            uv = tuv - puv - pu * v
            q = pu if other == 0 else pv
        else:
            u, v, uv = pu, pv, puv
            q = tu - pu if other == 0 else tv - pv
        if other == 0:  # u = x, v = y
            y = v
            before, after = uv, u * v - uv
        else:  # u = y, v = z
            y = u
            before, after = u * v - uv, uv
        if other_before:
            return before + y * q if p_suffix else before
        return after if p_suffix else after + y * q

    def pairs_r(self, t: tuple) -> int:
        """An R tuple's change of the view's count per unit: its pairs (S, T) on the axis."""
        return self._pairs(self.x_key(t), self.x_lower, 2, self.z_lower)

    def pairs_t(self, t: tuple) -> int:
        """A T tuple's Σ_{d ∈ I_t} ρ_p1(d): the (R, S) pairs on its side of the axis."""
        return self._pairs(self.z_key(t), self.z_lower, 0, self.x_lower)

    def t_up(self, proj: Callable[[tuple], tuple]) -> Callable[[dict], dict]:
        """T's step to p: Δp[π t] += Δ(t) · Σ_{d ∈ I_t} ρ_p1(d), ρ_p1 read off the axis."""
        zk, zl, xl, pairs = self.z_key, self.z_lower, self.x_lower, self._pairs

        def up(delta):
            out = {}
            for t, d in delta.items():
                s = pairs(zk(t), zl, 0, xl)
                if s:
                    pt = proj(t)
                    out[pt] = out.get(pt, 0) + d * s
            return out

        return up

    def update(self, n: RNode, delta: dict, record: dict | None) -> bool:
        """Child n (S or R) of p1 changed by ``delta`` (its indexes and the axis are applied)."""
        v = self.v
        if n is self.gs or record is not None:
            pd = n.up(delta)  # S: one p1 tuple each; R: the fan-out, only to enumerate it
            if record is not None and self.p1.in_n:
                record[self.p1.id] = pd
            if not pd:
                return False
            return v.update(self.p1, pd, record)
        xk, xl, zl, pairs = self.x_key, self.x_lower, self.z_lower, self._pairs
        dc = 0
        for t, d in delta.items():
            if d:
                dc += d * pairs(xk(t), xl, 2, zl)
        if dc:
            counts = v.counts
            c = counts.get((), 0) + dc
            if c:
                counts[()] = c
            else:
                del counts[()]
            self.trep.count += dc
        return bool(dc)

    # -- enumeration --------------------------------------------------------------------
    def x_range(self) -> tuple | None:
        """The d-range admitted by R's extreme tuple (None: R is empty)."""
        g = self.r_groups.get(())
        if g is None or not len(g):
            return None
        return self.x_bounds(getattr(g, self.r_extreme)())

    def p1_bounds(self, bounds: Callable) -> Callable[[tuple], tuple]:
        """p1's enumeration range under its parent's tuple, cut to the d's with an R partner."""
        def b(tp):
            own = bounds(tp)
            r = self.x_range()
            if r is None:  # no R tuple: no d has a partner (an empty range)
                x = own[0] if own[0] is not None else own[2]
                return x, False, x, False
            return intersect(own, r)

        return b

    def m_extreme(self, last: bool) -> tuple | None:
        """The p1 tuple with the smallest (largest) d that has an R partner."""
        r = self.x_range()
        g = self.s_groups.get(())
        if r is None or g is None:
            return None
        return g.edge_in(*r, last=last)


def chain_edges(j: RNode, top: RNode, above: RNode) -> tuple | None:
    """The two inequalities of a chain through join node ``j``: ``j`` joins a guard S
    (without predicates) and a non-guard R that share no variable; the edge R–j and the edge
    ``top``–``above`` each carry exactly one one-sided inequality and nothing else, both on
    the same variable d of ``j``. Returns ``(S, R, [d op a + c], [d op g + c])`` or None."""
    guards = [c for c in j.children if c.is_guard]
    if len(guards) != 1 or guards[0].node.preds:
        return None
    gs = guards[0]
    mr = gs.sibling
    if gs.node.vars & mr.node.vars:
        return None
    _, lower, rest = split_on_sort_var(flip_all(oriented_cross(mr.node, j.node)))  # d op a + c
    _, upper, rest2 = split_on_sort_var(oriented_cross(top.node, above.node))  # d op g + c
    ops = ("<", "<=", ">", ">=")
    if rest or rest2 or len(lower) != 1 or len(upper) != 1 or lower[0].op not in ops or upper[0].op not in ops:
        return None
    if lower[0].left != upper[0].left:
        return None
    return gs, mr, lower, upper


def find_chain(trep: Host) -> Chain | None:
    """The join below the derived top join, when its ρ can be derived too (engine/chain.py).

    Shape: the top join's non-guard child p1 (not fused, no filter, not a frontier of N)
    joins a guard S and a non-guard R; the edges R–p1 and p1–T each carry one one-sided
    inequality, both on the same variable d of p1, and no equality (no shared variable)."""
    v = trep.virtual
    if v is None or v.pred is None:
        return None
    p, p1, gt = v.p, v.m, v.g
    if p1.fused or len(p1.children) != 2 or p1.filter is not None or p.filter is not None:
        return None
    if p1.frontier or (p1.in_n and not all(c.in_n for c in p1.children)):
        return None
    if gt.node.vars & p1.node.vars:
        return None
    edges = chain_edges(p1, p1, p)
    if edges is None:
        return None
    gs, mr, lower, top = edges
    a_var, _, _ = split_on_sort_var(oriented_cross(mr.node, p1.node))
    c = Chain(trep, v, gs, mr, lower[0].left,
              compile_bounds(lower, mr.pos), lower[0].op in (">", ">="),
              compile_bounds(top, gt.pos), top[0].op in (">", ">="))
    c.d_var, c.a_var = lower[0].left, a_var
    p1.chain = c
    v.chain = c
    return c
