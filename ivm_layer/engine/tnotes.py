"""What a T-representation derives and what it checks tuple by tuple, in EXPLAIN's words.

:func:`derived_steps` names the steps to a parent that are derived on demand in O(log n) (the
derived top join, the derived chains) and the ordered indexes of range parameters for EXPLAIN's
update cost; :func:`cost_notes` writes the
``engine:`` lines of EXPLAIN from the wired nodes. Both read a built
:class:`~ivm_layer.engine.trep.TRep` and cost O(nodes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .pairaxis import CHUNK as PAIR_CHUNK
from .predicates import oriented_cross, split_on_sort_var

if TYPE_CHECKING:
    from .rnode import RNode


def derived_steps(trep: Any) -> dict[int, str]:
    """GJT node id → why, for the steps to a parent that this representation derives on
    demand in O(log n) (the derived top join and chain) rather than propagates: EXPLAIN's
    update cost counts them as O(log n)."""
    out: dict[int, str] = {}
    v = trep.virtual
    if v is not None:
        for n in (v.g, v.m):
            out[n.node.id] = "the derived join above it: one range sum (see engine: below)"
    c = trep.chain
    if c is not None:
        for n in (c.mr, c.gs):
            out[n.node.id] = "the derived chain above it: pair counts on one order (see engine: below)"
    if trep.kchain is not None:
        out.update(trep.kchain.derived_steps())
    for r in trep.nodes.values():  # a range parameter's ordered index (planner/params.py)
        if r.node.order_by is not None and r.p_index is not None and r.node.id not in out:
            why = f"the ordered index on {r.node.order_by} that range lookups bisect (sorted chunks: O(log n) per change)"
            out[r.node.id] = ("O(log n)", why)
    return out


def cost_notes(trep: Any) -> list[str]:
    """What this representation does per edge, read from the wired nodes (EXPLAIN):
    the derived top join, and edges whose inequalities one order cannot cover (their other
    inequalities are checked tuple by tuple: linear delay / update cost, not O(1)/O(log n))."""
    def label(n: RNode) -> str:
        return "{" + ", ".join(sorted(n.node.vars)) + "}" if n.atom is None else trep.plan.atom_label(n.atom)

    out = []
    v = trep.virtual
    if v is not None and v.kchain is not None:
        out.append(f"derived join {label(v.p)}: ρ not stored; updates go to the derived keyed chain "
                   f"(below); enumeration visits only the keys with output, walking {label(v.g)}'s group "
                   "inside the range its extreme partner admits")
    elif v is not None:
        how = f"one inequality ({v.pred})" if v.pred is not None else "equalities only"
        out.append(f"derived join {label(v.p)}: ρ not stored; an update of {label(v.g)} or {label(v.m)} "
                   f"changes per-key counts by one range sum, O(log n) ({how}); enumeration walks "
                   f"{label(v.g)}'s group inside the range its extreme partner admits: O(1) delay")
    c = trep.chain
    if c is not None:
        out.append(f"derived chain {label(c.p1)}: ρ not stored either; {label(c.mr)}, {label(c.gs)} and "
                   f"{label(c.gt)} share one order of {c.d_var} with pair counts (sorted chunks, a segment "
                   f"tree over them): an update of any of the three costs O(log n) plus O(B) C-level work "
                   f"(B = {PAIR_CHUNK}), never a fan-out; enumeration reads {label(c.gs)}'s order inside the "
                   f"range {label(c.mr)}'s extreme tuple admits: O(1) delay")
    if trep.kchain is not None:
        out.append(trep.kchain.note(label))
    for n in trep.nodes.values():
        p = n.parent
        if p is None or p.fused or not n.node.preds:
            continue
        _, on, rest = split_on_sort_var(oriented_cross(n.node, p.node))
        if rest:
            preds = " ∧ ".join(map(str, on + rest))
            out.append(f"edge {label(p)} -> {label(n)} ({preds}): one order covers {len(on)} of "
                       f"{len(on) + len(rest)} predicates, the others are checked tuple by tuple: "
                       "O(n) enumeration delay and O(n) per update in the worst case (not O(1) / O(log n))")
    return out
