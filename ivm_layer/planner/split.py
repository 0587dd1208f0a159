"""Predicates covered by one atom become that atom's filters (FLT at the leaves, 000 §6.2).

O(atoms × predicates); the rest are the join predicates the GJT's edges carry.
"""

from __future__ import annotations

from ..query import GCQ, Predicate


def split_predicates(gcq: GCQ) -> tuple[list[list[Predicate]], list[Predicate]]:
    """``(filters per atom, join predicates)``.

    A predicate over variables that several atoms contain is applied at each of them:
    the atoms agree on those values in every join result, so the result is unchanged.

    Examples:
        >>> from ivm_layer.gcqtext import parse_gcq
        >>> filters, joins = split_predicates(parse_gcq("r(x, y), s(y, z) | y > 5 ∧ x < z"))
        >>> [[str(p) for p in f] for f in filters], [str(p) for p in joins]
        ([['y > 5'], ['y > 5']], ['x < z'])
    """
    filters: list[list[Predicate]] = [[] for _ in gcq.atoms]
    joins: list[Predicate] = []
    for p in gcq.predicates:
        covering = [i for i, a in enumerate(gcq.atoms) if p.vars <= a.varset]
        if covering:
            for i in covering:
                filters[i].append(p)
        else:
            joins.append(p)
    return filters, joins
