"""Membership of an output row in a free-connex view: its multiplicity in O(|N|) dict probes
(002 §3, P2: every node of the connex subset N holds the row's projection or the row is absent).

With var(N) = the output variables, a row fixes the tuple of every node in N. The row is in
the view iff each such tuple is in its node's enumeration index P_n, in the group of its
parent's tuple, and satisfies the edge's predicates; its multiplicity is then the product of
the frontier nodes' multiplicities — exactly what enumeration (Algorithm 1) would yield for it.
"""

from __future__ import annotations

from typing import Any

from .boxgroup import BoxGroup, inside
from .groups import HashGroup
from .rnode import RNode
from .trep import TRep


class Membership:
    """Point lookups of output rows in a :class:`TRep` (free-connex plans)."""

    def __init__(self, trep: TRep):
        self.trep = trep
        self.width = len(trep.out_vars)
        self.var_cols: dict[str, list[int]] = {}
        for i, v in enumerate(trep.out_vars):
            self.var_cols.setdefault(v, []).append(i)
        self.steps = []  # (node, parent layout, key vars, content layout, counts toward the product)
        for r in self._preorder(trep.root):
            p = r.parent
            if p is None or p.fused or r.virtual is not None:
                continue  # the root; a fused node's child is its tuple; a derived join is implied
            chain, end = [r], r
            while end.fused and end.children and end.children[0].in_n:
                end = end.children[0]
                chain.append(end)
            counts = any(x.frontier for x in chain)
            self.steps.append((r, _layout(p.pos), r.p_key_vars, _layout(r.enum_pos), counts))

    @staticmethod
    def _preorder(r: RNode):
        yield r
        for c in r.children:
            if c.in_n:
                yield from Membership._preorder(c)

    def multiplicity(self, row: tuple) -> Any:
        trep = self.trep
        if not trep.count:
            return 0
        val: dict[str, Any] = {}
        for v, cols in self.var_cols.items():
            x = row[cols[0]]
            for c in cols[1:]:
                if row[c] != x:
                    return 0
            val[v] = x
        mult = 1
        for r, parent_layout, key_vars, layout, counts in self.steps:
            tp = tuple(val.get(v) for v in parent_layout)
            if not key_vars:
                key = ()
            elif len(key_vars) == 1:
                key = val[key_vars[0]]
            else:
                key = tuple(val[v] for v in key_vars)
            g = r.p_index.groups.get(key)
            if g is None:
                return 0
            t = tuple(val[v] for v in layout)
            if type(g) is HashGroup:
                m = g.get(t)
            elif type(g) is BoxGroup:  # several compared variables (engine/boxgroup.py)
                m = g.live.get(t)
                if m is not None and r.p_box is not None:
                    try:
                        if not inside(t, g.dims, r.p_box(tp)):
                            return 0
                    except TypeError:  # a NULL where the predicate reads: not in the view
                        return 0
            else:
                bucket = g.buckets.get(t[g.sort_pos])
                m = bucket.get(t) if bucket is not None else None
                if m is not None and r.p_bounds is not None:
                    try:
                        lo, li, hi, hii = r.p_bounds(tp)
                    except TypeError:  # a NULL where the predicate reads: not in the view
                        return 0
                    x = t[g.sort_pos]
                    if (lo is not None and (x < lo or (x == lo and not li))) or (
                            hi is not None and (x > hi or (x == hi and not hii))):
                        return 0
            if m and r.weight is not None:  # a derived frontier: ρ_S times its R partners
                m = m * r.weight(t)
            if not m:
                return 0
            if r.p_resid is not None:
                try:
                    if not r.p_resid(t, tp):
                        return 0
                except TypeError:
                    return 0
            if counts:
                mult = mult * m
        return mult


def _layout(pos: dict[str, int]) -> list[str]:
    out = [""] * len(pos)
    for v, i in pos.items():
        out[i] = v
    return out
