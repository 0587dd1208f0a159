"""Plans for GJT pairs built another way than Algorithm 3: by hand (tests, the papers'
examples), from a canonical variable order (q-hierarchical and CQAP0 views, ``vorder.py``),
or by the static-table planner (``static.py``). Each is binarized, given its atoms' filters
and checked like Algorithm 3's trees; cost O(nodes × predicates).
"""

from __future__ import annotations

from ..query import GCQ
from .classify import FREE_CONNEX, NOT_FREE_CONNEX, Q_HIERARCHICAL
from .gjt import Node
from .plan import Plan
from .split import split_predicates
from .transform import binarize_with_filters, check_invariants


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
    root, in_n = binarize_with_filters(root, in_n, atom_filters)
    check_invariants(root, in_n)
    var_n = frozenset().union(*(n.vars for n in root.walk() if n.id in in_n))
    if var_n != gcq.out:
        return None
    return Plan(gcq=gcq, root=root, in_n=in_n, klass=klass, join_predicates=joins, dropped=[],
                atom_filters=atom_filters, var_n=var_n)
