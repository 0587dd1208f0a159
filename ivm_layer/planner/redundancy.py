"""Semantic acyclicity (paper 001 §3): drop inequalities implied by transitivity.

``x < z ∧ z < u ∧ x < u`` is cyclic as written but ``x < u`` follows from the other two,
so it can be dropped without changing the result. Inequalities with constant offsets are
difference constraints (``a - b < c``); a constraint is implied by the others when a path of
other constraints from ``a`` to ``b`` has a total bound that is at least as tight.
Equalities with an offset take part as two non-strict constraints but are never dropped.
A variable of a dropped predicate still occurs in the implying ones, so NULL semantics
(a NULL fails every comparison) are unchanged.
"""

from __future__ import annotations

from typing import Any

from ..query import Predicate

# An edge a -> b with (bound, strict) encodes  a - b < bound  (strict) or  a - b <= bound.
_Edge = tuple[str, str, Any, bool]


def _edges(p: Predicate) -> list[_Edge]:
    a, b, c = p.left, p.right, p.offset or 0
    if p.op == "<":
        return [(a, b, c, True)]
    if p.op == "<=":
        return [(a, b, c, False)]
    if p.op == ">":
        return [(b, a, -c, True)]
    if p.op == ">=":
        return [(b, a, -c, False)]
    return [(a, b, c, False), (b, a, -c, False)]  # '='


def _tighter(x: tuple[Any, bool], y: tuple[Any, bool]) -> bool:
    """Is bound x strictly tighter than y? (smaller bound, or equal and strict)."""
    return x[0] < y[0] or (x[0] == y[0] and x[1] and not y[1])


def _implied(target: Predicate, others: list[Predicate]) -> bool:
    edges = [e for p in others for e in _edges(p)]
    nodes = {v for e in edges for v in e[:2]} | {target.left, target.right}
    # Bellman-Ford style relaxation from every source we need; graphs are tiny.
    for a, b, bound, strict in _edges(target):
        best: dict[str, tuple[Any, bool]] = {a: (0, False)}
        for _ in range(len(nodes)):
            changed = False
            for u, v, c, s in edges:
                if u not in best:
                    continue
                cand = (best[u][0] + c, best[u][1] or s)
                if v not in best or _tighter(cand, best[v]):
                    best[v] = cand
                    changed = True
            if not changed:
                break
        else:
            return False  # negative cycle: contradictory constraints, keep everything
        if b not in best or b == a:
            return False
        got = best[b]
        if not (got[0] < bound or (got[0] == bound and (got[1] or not strict))):
            return False
    return True


def drop_implied_inequalities(preds: list[Predicate]) -> tuple[list[Predicate], list[Predicate]]:
    """Return ``(kept, dropped)``: inequalities implied by the others are dropped, in order."""
    kept = list(preds)
    dropped: list[Predicate] = []
    for p in list(preds):
        if p.right is None or p.op == "=" or p.left == p.right:
            continue
        others = [q for q in kept if q is not p and q.right is not None]
        try:
            if _implied(p, others):
                kept.remove(p)
                dropped.append(p)
        except TypeError:  # offsets of incomparable types: leave this predicate alone
            continue
    return kept, dropped
