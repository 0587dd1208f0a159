"""Choosing between GJTs of one query by their worst update path.

Algorithm 3 (gyo.py) may build several valid trees for one query, depending on which
conditional subset it eliminates first. They differ in which child of a join is the
non-guard (its updates fan out to the sibling's matching group) and where an edge's
equality key sits. Example, ``R.a < S.d AND S.d < T.g AND R.k = S.k`` (000 Q5): the default
tree puts T, keyless, below the top join, so a T insert fans out to every S tuple below it
(Θ(n)); eliminating R into S first (on the key) puts the keyless edge at the top join,
which the engine derives in O(log n), and leaves R fanning out only inside its key group.

:func:`rank` scores a tree by the cost class of each leaf's root path, with the steps the
engine derives on demand (its derived top join and derived chain, engine/virtual.py and
engine/chain.py) modelled structurally here; :func:`better` compares two scores. The
printed bounds (EXPLAIN) still come from the engine's actual derived steps, not from this
model: it only picks the tree.
"""

from __future__ import annotations

from .gjt import Node

# step classes, cheapest first
_O1, _OLOG, _ODEG, _ON = 0, 1, 2, 3

_INEQ = ("<", "<=", ">", ">=")


def _one_inequality(n: Node) -> bool:
    return len(n.preds) == 1 and n.preds[0].op in _INEQ


def _guard_split(p: Node) -> tuple[Node, Node] | None:
    """``(guard, other)`` of a binary join ``p`` whose one guard child (var(p) ⊆ its vars)
    carries no predicate; None otherwise."""
    guards = [c for c in p.children if p.vars <= c.vars]
    if len(guards) != 1 or guards[0].preds:
        return None
    g = guards[0]
    return g, next(c for c in p.children if c is not g)


def modelled_derived(root: Node) -> set[int]:
    """Ids of the nodes whose step to the parent the engine derives in O(log n): the two
    children of the top join and, below its non-guard child, the two children of a keyless
    chain (the structural part of ``engine.virtual.find_virtual`` / ``engine.chain.find_chain``)."""
    out: set[int] = set()
    if root.vars or len(root.children) != 1 or root.filters:
        return out
    p = root.children[0]
    if len(p.children) != 2:
        return out
    split = _guard_split(p)
    if split is None:
        return out
    g, m = split
    if m.preds and not _one_inequality(m):
        return out
    out |= {g.id, m.id}
    if not m.preds or len(m.children) != 2 or g.vars & m.vars or m.filters or p.filters:
        return out
    split = _guard_split(m)
    if split is None:
        return out
    gs, mr = split
    if gs.vars & mr.vars or not _one_inequality(mr):
        return out
    d_top = next(iter(m.preds[0].vars & m.vars), None)
    d_low = next(iter(mr.preds[0].vars & m.vars), None)
    if d_top is not None and d_top == d_low:
        out |= {gs.id, mr.id}
    return out


def _step(n: Node, derived: set[int]) -> int:
    p = n.parent
    sibs = [c for c in p.children if c is not n]
    if not sibs:
        return _O1
    if n.id in derived:
        return _OLOG
    s = sibs[0]
    if not p.vars <= n.vars:
        return _ODEG if n.vars & s.vars else _ON
    if not s.preds:
        return _O1
    sides = {q.left if q.left in s.vars else q.right for q in s.preds}
    return _OLOG if len(sides) == 1 else _ON


def rank(root: Node) -> list[int]:
    """Per leaf, the worst step class on its root path (a keyed fan-out below another fan-out
    counts as Θ(n)); sorted worst first."""
    derived = modelled_derived(root)
    out = []
    for n in root.walk():
        if not n.is_leaf:
            continue
        worst, fanouts, m = _O1, 0, n
        while m.parent is not None:
            c = _step(m, derived)
            fanouts += c >= _ODEG
            worst = max(worst, c)
            m = m.parent
        out.append(_ON if fanouts > 1 else worst)
    return sorted(out, reverse=True)


def better(a: list[int], b: list[int]) -> bool:
    """Is score ``a`` strictly better than ``b`` (a lower worst case, then fewer leaves at it)?"""
    return a < b
