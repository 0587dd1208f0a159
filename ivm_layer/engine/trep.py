"""The (T, N)-representation (paper 000 Def. 8) and its maintenance and enumeration.

* ``ρ_n`` of every node is kept only as the indexes that read it: ``P_n`` (enumeration,
  nodes in N) and ``S_n`` (update propagation, nodes with a sibling); identical specs are
  shared. The root keeps its single count, which is the view's total multiplicity.
* Updates (Algorithm 2): a leaf delta is propagated bottom-up; at a node with a sibling
  the parent delta is ``π(ρ_sibling ⋈ Δ)`` computed through the sibling's index — a range
  sum when the updated child is the guard (Thm. 2), a range scan otherwise; propagation
  stops as soon as a delta is empty.
* The top join node (the root's only child) is *derived* when its non-guard edge carries at
  most one one-sided inequality (:class:`Virtual`): instead of ρ of it, only per-key counts
  are kept, so an update of either side costs a range sum, O(log n), where the paper's
  Alg. 2 rewrites up to n entries (000 Thm. 2: O(M log M)).
* Enumeration (Algorithm 1) and delta enumeration (000 §7, push mode) are nested loops over
  N, generated as Python source per plan so that the hot loop has no interpretation overhead.
  Delta enumeration reads the recorded deltas on the updated leaf's path and ``ρ`` elsewhere.
"""

from __future__ import annotations

from itertools import chain
from typing import Any, Callable, Iterator

from ..errors import ConcurrentModificationError
from ..planner import Plan
from ..planner.gjt import Node
from .chain import find_chain
from .enumgen import gen_enum
from .groups import HashGroup
from .index import Index
from .keyedchain import find_keyed_chain
from .predicates import (
    compile_bounds,
    compile_cross_check,
    compile_filter,
    flip_all,
    key_fn,
    oriented_cross,
    projector,
    split_on_sort_var,
)
from .rnode import RNode
from .updgen import compile_enabled
from .virtual import find_virtual

ROWS_BATCH = 512  # pairs per batch behind rows()


