"""Algorithm 3 of paper 000 (§6.2): the generalized GYO reduction that builds a GJT pair.

The reduction works on hypergraph triplets ``(hyperedges, out, predicates)`` with three
operations — ISO (drop isolated variables), CSE (conditional subset elimination) and FLT
(filter elimination) — and *enacts* each one on a forest of partial trees, following the
node-building rules stated after Definition 15 literally (with one shortcut: "merging" a
single root creates no new node). Stage 1 runs with ``out`` set and records the roots X;
stage 2 empties ``out`` and continues. The query is acyclic iff the triplet ends empty;
it is free-connex iff additionally ``var(X) = out`` (Theorem 3).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import CyclicQueryError
from ..query import Predicate
from .gjt import Node


@dataclass
class GYOResult:
    root: Node
    in_n: set[int]  # ids of the nodes of the connex subset N
    frontier_vars: frozenset[str]  # var(hyp(I)) after stage 1


def _sort_key(e: frozenset[str]) -> tuple:
    return (len(e), sorted(e))


class _Forest:
    def __init__(self, leaves: list[Node], preds: list[Predicate], keyed_first: bool = False):
        self.roots: list[Node] = list(leaves)
        self.preds: list[Predicate] = list(dict.fromkeys(preds))  # dedupe, keep order
        self.keyed_first = keyed_first

    def hyperedges(self) -> list[frozenset[str]]:
        return sorted({r.vars for r in self.roots if r.vars}, key=_sort_key)

    def merge(self, e: frozenset[str]) -> Node:
        """Merge every root labelled ``e`` under one node labelled ``e`` (removed from roots)."""
        ns = [r for r in self.roots if r.vars == e]
        for r in ns:
            self.roots.remove(r)
        if len(ns) == 1:
            return ns[0]
        return Node(e, children=ns)

    # -- the three reduction steps, enacted --------------------------------------------
    def step(self, out: frozenset[str]) -> bool:
        hyp = self.hyperedges()
        occurrences: dict[str, int] = {}
        for e in hyp:
            for v in e:
                occurrences[v] = occurrences.get(v, 0) + 1
        jev = set(out) | {v for v, k in occurrences.items() if k >= 2}
        pred_vars = set().union(*(p.vars for p in self.preds)) if self.preds else set()

        # FLT: predicates covered by one hyperedge become filters on the edges below it.
        for e in hyp:
            covered = [p for p in self.preds if p.vars <= e]
            if covered:
                ns = [r for r in self.roots if r.vars == e]
                for r in ns:
                    self.roots.remove(r)
                n = Node(e)
                for r in ns:
                    n.add_child(r, covered)
                self.roots.append(n)
                self.preds = [p for p in self.preds if p not in covered]
                return True
        # ISO: remove isolated variables.
        for e in hyp:
            iso = frozenset(v for v in e if v not in jev and v not in pred_vars)
            if iso:
                n = self.merge(e)
                self.roots.append(Node(e - iso, children=[n]))
                return True
        # CSE: remove a conditional subset e ⊑ f.
        pairs = [(e, f) for e in hyp for f in hyp if f != e]
        if self.keyed_first:
            # e becomes a non-guard child of f's node, grouped on e ∩ f: a pair sharing
            # variables (an equality key) first, so that a keyless inequality edge ends up
            # higher in the tree, where the engine derives it (planner/layout.py).
            pairs.sort(key=lambda ef: not (ef[0] & ef[1]))
        for e, f in pairs:
            jev_e = e & jev
            if not jev_e <= f:
                continue
            rest = e - f
            touching = [p for p in self.preds if p.vars & rest]
            ext = set().union(*(p.vars for p in touching)) - rest if touching else set()
            if ext <= f:
                n = self.merge(e)
                m = self.merge(f)
                p = Node(f)
                p.add_child(n, touching)
                p.add_child(m, [])
                self.roots.append(p)
                self.preds = [q for q in self.preds if q not in touching]
                return True
        return False


def build_gjt_pair(hyperedges: list[frozenset[str]], out: frozenset[str], preds: list[Predicate],
                   atom_names: list[str], keyed_first: bool = False) -> GYOResult:
    """Run Algorithm 3 on a query given by its atoms' hyperedges; raise CyclicQueryError if cyclic.
    ``keyed_first``: among the applicable CSE steps, take one whose eliminated edge shares
    variables with its target first (another valid GJT of the same query)."""
    leaves = [Node(e, atom=i) for i, e in enumerate(hyperedges)]
    forest = _Forest(leaves, preds, keyed_first)
    while forest.step(out):
        pass
    x_roots = list(forest.roots)
    frontier_vars = frozenset().union(*(r.vars for r in x_roots)) if x_roots else frozenset()
    while forest.step(frozenset()):
        pass
    remaining = [r for r in forest.roots if r.vars]
    if remaining or forest.preds:
        involved: list[str] = []
        for r in remaining:
            for n in r.walk():
                if n.is_leaf:
                    involved.append(atom_names[n.atom])
        if not involved:  # only predicates are left: name the atoms they connect
            for p in forest.preds:
                for i, e in enumerate(hyperedges):
                    if e & p.vars and atom_names[i] not in involved:
                        involved.append(atom_names[i])
        pred_txt = "; ".join(str(p) for p in forest.preds)
        msg = ("query is cyclic: no generalized join tree exists for the atoms "
               + ", ".join(involved)
               + (f" (the predicates {pred_txt} close the cycle)" if pred_txt else "")
               + ". Break the cycle (e.g. drop a join condition) or split the view.")
        raise CyclicQueryError(msg, tuple(involved))
    root = Node(frozenset(), children=forest.roots)
    in_n: set[int] = set()
    for x in x_roots:
        n: Node | None = x
        while n is not None:
            in_n.add(n.id)
            n = n.parent
    return GYOResult(root=root, in_n=in_n, frontier_vars=frontier_vars)
