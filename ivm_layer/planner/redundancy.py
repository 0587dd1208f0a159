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

from ..query import ORDER_OPS, Predicate

# An edge a -> b with (bound, strict) encodes  a - b < bound  (strict) or  a - b <= bound.
_Edge = tuple[str, str, Any, bool]


def _edges(p: Predicate) -> list[_Edge]:
    if p.op not in ORDER_OPS or p.right is None:
        return []
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
        if p.right is None or p.op not in ORDER_OPS or p.op == "=" or p.left == p.right:
            continue
        others = [q for q in kept if q is not p and q.right is not None]
        try:
            if _implied(p, others):
                kept.remove(p)
                dropped.append(p)
        except TypeError:  # offsets of incomparable types: leave this predicate alone
            continue
    return kept, dropped


def implied_closure(preds: list[Predicate]) -> dict[tuple[str, str], tuple[Any, bool]] | None:
    """Tightest implied ``a - b < c`` / ``a - b <= c`` for every pair, as ``{(a, b): (c, strict)}``.

    Floyd–Warshall over the difference constraints of ``preds`` (var–var predicates only).
    Returns None if the constraints are contradictory or their offsets cannot be added.
    """
    edges = [e for p in preds if p.right is not None and p.left != p.right for e in _edges(p)]
    best: dict[tuple[str, str], tuple[Any, bool]] = {}
    try:
        for a, b, c, s in edges:
            cur = best.get((a, b))
            if cur is None or _tighter((c, s), cur):
                best[(a, b)] = (c, s)
        nodes = sorted({v for e in edges for v in e[:2]})
        for k in nodes:
            for i in nodes:
                ik = best.get((i, k))
                if ik is None:
                    continue
                for j in nodes:
                    kj = best.get((k, j))
                    if kj is None:
                        continue
                    cand = (ik[0] + kj[0], ik[1] or kj[1])
                    cur = best.get((i, j))
                    if cur is None or _tighter(cand, cur):
                        best[(i, j)] = cand
        for v in nodes:
            loop = best.get((v, v))
            if loop is not None and (loop[0] < 0 or (loop[0] == 0 and loop[1])):
                return None
    except TypeError:
        return None
    return {k: v for k, v in best.items() if k[0] != k[1]}


def implied_predicates(closure: dict[tuple[str, str], tuple[Any, bool]], x: str, y: str) -> list[Predicate]:
    """The implied bounds between ``x`` and ``y`` as predicates with ``x`` on the left."""
    out = []
    up = closure.get((x, y))  # x - y < c
    if up is not None:
        out.append(Predicate(x, "<" if up[1] else "<=", y, up[0]))
    down = closure.get((y, x))  # y - x < c  ->  x > y - c
    if down is not None:
        out.append(Predicate(x, ">" if down[1] else ">=", y, -down[0] if down[0] else 0))
    return out
