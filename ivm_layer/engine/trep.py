"""The (T, N)-representation (paper 000 Def. 8) and its maintenance and enumeration.

* ``ρ_n`` of every node is kept only as the indexes that read it: ``P_n`` (enumeration,
  nodes in N) and ``S_n`` (update propagation, nodes with a sibling); identical specs are
  shared. The root keeps its single count, which is the view's total multiplicity.
* Updates (Algorithm 2): a leaf delta is propagated bottom-up; at a node with a sibling
  the parent delta is ``π(ρ_sibling ⋈ Δ)`` computed through the sibling's index — a range
  sum when the updated child is the guard (Thm. 2), a range scan otherwise; propagation
  stops as soon as a delta is empty.
* Enumeration (Algorithm 1) and delta enumeration (000 §7, push mode) are nested loops over
  N, generated as Python source per plan so that the hot loop has no interpretation overhead.
  Delta enumeration reads the recorded deltas on the updated leaf's path and ``ρ`` elsewhere.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Iterator

from ..errors import ConcurrentModificationError
from ..planner import Plan
from ..planner.gjt import Node
from ..query import Predicate
from .index import Index
from .predicates import compile_bounds, compile_cross_check, compile_filter, key_expr, key_fn, projector


class RNode:
    """Runtime data of one GJT node.

    ``form`` is the layout of the tuples this node's deltas and indexes carry and ``pos``
    maps variables to positions in it. A *fused* node is a projection (single child): it
    carries its child's tuples unchanged and reads its own variables through ``pos``, so a
    chain leaf → projection costs no extra tuples, dicts or loop levels. Where distinct
    projected tuples matter (the frontier's output, a sibling's probe) the index projects.
    """

    __slots__ = ("node", "id", "form", "pos", "own", "own_pos", "fused", "parent", "children",
                 "sibling", "in_n", "frontier", "is_guard", "filter", "indexes", "appliers", "up",
                 "p_index", "p_key_vars", "p_bounds", "p_resid", "p_check", "enum_pos", "atom")

    def __init__(self, node: Node, form: list[str], fused: bool):
        self.node = node
        self.id = node.id
        self.form = form
        self.pos = {v: i for i, v in enumerate(form)}
        self.own = sorted(node.vars) if not node.is_leaf else list(form)
        self.own_pos = {v: i for i, v in enumerate(self.own)}
        self.fused = fused
        self.parent: RNode | None = None
        self.children: list[RNode] = []
        self.sibling: RNode | None = None
        self.in_n = False
        self.frontier = False
        self.is_guard = False
        self.filter: Callable[[tuple], bool] | None = None
        self.indexes: list[Index] = []
        self.appliers: list = []  # bound Index.apply of self.indexes (hot path)
        self.up: Callable[[dict], dict] | None = None
        self.p_index: Index | None = None  # P_n for enumeration
        self.p_key_vars: list[str] = []
        self.p_bounds = None  # f(parent tuple) -> (lo, li, hi, hii) for ordered P_n
        self.p_resid = None  # f(own tuple as enumerated, parent tuple): predicates not covered by the order
        self.p_check = None  # f(delta-form tuple, parent tuple): all edge predicates (delta enumeration)
        self.enum_pos: dict[str, int] = self.pos  # layout of the tuples full enumeration yields
        self.atom: int | None = node.atom


def _oriented_cross(child: Node, parent: Node) -> list[Predicate]:
    """Edge predicates of ``parent -> child`` written as ``child_var op parent_var + c``."""
    out = []
    for p in child.preds:
        if p.left in child.vars and p.right in parent.vars:
            out.append(p)
        else:
            out.append(p.flipped())
    return out


def _flip_all(preds: list[Predicate]) -> list[Predicate]:
    return [p.flipped() for p in preds]


def _split_on_sort_var(preds: list[Predicate]) -> tuple[str | None, list[Predicate], list[Predicate]]:
    """Choose the left variable used by most predicates as the order; the rest are residual."""
    if not preds:
        return None, [], []
    counts = Counter(p.left for p in preds)
    sort_var = min(counts, key=lambda v: (-counts[v], v))
    on = [p for p in preds if p.left == sort_var]
    rest = [p for p in preds if p.left != sort_var]
    return sort_var, on, rest


def _identity(delta: dict) -> dict:
    return delta


class TRep:
    """A (T, N)-representation of the database for one plan."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.count = 0  # ρ_root(()) = total multiplicity of the view
        self.version = 0
        self._index_by_spec: dict[tuple, Index] = {}
        self.nodes: dict[int, RNode] = {}
        self.root = self._build(plan.root, True)
        self.leaves: dict[int, RNode] = {r.atom: r for r in self.nodes.values() if r.atom is not None}
        for r in self.nodes.values():
            r.in_n = r.id in plan.in_n
        for r in self.nodes.values():
            r.frontier = r.in_n and not any(c.in_n for c in r.children)
        for r in self.nodes.values():
            self._wire(r)
        for r in self.nodes.values():
            r.appliers = [idx.apply for idx in r.indexes]
        self.out_vars = list(plan.gcq.output)
        self._enum_source: dict[Any, str] = {}
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
        elif s is None:
            n.up = _make_project(projector(p.form, n.pos), p.filter)
        elif n.is_guard:
            # Case B: n guards p. Probe S_s, grouped by var(s) ∩ var(n), ordered on s's side.
            key_vars = sorted(s.node.vars & n.node.vars)
            cross = _oriented_cross(s.node, p.node) if not s.is_guard else []
            sort_var, on, rest = _split_on_sort_var(cross)
            idx = self._index(s, key_vars, None, None, sort_var)
            n.up = _make_guard_up(
                idx, key_fn(key_vars, n.pos), projector(p.form, n.pos), p.filter,
                compile_bounds(on, n.pos) if on else None,
                compile_cross_check(rest, s.pos, n.pos),
            )
        else:
            # Case C: s guards p. Probe S_s holding π_var(p) ρ_s, ordered on the parent-side variable.
            key_vars = sorted(s.node.vars & n.node.vars)
            cross = _flip_all(_oriented_cross(n.node, p.node))  # parent_var op n_var + c
            sort_var, on, rest = _split_on_sort_var(cross)
            idx = self._index(s, key_vars, p.form, p.filter, sort_var)
            n.up = _make_nonguard_up(
                idx, key_fn(key_vars, n.pos),
                compile_bounds(on, n.pos) if on else None,
                compile_cross_check(rest, p.pos, n.pos),
            )
        if n.in_n and not p.fused:
            key_vars = sorted(n.node.vars & p.node.vars)
            cross = _oriented_cross(n.node, p.node)  # n_var op parent_var + c
            sort_var, on, rest = _split_on_sort_var(cross)
            end = n  # the lowest node of n's chain of fused nodes inside N
            while end.fused and end.children[0].in_n:
                end = end.children[0]
            if end.fused:
                # The chain ends at a fused frontier node: distinct output rows need its tuples
                # aggregated onto var(end), so the index projects (and the chain aliases read that).
                n.enum_pos = end.own_pos
                n.p_index = self._index(n, key_vars, end.own, None, sort_var)
            else:
                n.p_index = self._index(n, key_vars, None, None, sort_var)
            n.p_key_vars = key_vars
            n.p_bounds = compile_bounds(on, p.pos) if on else None
            n.p_resid = compile_cross_check(rest, n.enum_pos, p.pos)
            n.p_check = compile_cross_check(cross, n.pos, p.pos)

    # -- updates ----------------------------------------------------------------------
    def propagate(self, atom: int, delta: dict[tuple, int], record: dict[int, dict] | None = None) -> bool:
        """Algorithm 2 for one leaf. Returns True if the change reached the root.

        With ``record``, the deltas of nodes in N are stored there for delta enumeration.
        """
        self.version += 1
        n = self.leaves[atom]
        while True:
            for apply in n.appliers:
                apply(delta)
            if record is not None and n.in_n:
                record[n.id] = delta
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
        """Algorithm 1: yield ``(row over the output columns, multiplicity)``."""
        if not self.out_vars:  # no output column (a global aggregate's join): the root count
            return iter([((), self.count)] if self.count else [])
        fn = self._enum_fn(None)
        return fn(self, None)

    def delta_rows(self, atom: int, record: dict[int, dict]) -> Iterator[tuple[tuple, int]]:
        """Delta enumeration after :meth:`propagate` of ``atom`` with ``record``."""
        if not self.out_vars:  # the change of the root count
            d = record.get(self.root.id, {}).get((), 0) if self.root.in_n else 0
            return iter([((), d)] if d else [])
        dgroups: dict[int, dict] = {}
        for nid, delta in record.items():
            r = self.nodes[nid]
            if r.parent is None or r.parent.fused:
                continue
            kf = key_fn(r.p_key_vars, r.pos)
            groups: dict[Any, list] = {}
            for t, d in delta.items():
                k = kf(t)
                lst = groups.get(k)
                if lst is None:
                    groups[k] = [(t, d)]
                else:
                    lst.append((t, d))
            dgroups[nid] = groups
        fn = self._enum_fn(atom)
        return fn(self, dgroups)

    def _enum_fn(self, atom: int | None) -> Callable:
        fn = self._enum_cache.get(atom)
        if fn is None:
            src, ns = self._gen_enum(atom)
            exec(compile(src, f"<ivm enumeration {'full' if atom is None else 'delta'} {atom}>", "exec"), ns)
            fn = self._enum_cache[atom] = ns["_enum"]
            self._enum_source[atom] = src
        return fn

    def _gen_enum(self, atom: int | None) -> tuple[str, dict]:
        """Generate the nested loops of Algorithm 1 over N (pre-order), as Python source.

        Children's group lookups are hoisted to their parent's level (each is probed once per
        parent tuple); a child of a fused node is the same tuple and costs no loop.
        """
        delta_mode = atom is not None
        path: set[int] = set()
        if delta_mode:
            n = self.leaves[atom]
            while n is not None:
                if n.in_n:
                    path.add(n.id)
                n = n.parent
        ns: dict[str, Any] = {"ConcurrentModificationError": ConcurrentModificationError}
        lines = ["def _enum(trep, dg):"]
        if not delta_mode:
            lines.append("    v0 = trep.version")
            lines.append("    if not trep.count: return")
        lines.append(f"    t{self.root.id} = ()")
        layout: dict[int, dict[str, int]] = {self.root.id: {}}
        order: list[RNode] = []

        def n_children(r: RNode) -> list[RNode]:
            return [c for c in r.children if c.in_n]

        def lookups(r: RNode, ind: str) -> str:
            """Probe the parent indexes of r's children in N once, right after r is bound."""
            if r.fused:
                return ind
            for c in n_children(r):
                if c.id in path:
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
                lines.append(f"{ind}for {tr}, m{r.id} in dg[{r.id}].get({key}, ()):")
                ind += "    "
                if r.p_check is not None:
                    ns[f"C{r.id}"] = r.p_check
                    lines.append(f"{ind}if not C{r.id}({tr}, {tp}): continue")
                emit_level(n_children(r) + rest, lookups(r, ind))
                return
            layout[r.id] = r.enum_pos
            if r.p_bounds is not None:
                ns[f"B{r.id}"] = r.p_bounds
                lines.append(f"{ind}for b{r.id} in g{r.id}.buckets_in(*B{r.id}({tp})):")
                ind += "    "
                lines.append(f"{ind}for {tr}, m{r.id} in b{r.id}.items():")
            else:
                lines.append(f"{ind}for {tr}, m{r.id} in g{r.id}.items.items():")
            ind += "    "
            if r.p_resid is not None:
                ns[f"R{r.id}"] = r.p_resid
                lines.append(f"{ind}if not R{r.id}({tr}, {tp}): continue")
            emit_level(n_children(r) + rest, lookups(r, ind))

        def emit_output(ind: str) -> None:
            frontier = [r for r in order if r.frontier]
            outs = []
            for v in self.out_vars:
                holder = next(r for r in order if v in layout[r.id] and v in r.node.vars)
                outs.append(f"t{holder.id}[{layout[holder.id][v]}]")
            row = "(" + "".join(o + ", " for o in outs) + ")"
            mult = " * ".join(f"m{r.id}" for r in frontier) or "1"
            if delta_mode:
                lines.append(f"{ind}m = {mult}")
                lines.append(f"{ind}if m: yield {row}, m")
            else:
                lines.append(f"{ind}yield {row}, {mult}")
                lines.append(f"{ind}if trep.version != v0:")
                lines.append(f"{ind}    raise ConcurrentModificationError("
                             "'the view was updated while this enumeration was open; "
                             "finish (or discard) the iteration before updating, or take list(view.rows()) first')")

        emit_level(n_children(self.root), lookups(self.root, "    "))
        return "\n".join(lines) + "\n", ns

    # -- introspection ------------------------------------------------------------------
    def rho(self, node_id: int) -> dict[tuple, int] | None:
        """``ρ_n`` as a dict over the node's own variables (sorted order for interior nodes),
        read back from one of its indexes; None when the node keeps no index."""
        r = self.nodes[node_id]
        if r.parent is None:
            return {(): self.count} if self.count else {}
        for idx in r.indexes:
            out: dict[tuple, int] = {}
            if idx.content is not None and idx.spec[2] != tuple(r.own):
                continue
            proj = projector(r.own, r.pos) if idx.content is None else (lambda t: t)
            for g in idx.groups.values():
                items = g.items.items() if hasattr(g, "items") else (
                    kv for b in g.buckets.values() for kv in b.items())
                for t, m in items:
                    u = proj(t)
                    out[u] = out.get(u, 0) + m
            return out
        return None

    def size(self) -> int:
        """Number of index entries (tuples) held: the representation's size, linear in the input."""
        return sum(idx.size() for idx in self._index_by_spec.values())


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
                it = g.irange(*bounds(t)) if bounds is not None else g.items.items()
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
            it = g.irange(*bounds(t)) if bounds is not None else g.items.items()
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
