"""A keyed chain with a derived frontier (000 Q9: R.a < S.d < T.g, S.k = T.k, R not output).

Shape (see :func:`find_keyed_chain`): the derived top join p (:class:`Virtual`) joins
the T side ``gt`` (guard) and ``m`` on one inequality ``d θ g`` and an equality key K (the
variables they share, not empty); m is, through fused projections, the frontier node f of N
whose children are a guard S (``gs``) and a keyless non-guard R (``mr``) on one inequality
``a θ d`` on the same d. The planner cannot put R higher (R is not in N: N must end at f), so
Algorithm 2 would fan an R update out to every S tuple in range (Θ(n)). Instead

    ρ_f(y) = ρ_S(y) · A(y)        A(y) = Σ_{x : a_x θ d_y} ρ_R(x)   (one range sum on R)
    B(y)   = Σ_{z ∈ K(y) : d_y θ g_z} ρ_T(z)                         (one range sum on T)
    count  = Σ_y ρ_S(y) · A(y) · B(y)

f's indexes (and those of its fused ancestors up to m) hold ρ_S only; a global order ``vg``
of f's tuples on d holds V(y) = ρ_S(y) · B(y). Then an update of

* R: Δcount = Δ(x) · Σ_{d_y ∈ I_x} V(y)            — one range sum, O(log n);
* S: Δcount = Δ(y) · A(y) · B(y), V(y) += Δ(y)·B(y) — O(log n);
* T: Δcount = Δ(z) · Σ_{y ∈ K(z), d_y ∈ I_z} ρ_S(y) · A(y), V(y) += Δ(z)·ρ_S(y) for those y
  — O(deg · log n), deg = the size of z's key group of S (not n).

Enumeration multiplies each f tuple read from an index by A(y): O(log n) per f tuple, not
O(1) (computed once per tuple and enumeration: a tuple recurs under each of its T partners). This is the price of the update bound: constant delay would need A(y) (a rank in a
dynamic set) in O(1), and dynamic prefix sums cannot give O(1) queries with polylog updates
(Fredman–Saks). Keys are enumerated from ``alive``: per key k, L(k) = the S tuple of k with a T
partner that is extreme towards R's side; k has output iff L(k) lies in the range R's
extreme tuple admits, so the keys with output are one range of ``alive`` (no dead key is
visited).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .chain import chain_edges, intersect
from .groups import OrderedGroup
from .weightorder import WeightOrder
from .predicates import (
    compile_bounds,
    compile_range_sum,
    key_fn,
    oriented_cross,
    projector,
    split_on_sort_var,
)

if TYPE_CHECKING:
    from .index import Index
    from .rnode import Host, RNode
    from .virtual import Virtual


class KeyedChain:
    """The derived frontier f of a keyed chain (see the module docstring)."""

    __slots__ = ("trep", "v", "f", "gs", "mr", "gt", "nodes", "d_pos", "vg", "alive", "lval",
                 "r_groups", "s_groups", "t_groups", "proj_s", "a_bounds", "x_bounds", "x_lower",
                 "z_bounds", "z_lower", "z_key", "z_proj", "y_key", "y_bounds", "last", "zp_bounds",
                 "a_sum", "x_sum", "y_sum")

    def __init__(self, trep: Host, v: Virtual, f: RNode, nodes: list[RNode], d_var: str,
                 proj_s: Callable, a_bounds: Callable, x_bounds: Callable, x_lower: bool,
                 z_bounds: Callable, z_lower: bool, z_key: Callable, z_proj: Callable,
                 zp_bounds: Callable):
        self.trep, self.v, self.f, self.gt = trep, v, f, v.g
        self.gs = next(c for c in f.children if c.is_guard)
        self.mr = self.gs.sibling
        self.nodes = nodes  # m … f (the fused chain), top first
        self.d_pos = f.pos[d_var]
        self.vg = WeightOrder()  # the d values of f's tuples, weighted V(y) = ρ_S(y) · B(y)
        self.alive = OrderedGroup(0)  # (L(k), k) per key with an S tuple that has a T partner
        self.lval: dict = {}  # key -> its entry in alive
        self.proj_s = proj_s  # S tuple -> f tuple
        self.a_bounds = a_bounds  # f tuple -> the a-range of its R partners
        self.x_bounds, self.x_lower = x_bounds, x_lower  # R tuple -> the d-range it admits
        self.z_bounds, self.z_lower = z_bounds, z_lower  # T tuple -> the d-range it admits
        self.z_key, self.z_proj = z_key, z_proj  # T tuple -> its key; -> its p tuple
        self.zp_bounds = zp_bounds  # p tuple (as T's index holds them) -> the d-range it admits
        # the S tuple of a key whose d is extreme towards R's side: the last one when R bounds d
        # from below (d > a), the first one otherwise
        self.last = x_lower

    def finish(self, r_index: Index) -> None:
        m = self.nodes[0]
        self.r_groups = r_index.groups  # ρ_R ordered on a
        self.s_groups = self.gt.v_index.groups  # f's tuples (ρ_S) per key, ordered on d
        self.t_groups = m.v_index.groups  # π_var(p) ρ_T per key, ordered on g
        self.y_key, self.y_bounds = m.v_key, m.v_bounds
        self.y_sum = compile_range_sum(m.step[3], m.pos) if m.step is not None and m.step[0] == "nonguard" \
            else (lambda g, y: g.range_sum(*self.y_bounds(y)))

    # -- the three factors ----------------------------------------------------------------
    def weight(self, y: tuple) -> Any:
        """A(y): the R tuples y joins (its multiplicity factor beyond ρ_S)."""
        g = self.r_groups.get(())
        return self.a_sum(g, y) if g is not None else 0

    def _b(self, y: tuple) -> Any:
        g = self.t_groups.get(self.y_key(y))
        return self.y_sum(g, y) if g is not None else 0

    def _refresh(self, k) -> None:
        """Recompute L(k) in ``alive`` after a change of key k's S or T tuples (``alive`` is
        touched only when L(k) moved)."""
        e = None
        sg, tg = self.s_groups.get(k), self.t_groups.get(k)
        if sg is not None and tg is not None and len(sg) and len(tg):
            ext = tg.min_tuple() if self.z_lower else tg.max_tuple()
            y = sg.edge_in(*self.zp_bounds(ext), last=self.last)
            if y is not None:
                e = (y[self.d_pos], k)
        old = self.lval.get(k)
        if old == e:
            return
        if old is not None:
            del self.lval[k]
            self.alive.add(old, -1)
        if e is not None:
            self.lval[k] = e
            self.alive.add(e, 1)

    # -- updates --------------------------------------------------------------------------
    def _apply_f(self, fd: dict) -> None:
        for n in self.nodes:
            for apply in n.appliers:
                apply(fd)

    def _record_f(self, fd: dict, record: dict) -> None:
        for n in self.nodes:
            if n.in_n:
                record[n.id] = fd

    def update(self, n: RNode, delta: dict, record: dict | None) -> bool:
        """Child n (S, R or the T side) changed by ``delta`` (n's own indexes are applied)."""
        dc = 0
        pd = None
        if n is self.gs:
            proj, weight, b = self.proj_s, self.weight, self._b
            fd: dict = {}
            for t, d in delta.items():
                if d:
                    y = proj(t)
                    fd[y] = fd.get(y, 0) + d
            fd = {y: d for y, d in fd.items() if d}
            self._apply_f(fd)
            rec = {} if record is not None else None
            keys = set()
            for y, d in fd.items():
                a, bb = weight(y), b(y)
                if bb:
                    self.vg.add(y[self.d_pos], d * bb)
                if a and bb:
                    dc += d * a * bb
                if rec is not None and a:
                    rec[y] = d * a
                keys.add(self.y_key(y))
            for k in keys:
                self._refresh(k)
            if record is not None:
                self._record_f(rec, record)
                pd = self.nodes[0].up(rec) if rec else {}
        elif n is self.mr:
            vg, xs = self.vg, self.x_sum
            for x, d in delta.items():
                if d:
                    dc += d * xs(vg, x)
            if record is not None:
                fd = n.up(delta)  # the fan-out, only to enumerate the change
                self._record_f(fd, record)
                pd = self.nodes[0].up(fd) if fd else {}
        else:  # the T side (the guard of the derived top join)
            sgroups, zkey, zb, vg_add = self.s_groups, self.z_key, self.z_bounds, self.vg.add
            a_sum, rg = self.a_sum, self.r_groups.get(())  # A(y): no R tuple changes here
            dp = self.d_pos
            pd = {}
            keys = set()
            for z, d in delta.items():
                if not d:
                    continue
                k = zkey(z)
                keys.add(k)
                g = sgroups.get(k)
                if g is None:
                    continue
                s = 0
                for b in g.buckets_in(*zb(z)):
                    # one bucket: the S tuples of one d, so one V(y) key and one A(y) (A
                    # reads only d: R's edge is a θ d)
                    w = sum(b.values()) if len(b) > 1 else next(iter(b.values()))
                    y = next(iter(b))
                    vg_add(y[dp], d * w)
                    if rg is not None:
                        s += w * a_sum(rg, y)
                if s:
                    dc += d * s
                    pz = self.z_proj(z)
                    pd[pz] = pd.get(pz, 0) + d * s
            for k in keys:
                self._refresh(k)
        trep = self.trep
        if record is not None:
            if self.v.p.in_n and pd is not None:
                record[self.v.p.id] = pd
            if dc or pd:
                record[trep.root.id] = {(): dc} if dc else {}
        if dc:
            trep.count += dc
        return bool(dc) or bool(pd)

    # -- enumeration ----------------------------------------------------------------------
    def x_range(self) -> tuple | None:
        """The d-range admitted by R's extreme tuple (None: R is empty)."""
        g = self.r_groups.get(())
        if g is None or not len(g):
            return None
        return self.x_bounds(g.min_tuple() if self.x_lower else g.max_tuple())

    def keys(self):
        """The keys with output: those whose L(k) lies in R's extreme range."""
        r = self.x_range()
        if r is None:
            return
        for b in self.alive.buckets_in(*r):
            for e in b:
                yield e[1]

    def m_extreme(self, k, last: bool) -> tuple | None:
        """The f tuple of key k with the smallest (largest) d that has an R partner."""
        r = self.x_range()
        g = self.s_groups.get(k)
        if r is None or g is None:
            return None
        return g.edge_in(*r, last=last)

    def f_bounds(self, bounds: Callable) -> Callable[[tuple], tuple]:
        """m's enumeration range under a p tuple, cut to the d's with an R partner."""

        def b(tp):
            own = bounds(tp)
            r = self.x_range()
            if r is None:
                x = own[0] if own[0] is not None else own[2]
                return x, False, x, False
            return intersect(own, r)

        return b


    # -- introspection (EXPLAIN) ------------------------------------------------------------
    def derived_steps(self) -> dict:
        """GJT node id → (cost, reason) or reason for the steps this chain derives, and
        ``"delay"`` → its enumeration delay (planner/guards.py reads them)."""
        out: dict = {}
        for n in (self.mr, self.gs):
            out[n.node.id] = "the derived keyed chain above it: one range sum (see engine: below)"
        key = "{" + ", ".join(sorted(self.gt.node.vars & self.nodes[0].node.vars)) + "}"
        out[self.gt.node.id] = ("O(n)", (
            "the derived keyed chain above it: each update reads the S tuples of its key group in its "
            f"range, the tuples with equal {key} (O(deg · log n), deg = the largest such group; n when "
            "one key holds every tuple)"))
        out["delay"] = ("O(log n)", (
            f"each tuple of the derived keyed chain's frontier {{{', '.join(sorted(self.f.node.vars))}}} "
            "is multiplied by its R partners' count, one range sum (see engine: below)"))
        return out

    def note(self, label: Callable) -> str:
        """The EXPLAIN line of this chain (``label``: RNode -> its name)."""
        return (f"derived keyed chain {label(self.f)}: its ρ is not stored; its indexes hold ρ of "
                f"{label(self.gs)} and each tuple's weight is the count of its {label(self.mr)} partners "
                f"(one range sum), so an update of {label(self.mr)} or {label(self.gs)} costs O(log n) and "
                f"one of {label(self.gt)} O(deg · log n) (its key group), never a fan-out over "
                f"{label(self.gs)}; enumeration pays that range sum per tuple of {label(self.f)}: O(log n) "
                "delay (O(1) would need dynamic prefix sums with O(1) queries and polylog updates, "
                "which do not exist)")


def find_keyed_chain(trep: Host) -> KeyedChain | None:
    """The keyed chain of ``trep`` whose frontier's ρ can be derived, or None.

    Shape: the derived top join p (one inequality) joins the T side on a non-empty key K;
    its other child m is, through fused projections without filters, the frontier f of N
    (f's children not in N); f joins a guard S and a keyless non-guard R on one inequality,
    and both inequalities compare the same variable d of f."""
    v = trep.virtual
    if v is None or v.pred is None or trep.root.filter is not None:
        return None
    p, m, gt = v.p, v.m, v.g
    key = sorted(gt.node.vars & m.node.vars)
    if not key or p.filter is not None or not m.in_n:
        return None
    nodes, f = [m], m
    while f.fused:
        if f.node.filters or f.filter is not None:
            return None
        f = f.children[0]
        nodes.append(f)
    if len(f.children) != 2 or f.node.filters or f.filter is not None or not f.frontier:
        return None
    if any(c.in_n for c in f.children):
        return None
    edges = chain_edges(f, m, p)
    if edges is None:
        return None
    gs, mr, lower, top = edges
    d_var = lower[0].left
    if d_var not in f.pos:
        return None
    _, on_a, _ = split_on_sort_var(oriented_cross(mr.node, f.node))  # a op d + c
    kc = KeyedChain(trep, v, f, nodes, d_var, projector(f.form, gs.pos),
                    compile_bounds(on_a, f.pos),
                    compile_bounds(lower, mr.pos), lower[0].op in (">", ">="),
                    compile_bounds(top, gt.pos), top[0].op in (">", ">="),
                    key_fn(key, gt.pos), projector(p.form, gt.pos), compile_bounds(top, p.pos))
    kc.a_sum = compile_range_sum(on_a, f.pos)
    kc.x_sum = compile_range_sum(lower, mr.pos)
    f.kchain = p.kchain = v.kchain = kc
    return kc