class TRep:
    """A (T, N)-representation of the database for one plan."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.count = 0  # ρ_root(()) = total multiplicity of the view
        self.version = 0
        self.open_buffers: dict[int, list] = {}  # batches open rows() iterators are reading
        self.fast_enum = compile_enabled()
        self._index_by_spec: dict[tuple, Index] = {}
        self.nodes: dict[int, RNode] = {}
        self.root = self._build(plan.root, True)
        self.leaves: dict[int, RNode] = {r.atom: r for r in self.nodes.values() if r.atom is not None}
        for r in self.nodes.values():
            r.in_n = r.id in plan.in_n
        for r in self.nodes.values():
            r.frontier = r.in_n and not any(c.in_n for c in r.children)
        self.virtual = find_virtual(self)
        self.chain = find_chain(self)
        self.kchain = find_keyed_chain(self) if self.chain is None else None
        for r in self.nodes.values():
            self._wire(r)
        if self.virtual is not None:
            self.virtual.finish()
        if self.kchain is not None:
            kc = self.kchain
            kc.finish(self._index(kc.mr, [], None, None, kc.gs.v_index.spec[3]))
            m = kc.nodes[0]
            m.weight = kc.weight
            m.e_bounds = kc.f_bounds(m.p_bounds)
        for r in self.nodes.values():
            r.appliers = [idx.apply for idx in r.indexes]
            structure = r.kchain or r.virtual or r.chain
            r.derived = structure.update if structure is not None else None
        if self.chain is not None:
            c = self.chain
            c.finish(self._index(c.gs, [], c.p1.form, None, c.d_var), self._index(c.mr, [], None, None, c.a_var))
        self.out_vars = list(plan.gcq.output)
        self._enum_source: dict[Any, str] = {}
        self._delta_keys: dict[int, Callable] = {}  # node id -> its P_n key (delta enumeration)
        self._enum_cache: dict[Any, Callable] = {}

    # -- construction -----------------------------------------------------------------
    def _build(self, node: Node, is_root: bool = False) -> RNode:
        kids = [self._build(c) for c in node.children]
        fused = len(kids) == 1 and node.children[0].vars > node.vars and not is_root and not node.pinned
        if node.is_leaf:
            form = list(dict.fromkeys(v for v in self.plan.gcq.atoms[node.atom].vars if v is not None))
        elif fused:
            form = kids[0].form
        else:
            form = sorted(node.vars)
        r = RNode(node, form, fused)
        r.filter = compile_filter(node.filters, r.pos) if not node.is_leaf else None
        self.nodes[r.id] = r
        for k in kids:
            k.parent = r
            r.children.append(k)
        if len(kids) == 2:
            a, b = kids
            a.sibling, b.sibling = b, a
        for c in kids:
            c.is_guard = node.vars <= c.node.vars
        return r

    def _index(self, owner: RNode, key_vars: list[str], content_vars: list[str] | None,
               content_filter, sort_var: str | None) -> Index:
        spec = (owner.id, tuple(key_vars), tuple(content_vars) if content_vars is not None else None, sort_var)
        idx = self._index_by_spec.get(spec)
        if idx is not None:
            return idx
        kf = key_fn(key_vars, owner.pos)
        if content_vars is None:
            content, cpos = None, owner.pos
        else:
            content, cpos = projector(content_vars, owner.pos), {v: i for i, v in enumerate(content_vars)}
        sort_pos = cpos[sort_var] if sort_var is not None else None
        idx = Index(kf, content, content_filter, sort_pos, spec)
        self._index_by_spec[spec] = idx
        owner.indexes.append(idx)
        return idx

    def _wire(self, n: RNode) -> None:
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
        elif n.is_guard:
            # Case B: n guards p. Probe S_s, grouped by var(s) ∩ var(n), ordered on s's side.
            key_vars = sorted(s.node.vars & n.node.vars)
            cross = oriented_cross(s.node, p.node) if not s.is_guard else []
            sort_var, on, rest = split_on_sort_var(cross)
            idx = self._index(s, key_vars, None, None, sort_var)
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
            idx = self._index(s, key_vars, p.form, p.filter, sort_var)
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
            if n.virtual is not None:
                pass  # derived on demand: no P_n
            elif n.chain is not None:
                # derived: P_n is S's group (π_var(n) ρ_S, ordered on d), read inside the
                # range R's extreme tuple admits (e_bounds below)
                n.p_index = self._index(n.chain.gs, key_vars, n.form, None, sort_var)
            elif end.fused:
                # The chain ends at a fused frontier node: distinct output rows need its tuples
                # aggregated onto var(end), so the index projects (and the chain aliases read that).
                n.enum_pos = end.own_pos
                n.p_index = self._index(n, key_vars, end.own, None, sort_var)
            else:
                n.p_index = self._index(n, key_vars, None, None, sort_var)
            n.p_key_vars = key_vars
            n.p_bounds = compile_bounds(on, p.pos) if on else (_unbounded if ranged else None)
            if n.chain is not None:
                n.e_bounds = n.chain.p1_bounds(n.p_bounds)
            n.p_sort_pos = n.pos[sort_var] if on or ranged else None
            n.p_resid = compile_cross_check(rest, n.enum_pos, p.pos)
            n.p_check = compile_cross_check(cross, n.pos, p.pos)

    # -- updates ----------------------------------------------------------------------
    def propagate(self, atom: int, delta: dict[tuple, int], record: dict[int, dict] | None = None) -> bool:
        """Algorithm 2 for one leaf. Returns True if the change reached the root.

        With ``record``, the deltas of nodes in N are stored there for delta enumeration.
        """
        self.bump()
        n = self.leaves[atom]
        while True:
            for apply in n.appliers:
                apply(delta)
            if record is not None and n.in_n:
                record[n.id] = delta
            p = n.parent
            if p is not None and p.derived is not None:
                return p.derived(n, delta, record)
            up = n.up
            if up is None:  # the root
                self.count += delta.get((), 0)
                return True
            delta = up(delta)
            if not delta:
                return False
            n = n.parent

    # -- enumeration ------------------------------------------------------------------
    def enumerate(self) -> Iterator[tuple[tuple, int]]:
        """Algorithm 1: yield ``(row over the output columns, multiplicity)``.

        The pairs come from the batched enumeration (runs of a group become pairs at C speed),
        chained at C speed: a pair costs about what a list's does. An update while the iterator
        is open empties the batch being read (:meth:`bump`), so its next step raises
        ConcurrentModificationError as the row-by-row generator's would (``IVM_COMPILE=0``:
        that generator, the reference)."""
        if not self.out_vars:  # no output column (a global aggregate's join): the root count
            return iter([((), self.count)] if self.count else [])
        if not self.fast_enum:
            return self._enum_fn(None)(self, None)
        return chain.from_iterable(self._guarded(self._enum_fn("batch")(self, None, ROWS_BATCH)))

    def _guarded(self, batches: Iterator[list]) -> Iterator[list]:
        """``batches`` registered as open while they are read (see :meth:`bump`)."""
        v0 = self.version
        open_ = self.open_buffers
        key = None
        try:
            for buf in batches:
                key = id(buf)
                open_[key] = buf
                yield buf
                open_.pop(key, None)
                key = None
                if self.version != v0:
                    raise ConcurrentModificationError(
                        "the view was updated while this enumeration was open; finish (or discard) the "
                        "iteration before updating, or take list(view.rows()) first")
        finally:
            if key is not None:
                open_.pop(key, None)

    def bump(self) -> None:
        """A change of the representation: a new version, and the batches open ``rows()``
        iterators are reading emptied (their next step then sees the new version and raises)."""
        self.version += 1
        if self.open_buffers:
            for buf in self.open_buffers.values():
                buf.clear()
            self.open_buffers.clear()

    def delta_rows(self, atom: int, record: dict[int, dict]) -> Iterator[tuple[tuple, int]]:
        """Delta enumeration after :meth:`propagate` of ``atom`` with ``record``."""
        if not self.out_vars:  # the change of the root count
            d = record.get(self.root.id, {}).get((), 0) if self.root.in_n else 0
            return iter([((), d)] if d else [])
        dgroups: dict[int, dict] = {}
        dkeys = self._delta_keys
        for nid, delta in record.items():
            r = self.nodes[nid]
            if r.parent is None or r.parent.fused:
                continue
            kf = dkeys.get(nid)
            if kf is None:
                kf = dkeys[nid] = key_fn(r.p_key_vars, r.pos)
            groups: dict[Any, list] = {}
            for t, d in delta.items():
                k = kf(t)
                lst = groups.get(k)
                if lst is None:
                    groups[k] = [(t, d)]
                else:
                    lst.append((t, d))
            if r.p_bounds is not None:
                # Ordered like P_n, so each parent tuple reads its range by bisection (a batch
                # delta is not scanned once per parent tuple: no quadratic batches).
                sp = r.p_sort_pos
                for k, lst in groups.items():
                    lst.sort(key=lambda e: e[0][sp])
                    groups[k] = ([e[0][sp] for e in lst], lst)
            dgroups[nid] = groups
        fn = self._enum_fn(atom)
        return fn(self, dgroups)

    def enumerate_batches(self, size: int) -> Iterator[list[tuple[tuple, int]]]:
        """Algorithm 1 in lists of about ``size`` ready ``(row, multiplicity)`` pairs: the
        innermost range of each output prefix is turned into rows at C speed."""
        if not self.out_vars:
            return iter([[((), self.count)]] if self.count else [])
        return self._enum_fn("batch")(self, None, max(1, int(size)))

    def _enum_fn(self, atom: Any) -> Callable:
        fn = self._enum_cache.get(atom)
        if fn is None:
            src, ns = gen_enum(self, None, batch=True) if atom == "batch" else gen_enum(self, atom)
            exec(compile(src, f"<ivm enumeration {'full' if atom is None else 'delta'} {atom}>", "exec"), ns)
            fn = self._enum_cache[atom] = ns["_enum"]
            self._enum_source[atom] = src
        return fn

    # -- introspection ------------------------------------------------------------------
    def rho(self, node_id: int) -> dict[tuple, int] | None:
        """``ρ_n`` as a dict over the node's own variables (sorted order for interior nodes),
        read back from one of its indexes; None when the node keeps no index."""
        r = self.nodes[node_id]
        if r.parent is None:
            return {(): self.count} if self.count else {}
        if self.kchain is not None and r in self.kchain.nodes:
            return None  # derived: its indexes hold ρ_S, not ρ_n
        for idx in r.indexes:
            out: dict[tuple, int] = {}
            if idx.content is not None and idx.spec[2] != tuple(r.own):
                continue
            proj = projector(r.own, r.pos) if idx.content is None else (lambda t: t)
            for g in idx.groups.values():
                items = g.items() if type(g) is HashGroup else (
                    kv for b in g.buckets.values() for kv in b.items())
                for t, m in items:
                    u = proj(t)
                    out[u] = out.get(u, 0) + m
            return out
        return None

    def size(self) -> int:
        """Number of index entries (tuples) held: the representation's size, linear in the input."""
        return sum(idx.size() for idx in self._index_by_spec.values())


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
