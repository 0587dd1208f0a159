"""The derived top join of a T-representation (:class:`Virtual`): ρ of the root's only
child is not stored; per-key counts are, so an update of either side costs one range sum.
"""

from __future__ import annotations

from typing import Any

from ..query import Predicate
from .predicates import box_vars, flip_all, oriented_cross, split_on_sort_var
from .rnode import Host, RNode


class Virtual:
    """ρ of the top join node p, derived on demand (see :func:`find_virtual`).

    Kept: ``counts`` — per group key k (the variables g and m share), Σ_t ρ_p(t) over k's
    tuples, nonzero entries only; their sum is the view's count. Read: g's index ordered on
    p's side of the inequality (the one m's updates probe) and m's index ordered on m's side
    (the one g's updates probe). Deltas of p are built only for delta enumeration, whose
    output they are proportional to."""

    __slots__ = ("trep", "p", "g", "m", "pred", "counts", "extreme", "g_groups", "m_groups", "p_key", "chain",
                 "kchain", "box")

    def __init__(self, trep: Host, p: RNode, g: RNode, m: RNode, pred: Predicate | None):
        self.trep, self.p, self.g, self.m, self.pred = trep, p, g, m, pred
        self.counts: dict = {}
        self.chain: Any = None  # m's ρ derived too: a Chain (engine/chain.py)
        self.kchain: Any = None  # m's frontier derived: a KeyedChain (engine/keyedchain.py)
        self.box: Any = None  # the edge's predicates when they compare several variables (box sums)
        # ``parent_var < m_var + c`` holds for some u of a group iff it holds for its largest
        # m_var: the range admitted by that extreme tuple is exactly the partnered tuples.
        self.extreme = None if pred is None else ("max_tuple" if pred.op in ("<", "<=") else "min_tuple")

    def finish(self) -> None:
        self.g_groups = self.m.v_index.groups  # π_var(p) ρ_g, grouped by k, ordered on p's variable
        # ρ_m, grouped by k, ordered on m's variable (not stored when m is a derived chain)
        self.m_groups = self.g.v_index.groups if self.g.v_index is not None else None
        self.p_key = self.g.v_key

    def update(self, n: RNode, delta: dict, record: dict | None) -> bool:
        """Apply child n's delta to the counts (and the root count). Returns True if the view
        may have changed."""
        counts = self.counts
        dc = 0
        pd = None
        if n is self.g:
            pd = n.up(delta)  # one p tuple per delta tuple, weighted by its range sum
            key = self.p_key
            for t, v in pd.items():
                if not v:
                    continue
                k = key(t)
                c = counts.get(k, 0) + v
                if c:
                    counts[k] = c
                else:
                    del counts[k]
                dc += v
        else:
            groups = self.g_groups
            key = n.v_key
            bounds = n.v_bounds
            for u, d in delta.items():
                k = key(u)
                grp = groups.get(k)
                if grp is None:
                    continue
                if self.box is not None:
                    w = grp.box_sum(bounds(u))
                else:
                    w = grp.range_sum(*bounds(u)) if bounds is not None else grp.total
                if not w:
                    continue
                w = d * w
                c = counts.get(k, 0) + w
                if c:
                    counts[k] = c
                else:
                    del counts[k]
                dc += w
            if record is not None and self.p.in_n:
                pd = n.up(delta)  # the fan-out, only to enumerate the change
        trep = self.trep
        if record is not None:
            if self.p.in_n and pd is not None:
                record[self.p.id] = pd
            if dc or pd:
                record[trep.root.id] = {(): dc} if dc else {}
        if dc:
            trep.count += dc
        return bool(dc) or bool(pd)


def find_virtual(trep: Host) -> Virtual | None:
    """The top join node, when ρ of it can be derived on demand instead of stored.

    Shape: the root ({} vars, one child p); p joins a guard g (var(p) ⊆ var(g)) and a
    non-guard m whose edge carries at most one one-sided inequality and no other
    predicate. Then ρ_p(t) = ρ_g(t) · Σ{ρ_m(u) : u in t's group, θ(u, t)}: an update of
    either side changes the view's count by a range sum (O(log n)), nothing is fanned out,
    and enumeration walks g's group inside the range that the extreme m tuple of the group
    admits (every tuple there has a partner: constant delay)."""
    root = trep.root
    if root.node.vars or len(root.children) != 1 or root.filter is not None:
        return None
    p = root.children[0]
    if len(p.children) != 2:
        return None
    guards = [c for c in p.children if c.is_guard]
    if len(guards) != 1:
        return None
    g = guards[0]
    m = g.sibling
    if g.node.preds:
        return None
    cross = flip_all(oriented_cross(m.node, p.node))  # parent_var op m_var + c
    if p.in_n and not (g.in_n and m.in_n):
        return None
    if box_vars(cross) is not None:
        # inequalities on several variables: both sides are box indexes (engine/boxgroup.py);
        # an update costs one box sum, enumeration walks every g tuple of a key with output
        v = Virtual(trep, p, g, m, None)
        v.box = cross
        p.virtual = v
        return v
    sort_var, on, rest = split_on_sort_var(cross)
    if rest or len(on) > 1 or (on and on[0].op not in ("<", "<=", ">", ">=")):
        return None
    v = Virtual(trep, p, g, m, on[0] if on else None)
    p.virtual = v
    return v
