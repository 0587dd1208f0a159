"""Planner: GCQ -> binary, sibling-closed GJT pair (T, N) plus its classification.

Pipeline (each step a pure pass with its own tests): split predicates into atom filters
and join predicates → drop transitively implied inequalities (001 §3) → Algorithm 3
(000 §6.2) → sibling-closed transform → binarize (000 §3) → simplify for the engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import CyclicQueryError
from ..query import GCQ, Predicate
from .classify import FREE_CONNEX, NOT_FREE_CONNEX, Q_HIERARCHICAL, is_q_hierarchical
from .gjt import Node, render
from .guards import GuardReport, analyze, is_simple
from .gyo import build_gjt_pair
from .layout import better, rank
from .redundancy import drop_implied_inequalities, implied_closure
from .transform import (
    binarize,
    check_invariants,
    make_sibling_closed,
    simplify,
    tighten_edges,
)


@dataclass
class Plan:
    gcq: GCQ
    root: Node
    in_n: set[int]
    klass: str
    join_predicates: list[Predicate]
    dropped: list[Predicate]
    atom_filters: list[list[Predicate]]
    var_n: frozenset[str]
    core: "Plan | None" = None  # a materialized cyclic core feeding one derived atom
    core_relation: str | None = None
    #: extra EXPLAIN lines of the planning step that chose this tree (static tables, params)
    notes: list[str] | None = None
    #: atoms of static tables (003): loaded once, so their paths do not count for update cost
    static_atoms: frozenset[int] = frozenset()

    def guards(self, derived: Mapping[int, str] | None = None) -> GuardReport:
        """Which leaf-to-root paths are guard paths, and the bounds that follow (guards.py);
        ``derived``: steps the engine derives in O(log n) (node id → reason)."""
        return analyze(self.root, self.in_n, derived)

    def costs(self, derived: Mapping[int, str] | None = None) -> tuple[str, str]:
        """(update cost, enumeration delay), derived from the tree (and the engine's derived
        steps), never from the class name."""
        rep = self.guards(derived)
        leaves = {a: lp for a, lp in rep.leaves.items() if a not in self.static_atoms}
        worst = rep.update_cost(list(leaves))
        what = "dynamic " if self.static_atoms else ""
        if all(lp.guard_path for lp in leaves.values()) and worst == "O(1)":
            update = f"O(1) per single-tuple update of a {what}table (every {what}leaf-to-root path is a guard path)"
        else:
            slow = [(self.atom_label(a), lp) for a, lp in sorted(leaves.items()) if lp.cost != "O(1)"]
            update = (f"{worst} per single-tuple update worst case; "
                      + "; ".join(f"{name}: {lp.cost}, {lp.reason}" for name, lp in slow))
            fast = [self.atom_label(a) for a, lp in sorted(leaves.items()) if lp.cost == "O(1)"]
            if fast:
                update += "; O(1) for " + ", ".join(fast)
        if self.klass == NOT_FREE_CONNEX:
            update += ", plus delta enumeration into the materialized result (the size of the output change)"
            delay = "O(1) delay from the materialized result (memory proportional to the output)"
        elif self.gcq.distinct:
            delay = "O(1) delay from the materialized distinct rows"
        elif rep.delay == "O(1)":
            delay = "O(1) delay"
        else:
            delay = f"{rep.delay} delay: {rep.delay_reason}"
        if self.core is not None:
            update += "; plus the core's own update cost (below) times its output change"
        return update, delay

    @property
    def free_connex(self) -> bool:
        return self.klass != NOT_FREE_CONNEX

    def atom_label(self, i: int) -> str:
        a = self.gcq.atoms[i]
        args = ", ".join(v or "_" for v in a.vars)
        name = a.relation if a.alias == a.relation else f"{a.relation} AS {a.alias}"
        return f"{name}({args})"

    def tree(self) -> str:
        return render(self.root, self.in_n, self.atom_label)

    def explain(self, derived: Mapping[int, str] | None = None) -> str:
        update, delay = self.costs(derived)
        lines = [f"class: {self.klass}" + (" (with a materialized cyclic core)" if self.core is not None else "")]
        lines.extend(self.notes or ())
        if self.klass == NOT_FREE_CONNEX:
            extra = sorted(self.var_n - self.gcq.out)
            lines.append(
                "materialized: the projected result (a GMR over the output columns), maintained by "
                f"delta enumeration of the free-connex approximation over {{{', '.join(sorted(self.var_n))}}}"
                f" (extra variables {', '.join(extra)}); memory grows with the output"
            )
        elif self.gcq.distinct:
            lines.append("materialized: the count of each distinct row (DISTINCT needs to see counts cross zero); "
                         "memory grows with the output")
        elif self.core is None:
            lines.append("materialized: nothing beyond the T-representation (memory linear in the input)")
        if self.core is not None:
            members = ", ".join(a.alias for a in self.core.gcq.atoms)
            lines.append(
                f"materialized core: the inequality predicates close a cycle, so atoms {members} are joined "
                f"into the derived relation {self.core_relation}({', '.join(self.core.gcq.output)}), "
                "maintained incrementally by its own plan below; memory grows with the core's size "
                "(bounded by the implied predicates it carries)")
        if self.dropped:
            lines.append("dropped as implied by transitivity: " + "; ".join(str(p) for p in self.dropped))
        lines.append(f"update cost: {update}")
        lines.append(f"enumeration: {delay}")
        lines.append("GJT (N = connex subset used for enumeration):")
        lines.append(self.tree())
        if self.core is not None:
            lines.append(f"core {self.core_relation}:")
            lines.extend("    " + line for line in self.core.explain().splitlines())
        return "\n".join(lines)


def plan_from_tree(gcq: GCQ, root: Node, in_n: set[int], klass: str = FREE_CONNEX) -> Plan:
    """A plan for a GJT pair given by hand (tests, paper examples). A root with variables
    gets an empty-label root above it, as Algorithm 3 line 12 builds."""
    if root.vars:
        top = Node(frozenset(), children=[root])
        in_n = set(in_n) | {top.id}
        root = top
    check_invariants(root, in_n)
    var_n = frozenset().union(*(n.vars for n in root.walk() if n.id in in_n))
    if var_n != gcq.out:
        klass = NOT_FREE_CONNEX
    atom_filters, joins = split_predicates(gcq)
    return Plan(gcq=gcq, root=root, in_n=set(in_n), klass=klass, join_predicates=joins, dropped=[],
                atom_filters=atom_filters, var_n=var_n)


def split_predicates(gcq: GCQ) -> tuple[list[list[Predicate]], list[Predicate]]:
    """Predicates covered by one atom become that atom's filters (FLT at the leaves).

    A predicate over variables that several atoms contain is applied at each of them:
    the atoms agree on those values in every join result, so the result is unchanged.
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


