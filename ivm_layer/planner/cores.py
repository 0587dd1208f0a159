"""Materialized cyclic cores: the deliberate extension of ALGORITHMS.md §2 for queries that
are cyclic only because of inequality predicates (e.g. the fraud query of 000 §1, whose
``S1.ts < S2.ts < L.ts < S1.ts + 1h`` closes a cycle over three atoms).

A smallest set of atoms C whose join, maintained as one derived relation, leaves an acyclic
query is chosen; the core is itself planned and maintained by the engine (it is acyclic by
construction) and its delta enumeration feeds the derived relation's leaf in the outer
plan. Predicates implied by the whole query are added to the core so it stays small (for
the fraud query: only pairs inside the one-hour window). The core costs memory proportional
to its size; EXPLAIN says so. Queries whose *equality* joins are cyclic (the triangle) are
still rejected: no extension hides a cyclic join.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from ..errors import CyclicQueryError
from ..query import GCQ, Atom, Predicate
from .redundancy import implied_closure, implied_predicates

#: Work budget of the core search: candidate atom sets tried × atoms² (each candidate costs
#: two planner runs, each quadratic in the atoms); planning then stays within seconds.
CORE_SEARCH_BUDGET = 20000


@dataclass
class CoreSplit:
    core: GCQ
    outer: GCQ
    core_atoms: list[int]
    relation: str


def _split(gcq: GCQ, members: tuple[int, ...], closure) -> CoreSplit | None:
    core_atoms = [gcq.atoms[i] for i in members]
    outer_atoms = [a for i, a in enumerate(gcq.atoms) if i not in members]
    core_vars = frozenset().union(*(a.varset for a in core_atoms))
    inside = [p for p in gcq.predicates if p.vars <= core_vars]
    outside = [p for p in gcq.predicates if not p.vars <= core_vars]
    needed = set(gcq.out)
    for a in outer_atoms:
        needed |= a.varset
    for p in outside:
        needed |= p.vars
    core_out = sorted(core_vars & needed)
    if not core_out:
        return None
    extra: list[Predicate] = []
    if closure:
        for a, b in combinations(core_atoms, 2):
            for x in sorted(a.varset - b.varset):
                for y in sorted(b.varset - a.varset):
                    for q in implied_predicates(closure, x, y):
                        if q not in inside and q.flipped() not in inside and q not in extra:
                            extra.append(q)
    relation = "__core_" + "_".join(a.alias for a in core_atoms)
    alias = "core(" + ", ".join(a.alias for a in core_atoms) + ")"
    schema = dict(gcq.schema)
    schema[relation] = list(core_out)
    core = GCQ(core_atoms, inside + extra, list(core_out), list(core_out), schema=dict(gcq.schema))
    outer = GCQ(outer_atoms + [Atom(relation, alias, tuple(core_out))], outside, list(gcq.output),
                list(gcq.columns), schema=schema)
    return CoreSplit(core=core, outer=outer, core_atoms=list(members), relation=relation)


def find_core(gcq: GCQ, error: CyclicQueryError, plan_fn):
    """Return ``(split, outer_plan, core_plan)`` for the best core, or re-raise ``error``."""
    equalities_only = GCQ(gcq.atoms, [p for p in gcq.predicates if p.right is None or p.vars <= _atom_cover(gcq, p)],
                          gcq.output, gcq.columns, schema=gcq.schema)
    try:
        plan_fn(equalities_only, allow_core=False)
    except CyclicQueryError:
        raise error from None  # the equality joins themselves are cyclic
    closure = implied_closure(gcq.predicates)
    n = len(gcq.atoms)
    limit = budget = max(30, CORE_SEARCH_BUDGET // (n * n))
    for k in range(2, n):
        best = None
        for members in combinations(range(n), k):
            budget -= 1
            if budget < 0:
                raise CyclicQueryError(
                    f"the inequality predicates close a cycle over {n} atoms and no materialized core was "
                    f"found among the first {limit} candidate atom sets (the planner bounds "
                    "this search so planning stays fast): break the cycle, e.g. drop one inequality or "
                    "join fewer tables", error.atoms) from None
            split = _split(gcq, members, closure)
            if split is None:
                continue
            try:
                core_plan = plan_fn(split.core, allow_core=False, implied_from=gcq.predicates)
                outer_plan = plan_fn(split.outer, allow_core=False, implied_from=gcq.predicates)
            except CyclicQueryError:
                continue
            score = (-len(split.core.predicates), members)
            if best is None or score < best[0]:
                best = (score, split, outer_plan, core_plan)
        if best is not None:
            return best[1], best[2], best[3]
    raise error


def _atom_cover(gcq: GCQ, p: Predicate) -> frozenset[str]:
    for a in gcq.atoms:
        if p.vars <= a.varset:
            return a.varset
    return frozenset()
