"""Enumeration as generated Python source (000 Algorithm 1; delta enumeration, 000 §7).

:func:`gen_enum` writes the nested loops over the connex subset N of one plan — full
enumeration (``rows()``), delta enumeration after one leaf's update (``atom``), or batched
enumeration (``rows_batches()``, whose innermost range becomes rows at C speed) — so that the
hot loop has no interpretation overhead. :class:`~ivm_layer.engine.trep.TRep` compiles and
caches the result.
"""

from __future__ import annotations

import gc
import operator
from bisect import bisect_left, bisect_right
from itertools import chain, islice, repeat
from typing import TYPE_CHECKING, Any

from ..errors import ConcurrentModificationError
from .predicates import key_expr

if TYPE_CHECKING:
    from .rnode import Host, RNode

SHORT_RUN = 8  # pairs from which the innermost range of a batch is turned into rows by C loops


def gen_enum(trep: Host, atom: int | None, batch: bool = False) -> tuple[str, dict]:
    """Generate the nested loops of Algorithm 1 over N (pre-order), as Python source.

    Children's group lookups are hoisted to their parent's level (each is probed once per
    parent tuple); a child of a fused node is the same tuple and costs no loop.
    """
    delta_mode = atom is not None
    path: set[int] = set()
    if delta_mode:
        n = trep.leaves[atom]
        while n is not None:
            if n.in_n:
                path.add(n.id)
            n = n.parent
    ns: dict[str, Any] = {"ConcurrentModificationError": ConcurrentModificationError,
                          "chain": chain, "islice": islice, "repeat": repeat, "mul": operator.mul,
                          "dvalues": dict.values}
    lines = ["def _enum(trep, dg, size):" if batch else "def _enum(trep, dg):"]
    if batch:
        ns.update(gc_enable=gc.enable, gc_disable=gc.disable, gc_isenabled=gc.isenabled)
        lines.append("    buf = []")
    body = len(lines)
    if not delta_mode:
        lines.append("    v0 = trep.version")
        lines.append("    if not trep.count: return")
    lines.append(f"    t{trep.root.id} = ()")
    layout: dict[int, dict[str, int]] = {trep.root.id: {}}
    order: list[RNode] = []

    def n_children(r: RNode) -> list[RNode]:
        kids = [c for c in r.children if c.in_n]
        if batch:  # range scans innermost: they are the long runs emitted at C speed
            kids.sort(key=lambda c: c.p_bounds is not None)
        return kids

    stale = ("raise ConcurrentModificationError('the view was updated while this enumeration was open; "
             "finish (or discard) the iteration before updating, or take list(view.rows()) first')")

    def emit_flush(ind: str) -> None:
        # The cyclic GC is paused while a batch is built (its new tuples would trigger
        # collections that scan the whole T-representation) and resumed before the yield.
        lines.append(f"{ind}if gc_on: gc_enable()")
        lines.append(f"{ind}yield buf")
        lines.append(f"{ind}buf = []")
        lines.append(f"{ind}if trep.version != v0: {stale}")
        lines.append(f"{ind}gc_on = gc_isenabled(); gc_disable()")

    def fused_chain(r: RNode) -> list[RNode] | None:
        """r and its fused descendants in N when they form a chain ending at a frontier node."""
        out = [r]
        while True:
            kids = n_children(out[-1])
            if not kids:
                return out if out[-1].frontier else None
            if len(kids) != 1 or not out[-1].fused:  # a fused node's child is the same tuple
                return None
            out.append(kids[0])

    def emit_fast(r: RNode, tp: str, ind: str) -> bool:
        """The last loop of a batch enumeration as C-level map/zip over r's group."""
        chain_nodes = fused_chain(r)
        if r.p_resid is not None or chain_nodes is None:
            return False
        for c in chain_nodes[1:]:
            order.append(c)
            layout[c.id] = layout[r.id]
        inner = {c.id for c in chain_nodes}
        outs = []
        for v in trep.out_vars:
            holder = next(x for x in order if v in layout[x.id] and v in x.node.vars)
            outs.append((holder, layout[holder.id][v]))
        prefix = [f"t{h.id}[{i}]" for h, i in outs if h.id not in inner]
        width = len(layout[r.id])
        n_out = len(outs)

        def positions(inner_first: bool) -> list[int]:
            idx, j = [], 0
            for h, i in outs:
                if h.id in inner:
                    idx.append(i if inner_first else len(prefix) + i)
                else:
                    idx.append(width + j if inner_first else j)
                    j += 1
            return idx

        ident = list(range(n_out))
        full = len(prefix) + width == n_out
        pre_first, inner_first = positions(False), positions(True)
        if full and inner_first == ident:
            arrangement, idx = "inner", None
        elif full and pre_first == ident:
            arrangement, idx = "pre", None
        elif n_out >= 2:
            arrangement, idx = "pre", pre_first
        else:
            del order[len(order) - len(chain_nodes) + 1:]
            return False
        mults = [f"m{x.id}" for x in order if x.frontier and x.id not in inner]
        mp = " * ".join(mults) if mults else "1"
        if r.p_bounds is not None:
            ns[f"B{r.id}"] = r.p_bounds
            lines.append(f"{ind}ks, vs = g{r.id}.flat_in(*B{r.id}({tp}))")
            vs = "vs"
            short = f"type(ks) is list and len(ks) < {SHORT_RUN}"
        else:
            lines.append(f"{ind}ks = g{r.id}.keys()")
            vs = f"g{r.id}.values()"
            short = f"len(ks) < {SHORT_RUN}"
        # A short run (a key with a few tuples) costs less pair by pair than setting up the C loop.
        row_src = "(" + "".join((f"tk[{i}], " if h.id in inner else f"t{h.id}[{i}], ") for h, i in outs) + ")"
        lines.append(f"{ind}if {short}:")
        lines.append(f"{ind}    mp = {mp}")
        lines.append(f"{ind}    for tk, mk in zip(ks, {vs}):")
        lines.append(f"{ind}        buf.append(({row_src}, mp * mk))")
        lines.append(f"{ind}        if len(buf) >= size:")
        emit_flush(ind + "            ")
        lines.append(f"{ind}else:")
        ind += "    "
        rows = "ks"
        if prefix:
            lines.append(f"{ind}pre = ({', '.join(prefix)},)")
            rows = "map(pre.__add__, ks)" if arrangement == "pre" else "map(add, ks, repeat(pre))"
            ns["add"] = operator.add
        if idx is not None:
            ns[f"PERM{r.id}"] = operator.itemgetter(*idx)
            rows = f"map(PERM{r.id}, {rows})"
        # all multiplicities 1 (the common case): no second pass over the group
        lines.append(f"{ind}mp = {mp}")
        lines.append(f"{ind}if g{r.id}.nonunit: it = zip({rows}, {vs} if mp == 1 else map(mul, repeat(mp), {vs}))")
        lines.append(f"{ind}else: it = zip({rows}, repeat(mp))")
        lines.append(f"{ind}while True:")
        lines.append(f"{ind}    buf.extend(islice(it, size - len(buf)))")
        lines.append(f"{ind}    if len(buf) < size: break")
        emit_flush(ind + "    ")
        return True

    def lookups(r: RNode, ind: str) -> str:
        """Probe the parent indexes of r's children in N once, right after r is bound."""
        if r.fused:
            return ind
        for c in n_children(r):
            if c.id in path or c.virtual is not None:
                continue
            key = key_expr(c.p_key_vars, layout[r.id], f"t{r.id}")
            ns[f"P{c.id}"] = c.p_index.groups
            lines.append(f"{ind}g{c.id} = P{c.id}.get({key})")
            lines.append(f"{ind}if g{c.id} is not None:")
            ind += "    "
        return ind

    def emit_level(pending: list[RNode], ind: str) -> None:
        """Open loops for the nodes in ``pending`` (their parents are bound), depth first."""
        if not pending:
            emit_output(ind)
            return
        r, rest = pending[0], pending[1:]
        p = r.parent
        tp, tr = f"t{p.id}", f"t{r.id}"
        order.append(r)
        if p.fused:  # same tuple as the parent
            lines.append(f"{ind}{tr} = {tp}; m{r.id} = m{p.id}")
            layout[r.id] = layout[p.id]
            emit_level(n_children(r) + rest, lookups(r, ind))
            return
        key = key_expr(r.p_key_vars, layout[p.id], tp)
        if r.id in path:
            layout[r.id] = r.pos
            if r.p_bounds is not None:
                ns[f"B{r.id}"] = r.p_bounds
                ns["_delta_range"] = _delta_range
                lines.append(f"{ind}for {tr}, m{r.id} in _delta_range(dg[{r.id}].get({key}), *B{r.id}({tp})):")
            else:
                lines.append(f"{ind}for {tr}, m{r.id} in dg[{r.id}].get({key}, ()):")
            ind += "    "
            if r.p_check is not None:
                ns[f"C{r.id}"] = r.p_check
                lines.append(f"{ind}if not C{r.id}({tr}, {tp}): continue")
            emit_level(n_children(r) + rest, lookups(r, ind))
            return
        layout[r.id] = r.enum_pos
        if batch and not rest and r.virtual is None and r.weight is None and r.p_box is None and emit_fast(r, tp, ind):
            return
        if r.virtual is not None:
            v = r.virtual
            ns[f"VC{r.id}"], ns[f"SG{r.id}"], ns[f"SM{r.id}"] = v.counts, v.g_groups, v.m_groups
            if v.kchain is not None:  # the keys with output (engine/keyedchain.py)
                ns[f"KC{r.id}"] = v.kchain
                lines.append(f"{ind}for k{r.id} in KC{r.id}.keys():")
            else:
                lines.append(f"{ind}for k{r.id} in VC{r.id}:")
            ind += "    "
            if v.extreme is None:
                lines.append(f"{ind}for {tr}, m{r.id} in SG{r.id}[k{r.id}].items():")
            else:
                ns[f"NB{r.id}"] = v.m.v_bounds
                if v.chain is not None:  # m's ρ is derived: its extreme tuple from the chain
                    ns[f"CH{r.id}"] = v.chain
                    ext = f"CH{r.id}.m_extreme({v.extreme == 'max_tuple'})"
                elif v.kchain is not None:
                    ext = f"KC{r.id}.m_extreme(k{r.id}, {v.extreme == 'max_tuple'})"
                else:
                    ext = f"SM{r.id}[k{r.id}].{v.extreme}()"
                lines.append(f"{ind}for b{r.id} in SG{r.id}[k{r.id}].buckets_in(*NB{r.id}({ext})):")
                ind += "    "
                lines.append(f"{ind}for {tr}, m{r.id} in b{r.id}.items():")
            ind += "    "
            emit_level(n_children(r) + rest, lookups(r, ind))
            return
        if r.p_box is not None:  # several variables compared: the box of the parent tuple
            ns[f"BX{r.id}"] = r.p_box
            lines.append(f"{ind}for {tr}, m{r.id} in g{r.id}.box_items(BX{r.id}({tp})):")
        elif r.p_bounds is not None:
            ns[f"B{r.id}"] = r.e_bounds or r.p_bounds
            lines.append(f"{ind}for b{r.id} in g{r.id}.buckets_in(*B{r.id}({tp})):")
            ind += "    "
            lines.append(f"{ind}for {tr}, m{r.id} in b{r.id}.items():")
            if r.weight is not None:  # ρ derived: ρ_S times the R partners (engine/keyedchain.py),
                # each tuple's range sum once per enumeration (it recurs under every parent tuple)
                ns[f"W{r.id}"] = r.weight
                lines.insert(body, f"    WC{r.id} = {{}}")
                lines.append(f"{ind}    w_ = WC{r.id}.get({tr})")
                lines.append(f"{ind}    if w_ is None: w_ = WC{r.id}[{tr}] = W{r.id}({tr})")
                lines.append(f"{ind}    m{r.id} = m{r.id} * w_")
        else:
            lines.append(f"{ind}for {tr}, m{r.id} in g{r.id}.items():")
        ind += "    "
        if r.p_resid is not None:
            ns[f"R{r.id}"] = r.p_resid
            lines.append(f"{ind}if not R{r.id}({tr}, {tp}): continue")
        emit_level(n_children(r) + rest, lookups(r, ind))

    def emit_output(ind: str) -> None:
        frontier = [r for r in order if r.frontier]
        outs = []
        for v in trep.out_vars:
            holder = next(r for r in order if v in layout[r.id] and v in r.node.vars)
            outs.append(f"t{holder.id}[{layout[holder.id][v]}]")
        row = "(" + "".join(o + ", " for o in outs) + ")"
        mult = " * ".join(f"m{r.id}" for r in frontier) or "1"
        if delta_mode:
            lines.append(f"{ind}m = {mult}")
            lines.append(f"{ind}if m: yield {row}, m")
        elif batch:
            lines.append(f"{ind}buf.append(({row}, {mult}))")
            lines.append(f"{ind}if len(buf) >= size:")
            emit_flush(ind + "    ")
        else:
            lines.append(f"{ind}yield {row}, {mult}")
            lines.append(f"{ind}if trep.version != v0:")
            lines.append(f"{ind}    raise ConcurrentModificationError("
                         "'the view was updated while this enumeration was open; "
                         "finish (or discard) the iteration before updating, or take list(view.rows()) first')")

    emit_level(n_children(trep.root), lookups(trep.root, "    "))
    if batch:
        lines[body:] = ["    gc_on = gc_isenabled(); gc_disable()", "    try:"] + ["    " + ln for ln in lines[body:]] + [
            "    finally:", "        if gc_on: gc_enable()", "    if buf: yield buf"]
    return "\n".join(lines) + "\n", ns


def _delta_range(group, lo, lo_incl, hi, hi_incl) -> list:
    """The entries of a sorted delta group ``(values, entries)`` whose value lies in the range."""
    if group is None:
        return []
    vals, entries = group
    i = 0 if lo is None else (bisect_left(vals, lo) if lo_incl else bisect_right(vals, lo))
    j = len(vals) if hi is None else (bisect_right(vals, hi) if hi_incl else bisect_left(vals, hi))
    return entries[i:j] if i < j else []