def plan(gcq: GCQ, allow_core: bool = True, implied_from: list[Predicate] | None = None) -> Plan:
    """Plan ``gcq``; raises :class:`~ivm_layer.errors.CyclicQueryError` for cyclic queries.

    With ``allow_core``, a query that is cyclic only through inequality predicates gets a
    materialized core (see :mod:`.cores`). ``implied_from`` (default: the query's own
    predicates) is the predicate set whose transitive consequences may tighten edges.
    """
    atom_filters, joins = split_predicates(gcq)
    joins, dropped = drop_implied_inequalities(joins)
    hyperedges = [a.varset for a in gcq.atoms]
    names = [a.alias for a in gcq.atoms]
    try:
        res = build_gjt_pair(hyperedges, gcq.out, joins, names)
    except CyclicQueryError as err:
        if not allow_core:
            raise
        from .cores import find_core

        split, outer, core = find_core(gcq, err, plan)
        outer.core = core
        outer.core_relation = split.relation
        outer.gcq.columns = list(gcq.columns)
        return outer
    closure = implied_closure(implied_from if implied_from is not None else gcq.predicates)
    root, in_n = _finish_gyo(res, atom_filters, closure)
    if any(p.op != "=" for p in joins):
        # Another elimination order (keys first) may give a tree whose worst update path is
        # cheaper (planner/layout.py); Algorithm 3's own tree wins ties.
        alt = build_gjt_pair(hyperedges, gcq.out, joins, names, keyed_first=True)
        if alt.frontier_vars == res.frontier_vars:
            alt_root, alt_in_n = _finish_gyo(alt, atom_filters, closure)
            if better(rank(alt_root), rank(root)):
                root, in_n = alt_root, alt_in_n
    var_n = frozenset().union(*(n.vars for n in root.walk() if n.id in in_n))
    if res.frontier_vars != gcq.out:
        klass = NOT_FREE_CONNEX
    elif not joins and is_q_hierarchical(hyperedges, gcq.out):
        klass = Q_HIERARCHICAL
        if not is_simple(root):  # Algorithm 3 missed the simple tree: build it from the canonical VO
            simple = plan_from_order(gcq, lambda v: 0 if v in gcq.out else 1)
            if simple is not None:
                simple.dropped = dropped
                return simple
    else:
        klass = FREE_CONNEX
    return Plan(gcq=gcq, root=root, in_n=in_n, klass=klass, join_predicates=joins, dropped=dropped,
                atom_filters=atom_filters, var_n=var_n)


