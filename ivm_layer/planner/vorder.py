"""Canonical variable orders and the simple GJTs built from them (002 §3, 003 Fig. 5, 004 §4).

A *canonical* variable order (VO) of a hierarchical query puts, per connected component,
the variables common to all its atoms on top as a chain and recurses on the rest; every
atom sits under its lowest variable, so its variables are exactly its root path. The chain
is ordered by a *rank* (free before bound for q-hierarchical views; inputs, then outputs,
then bound for parameterized views), and consecutive variables of one rank form one node.

The GJT of a VO (paper 003 Fig. 5 without its shortcut): a node ``V_g`` with variables
``g ∪ dep(g)`` (``dep`` = ancestors that occur in atoms below) per VO node, whose children are
the atoms placed at ``g`` and the child VO nodes; a node with a variable outside ``free`` gets
a projection ``dep(g)`` on top, so that N (nodes over free variables, connected from the
root) is sibling-closed. In a canonical VO every child contains its parent's variables: the
tree is *simple* and Algorithm 2 costs O(1) per single-tuple update.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

from .gjt import Node


@dataclass
class VONode:
    vars: tuple[str, ...]  # one rank's segment of a chain
    atoms: list[int] = field(default_factory=list)  # atoms whose variables end here
    children: list["VONode"] = field(default_factory=list)

    def walk(self) -> Iterable["VONode"]:
        yield self
        for c in self.children:
            yield from c.walk()


def _components(atoms: list[int], anc: frozenset[str], atom_vars: dict[int, frozenset[str]]) -> list[list[int]]:
    """Connected components of ``atoms`` over their variables outside ``anc``."""
    comps: list[tuple[set[str], list[int]]] = []
    for a in atoms:
        vs = set(atom_vars[a] - anc)
        merged = [c for c in comps if c[0] & vs]
        for c in merged:
            comps.remove(c)
            vs |= c[0]
        comps.append((vs, [x for c in merged for x in c[1]] + [a]))
    return [sorted(c[1]) for c in comps]


def _build(atoms: list[int], anc: frozenset[str], atom_vars: dict[int, frozenset[str]],
           rank: Callable[[str], int]) -> list[VONode] | None:
    out: list[VONode] = []
    for comp in _components(atoms, anc, atom_vars):
        common = frozenset.intersection(*(atom_vars[a] - anc for a in comp))
        if not common:
            return None  # not hierarchical
        chain = sorted(common, key=lambda v: (rank(v), v))
        segs: list[list[str]] = []
        for v in chain:
            if segs and rank(segs[-1][-1]) == rank(v):
                segs[-1].append(v)
            else:
                segs.append([v])
        nodes = [VONode(tuple(s)) for s in segs]
        for up, down in zip(nodes, nodes[1:]):
            up.children.append(down)
        below = anc | common
        bottom = nodes[-1]
        bottom.atoms = [a for a in comp if atom_vars[a] <= below]
        kids = _build([a for a in comp if not atom_vars[a] <= below], below, atom_vars, rank)
        if kids is None:
            return None
        bottom.children.extend(kids)
        out.append(nodes[0])
    return out


def canonical_order(atom_vars: dict[int, frozenset[str]], rank: Callable[[str], int]
                    ) -> tuple[list[VONode], list[int]] | None:
    """The canonical VO of the atoms (roots, atoms without variables), or None when the atoms
    are not hierarchical or a variable sits above one of lower rank (not free-/access-top)."""
    top = [a for a, vs in atom_vars.items() if not vs]
    roots = _build([a for a, vs in atom_vars.items() if vs], frozenset(), atom_vars, rank)
    if roots is None:
        return None

    def monotone(g: VONode, lo: int) -> bool:
        r = max(rank(v) for v in g.vars)
        if min(rank(v) for v in g.vars) < lo:
            return False
        return all(monotone(c, r) for c in g.children)

    if not all(monotone(g, 0) for g in roots):
        return None
    return roots, top


def gjt_from_order(roots: list[VONode], top_atoms: list[int], atom_vars: dict[int, frozenset[str]],
                   free: frozenset[str]) -> tuple[Node, set[int]]:
    """The GJT of a VO (module docstring) and its connex subset N; not yet binarized."""
    below: dict[int, frozenset[str]] = {}

    def vars_below(g: VONode) -> frozenset[str]:
        key = id(g)
        if key not in below:
            vs = frozenset().union(*(atom_vars[a] for a in g.atoms)) if g.atoms else frozenset()
            for c in g.children:
                vs |= vars_below(c)
            below[key] = vs
        return below[key]

    def make(g: VONode, anc: frozenset[str]) -> Node:
        dep = anc & vars_below(g)
        v = Node(frozenset(g.vars) | dep)
        for a in g.atoms:
            v.add_child(Node(atom_vars[a], atom=a))
        for c in g.children:
            v.add_child(make(c, anc | frozenset(g.vars)))
        if not frozenset(g.vars) <= free:
            p = Node(dep)
            p.add_child(v)
            return p
        return v

    root = Node(frozenset())
    for a in top_atoms:
        root.add_child(Node(atom_vars[a], atom=a))
    for g in roots:
        root.add_child(make(g, frozenset()))
    in_n: set[int] = set()
    for n in root.walk():
        if n.vars <= free and (n.parent is None or n.parent.id in in_n):
            in_n.add(n.id)
    return root, in_n
