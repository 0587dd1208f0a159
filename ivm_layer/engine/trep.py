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
from .boxgroup import BoxGroup
from .chain import find_chain
from .enumgen import gen_enum
from .groups import HashGroup
from .index import Index
from .keyedchain import find_keyed_chain
from .predicates import compile_filter, key_fn, projector
from .rnode import RNode
from .updgen import compile_enabled
from .virtual import find_virtual
from .wiring import wire

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
            wire(self, r)
        if self.virtual is not None:
            self.virtual.finish()
        if self.kchain is not None:
            kc = self.kchain
            kc.finish(self.make_index(kc.mr, [], None, None, kc.gs.v_index.spec[3]))
            m = kc.nodes[0]
            m.weight = kc.weight
            m.e_bounds = kc.f_bounds(m.p_bounds)
        for r in self.nodes.values():
            r.appliers = [idx.apply for idx in r.indexes]
            structure = r.kchain or r.virtual or r.chain
            r.derived = structure.update if structure is not None else None
        if self.chain is not None:
            c = self.chain
            c.finish(self.make_index(c.gs, [], c.p1.form, None, c.d_var), self.make_index(c.mr, [], None, None, c.a_var))
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

    def make_index(self, owner: RNode, key_vars: list[str], content_vars: list[str] | None,
               content_filter, sort_var: str | tuple | None) -> Index:
        spec = (owner.id, tuple(key_vars), tuple(content_vars) if content_vars is not None else None, sort_var)
        idx = self._index_by_spec.get(spec)
        if idx is not None:
            return idx
        kf = key_fn(key_vars, owner.pos)
        if content_vars is None:
            content, cpos = None, owner.pos
        else:
            content, cpos = projector(content_vars, owner.pos), {v: i for i, v in enumerate(content_vars)}
        if sort_var is None:
            sort_pos = None
        elif type(sort_var) is tuple:  # several variables: a multi-level box index
            sort_pos = tuple(cpos[v] for v in sort_var)
        else:
            sort_pos = cpos[sort_var]
        idx = Index(kf, content, content_filter, sort_pos, spec)
        self._index_by_spec[spec] = idx
        owner.indexes.append(idx)
        return idx

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
                items = g.items() if type(g) is HashGroup or type(g) is BoxGroup else (
                    kv for b in g.buckets.values() for kv in b.items())
                for t, m in items:
                    u = proj(t)
                    out[u] = out.get(u, 0) + m
            return out
        return None

    def size(self) -> int:
        """Number of index entries (tuples) held: the representation's size, linear in the input."""
        return sum(idx.size() for idx in self._index_by_spec.values())