def _binary_with_filters(root: Node, in_n: set[int], atom_filters: list[list[Predicate]]) -> tuple[Node, set[int]]:
    """The tree made binary, each leaf with its atom's filters, then simplified."""
    in_n = binarize(root, in_n)
    for n in root.walk():
        if n.is_leaf:
            n.filters.extend(atom_filters[n.atom])
    return simplify(root, in_n)


def _finish_gyo(res, atom_filters: list[list[Predicate]], closure) -> tuple[Node, set[int]]:
    """Algorithm 3's tree made sibling-closed and binary, with the atoms' filters, simplified
    and its edges tightened (checked)."""
    root, in_n = res.root, res.in_n
    in_n = make_sibling_closed(root, in_n)
    root, in_n = _binary_with_filters(root, in_n, atom_filters)
    tighten_edges(root, closure)
    check_invariants(root, in_n)
    return root, in_n


def plan_from_order(gcq: GCQ, rank, atom_vars: dict[int, frozenset[str]] | None = None,
                    klass: str = Q_HIERARCHICAL) -> Plan | None:
    """The simple GJT of the canonical variable order of ``gcq`` under ``rank`` (vorder.py),
    or None when the atoms are not hierarchical in that order. Only for queries whose
    predicates are all atom filters."""
    from .vorder import canonical_order, gjt_from_order

    _, joins = split_predicates(gcq)
    if joins:
        return None
    if atom_vars is None:
        atom_vars = {i: a.varset for i, a in enumerate(gcq.atoms)}
    order = canonical_order(atom_vars, rank)
    if order is None:
        return None
    root, in_n = gjt_from_order(order[0], order[1], atom_vars, gcq.out)
    return finish_tree(gcq, root, in_n, klass)


def finish_tree(gcq: GCQ, root: Node, in_n: set[int], klass: str) -> Plan | None:
    """Binarize a hand-built GJT pair, attach the atoms' filters and check it; None when the
    tree's N does not cover exactly the output variables (the planner then keeps Algorithm 3)."""
    atom_filters, joins = split_predicates(gcq)
    root, in_n = _binary_with_filters(root, in_n, atom_filters)
    check_invariants(root, in_n)
    var_n = frozenset().union(*(n.vars for n in root.walk() if n.id in in_n))
    if var_n != gcq.out:
        return None
    return Plan(gcq=gcq, root=root, in_n=in_n, klass=klass, join_predicates=joins, dropped=[],
                atom_filters=atom_filters, var_n=var_n)
