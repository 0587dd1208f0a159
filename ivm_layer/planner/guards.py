"""Guard-path analysis of a GJT: the update and delay bounds EXPLAIN prints, read off the tree.

Algorithm 2 walks from an updated leaf to the root. At each step from a node ``n`` to its
parent ``p`` it does one of (see ``engine/wiring.py``):

* no sibling: project the delta (one tuple in, at most one out);
* ``n`` guards ``p`` (var(p) ⊆ var(n)) and the sibling's edge has no inequality: one group
  total per delta tuple, O(1);
* ``n`` guards ``p`` and the sibling's edge has inequalities on one variable: a range sum,
  O(log n); with inequalities on k ≥ 2 variables a box sum over a multi-level index,
  O(log^(k+1) n) amortized (engine/boxgroup.py);
* ``n`` is not a guard: every matching tuple of the sibling's group becomes a parent delta,
  O(n) (the group's degree), and the delta grows for the steps above.

A leaf whose every step is of the first two kinds is on a *guard path*: an update of its
table costs O(1) (002 §3 "simple" GJTs, 003 §3's update property). Enumeration (Algorithm 1)
has constant delay over N unless an edge inside N carries inequalities on k ≥ 2 variables (a
multi-level box index reports each box: O(log^(k+1) n) delay).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from .gjt import Node, fmt_vars

O1, OLOG, ON = "O(1)", "O(log n)", "O(n)"
_RANK = {O1: 0, OLOG: 1, ON: 2}


def polylog(j: int) -> str:
    """``O(log^j n)`` (``O(log n)`` for j = 1): the bounds of the multi-level box indexes."""
    return OLOG if j <= 1 else f"O(log^{j} n)"


def rank(cost: str) -> float:
    """Order of the bounds: O(1) < O(log n) < O(log^2 n) < … < O(n)."""
    r = _RANK.get(cost)
    if r is not None:
        return r
    return 1 + int(cost[len("O(log^"):].split(" ", 1)[0]) / 100  # O(log^j n)


def box_reason(k: int) -> str:
    """Why an edge comparing ``k`` variables costs what it does (EXPLAIN's words)."""
    return (f"a multi-level box index on its {k} compared variables (range trees merged by the "
            f"logarithmic method, engine/boxgroup.py): a box sum or the start of a box costs "
            f"{polylog(k + 1)}, amortized over the index's rebuilds")


def _inequalities(n: Node) -> list:
    """The comparisons on the edge above ``n`` (equalities are shared variables, not predicates)."""
    return list(n.preds)


def _sort_vars(n: Node) -> int:
    """How many distinct variables of ``n``'s side its edge inequalities compare (1 = one order)."""
    own = Counter()
    for p in _inequalities(n):
        own[p.left if p.left in n.vars else p.right] += 1
    return len(own)


def _box_vars(n: Node) -> int:
    """The variables of ``n``'s side a multi-level box index covers (engine/boxgroup.py): those
    of :func:`_sort_vars` when both sides of the edge compare two or more variables, else 0."""
    own, other = set(), set()
    for p in _inequalities(n):
        if p.right is None:
            return 0
        mine = p.left if p.left in n.vars else p.right
        own.add(mine)
        other.add(p.right if mine == p.left else p.left)
    return len(own) if len(own) >= 2 and len(other) >= 2 else 0


@dataclass
class LeafPath:
    atom: int
    cost: str  # O(1) / O(log n) / O(n)
    guard_path: bool
    reason: str = ""  # the first step that is not O(1), in the user's terms


@dataclass
class GuardReport:
    leaves: dict[int, LeafPath] = field(default_factory=dict)
    multi_inequality_edges: list[Node] = field(default_factory=list)  # edges with ≥ 2 sort variables
    delay: str = O1
    delay_reason: str = ""

    @property
    def simple(self) -> bool:
        """Every leaf-to-root path is a guard path."""
        return all(lp.guard_path for lp in self.leaves.values())

    def update_cost(self, atoms: list[int] | None = None) -> str:
        """The worst per-update bound over the given leaves (all by default)."""
        costs = [lp.cost for a, lp in self.leaves.items() if atoms is None or a in atoms]
        return max(costs, key=rank) if costs else O1


def _step(n: Node) -> tuple[str, str]:
    """Cost of propagating one delta tuple from ``n`` to its parent, with the reason."""
    p = n.parent
    sibs = [c for c in p.children if c is not n]
    if not sibs:
        return O1, ""
    if not p.vars <= n.vars:
        key = n.vars & sibs[0].vars
        if key:
            return ON, (f"{fmt_vars(n.vars)} is not a guard of its parent {fmt_vars(p.vars)}: "
                        f"each update scans the sibling's matching group, the tuples with equal {fmt_vars(key)} "
                        f"(O(deg · log n), deg = the largest such group; n when one key holds every tuple)")
        return ON, (f"{fmt_vars(n.vars)} is not a guard of its parent {fmt_vars(p.vars)}: "
                    "each update scans the sibling's matching group")
    worst, why = O1, ""
    for s in sibs:
        if not _inequalities(s):
            continue
        k = _box_vars(s)
        if _sort_vars(s) > 1 and not k:
            return ON, (f"the edge to {fmt_vars(s.vars)} carries inequalities on several variables: "
                        "a range is scanned and filtered tuple by tuple")
        if k > 1:
            return polylog(k + 1), (f"a box sum over the edge to {fmt_vars(s.vars)}, which compares {k} "
                                    f"variables: {box_reason(k)}")
        worst, why = OLOG, f"a range sum over the inequality edge to {fmt_vars(s.vars)}"
    return worst, why


def analyze(root: Node, in_n: set[int], derived: Mapping[int, str] | None = None) -> GuardReport:
    """Classify every leaf's root path and every edge inside N (see the module docstring).
    ``derived``: node id → reason, for steps the engine derives on demand in O(log n) instead
    of propagating (its derived joins); they count as O(log n) whatever the tree says. A value
    may also be a pair (cost, reason), and the key ``"delay"`` a pair giving the engine's own
    enumeration delay (a derived frontier's per-tuple range sum)."""
    derived = derived or {}
    rep = GuardReport()
    for n in root.walk():
        if n.parent is not None and n.id in in_n and _sort_vars(n) > 1:
            rep.multi_inequality_edges.append(n)
        if not n.is_leaf:
            continue
        cost, reason, guard = O1, "", True
        m = n
        while m.parent is not None:
            d = derived.get(m.id)
            c, why = _step(m) if d is None else (d if isinstance(d, tuple) else (OLOG, d))
            if not m.parent.vars <= m.vars and [x for x in m.parent.children if x is not m]:
                guard = False
            if rank(c) > rank(cost):
                cost, reason = c, why
            m = m.parent
        rep.leaves[n.atom] = LeafPath(n.atom, cost, guard, reason)
    unboxed = [e for e in rep.multi_inequality_edges if not _box_vars(e)]
    if unboxed:
        rep.delay = ON
        rep.delay_reason = (f"the edge above {fmt_vars(unboxed[0].vars)} compares several variables by "
                            "inequalities: one is served by the index order, the others filter tuple by tuple")
    elif rep.multi_inequality_edges:
        e = max(rep.multi_inequality_edges, key=_sort_vars)
        k = _sort_vars(e)
        rep.delay = polylog(k + 1)
        rep.delay_reason = (f"the edge above {fmt_vars(e.vars)} compares {k} variables by inequalities: "
                            f"{box_reason(k)}, and reports each tuple of the box once")
    if "delay" in derived:  # the engine's own enumeration bound (cost, reason)
        rep.delay, rep.delay_reason = derived["delay"]
    return rep


def is_simple(root: Node) -> bool:
    """Every child with a sibling guards its parent (000/002: a *simple* GJT)."""
    for n in root.walk():
        if n.parent is not None and len(n.parent.children) > 1 and not n.parent.vars <= n.vars:
            return False
    return True
