"""Planner: GCQ -> binary, sibling-closed GJT pair (T, N) plus its classification.

:data:`RULES` is the whole planner, one pass after another (``passes.py``; sqlglot's
optimizer is the model): each pass takes the :class:`~.passes.Draft` of a plan and returns it
refined, each has its own doctest and tests, and the papers' worked examples are fixture
files of query / expected plan pairs (``tests/planner/fixtures/``). Planning costs
polynomial time in the query's size, never in the data.

Examples:
    >>> from ivm_layer.gcqtext import parse_gcq
    >>> p = plan(parse_gcq("π[y, z, w, u](r(x, y) ⋈ s(y, z, w) ⋈ t(u, v) | x < z ∧ w < u)"))
    >>> p.klass  # 000 Example 3
    'free-connex'
"""

from __future__ import annotations

from ..query import GCQ, Predicate
from .passes import (
    Draft,
    PlannerPass,
    classify,
    close_siblings,
    drop_implied,
    eliminate,
    keys_first,
    make_binary,
    run,
    split_filters,
    tighten,
)
from .plan import Plan
from .split import split_predicates
from .trees import finish_tree, plan_from_order, plan_from_tree

#: The planner's passes, in the order they run.
RULES: tuple[PlannerPass, ...] = (
    split_filters,   # predicates over one atom become its filters (FLT at the leaves)
    drop_implied,    # 001 §3: inequalities implied by transitivity go (semantic acyclicity)
    eliminate,       # 000 §6.2 Algorithm 3: the GJT pair (T, N), or a materialized cyclic core
    close_siblings,  # 000 §3 Lemmas 2–3: N sibling-closed
    make_binary,     # 000 Fig. 5: binary nodes, the atoms' filters on their leaves, simplified
    tighten,         # implied bounds on edges comparing the same variables; invariants checked
    keys_first,      # inequality joins: a keys-first elimination order when its worst path is cheaper
    classify,        # q-hierarchical / free-connex / acyclic-not-free-connex -> the Plan
)


def plan(gcq: GCQ, allow_core: bool = True, implied_from: list[Predicate] | None = None,
         rules: tuple[PlannerPass, ...] = RULES) -> Plan:
    """Plan ``gcq``; raises :class:`~ivm_layer.errors.CyclicQueryError` for cyclic queries.

    With ``allow_core``, a query that is cyclic only through inequality predicates gets a
    materialized core (see :mod:`.cores`). ``implied_from`` (default: the query's own
    predicates) is the predicate set whose transitive consequences may tighten edges.
    """
    return run(Draft(gcq, allow_core, implied_from, rules=rules), rules)


__all__ = [
    "RULES", "Draft", "Plan", "PlannerPass", "finish_tree", "plan", "plan_from_order", "plan_from_tree",
    "split_predicates",
]
