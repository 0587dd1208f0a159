"""The derived top join of a T-representation (:class:`Virtual`): ρ of the root's only
child is not stored; per-key counts are, so an update of either side costs one range sum.
"""

from __future__ import annotations

from typing import Any

from ..query import Predicate
from .rnode import Host, RNode


class Virtual:
    """ρ of the top join node p, derived on demand (see ``TRep._find_virtual``).

    Kept: ``counts`` — per group key k (the variables g and m share), Σ_t ρ_p(t) over k's
    tuples, nonzero entries only; their sum is the view's count. Read: g's index ordered on
    p's side of the inequality (the one m's updates probe) and m's index ordered on m's side
    (the one g's updates probe). Deltas of p are built only for delta enumeration, whose
    output they are proportional to."""

    __slots__ = ("trep", "p", "g", "m", "pred", "counts", "extreme", "g_groups", "m_groups", "p_key", "chain",
                 "kchain")

    def __init__(self, trep: Host, p: RNode, g: RNode, m: RNode, pred: Predicate | None):
        self.trep, self.p, self.g, self.m, self.pred = trep, p, g, m, pred
        self.counts: dict = {}
        self.chain: Any = None  # m's ρ derived too: a Chain (engine/chain.py)
        self.kchain: Any = None  # m's frontier derived: a KeyedChain (engine/keyedchain.py)
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
