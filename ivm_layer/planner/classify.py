"""Query classes for EXPLAIN and the cost model (paper 000 §3, 002 §3, ALGORITHMS.md §6)."""

from __future__ import annotations

Q_HIERARCHICAL = "q-hierarchical"
FREE_CONNEX = "free-connex"
NOT_FREE_CONNEX = "acyclic-not-free-connex"


def is_q_hierarchical(hyperedges: list[frozenset[str]], out: frozenset[str]) -> bool:
    """Hierarchical (atom sets of any two variables nested or disjoint) and free-dominant."""
    at: dict[str, frozenset[int]] = {}
    for i, e in enumerate(hyperedges):
        for v in e:
            at[v] = at.get(v, frozenset()) | {i}
    vs = list(at)
    for x in vs:
        for y in vs:
            ax, ay = at[x], at[y]
            if ax & ay and not (ax <= ay or ay <= ax):
                return False
            if x in out and ax < ay and y not in out:
                return False
    return True


COSTS = {
    Q_HIERARCHICAL: ("O(1) per single-tuple update", "O(1) delay"),
    FREE_CONNEX: ("O(|db|) worst case per update, usually a few index probes", "O(1) delay"),
    NOT_FREE_CONNEX: (
        "as free-connex, plus delta enumeration into the materialized result",
        "O(1) delay from the materialized result (memory proportional to the output)",
    ),
}
