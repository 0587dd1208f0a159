"""The planner's result: a GJT pair (T, N) with its class, and EXPLAIN derived from the tree.

A :class:`Plan` is what the engine builds a (T, N)-representation from. Its cost lines come
from the tree (``guards.py``), never from the class name; rendering is O(nodes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..query import GCQ, Predicate
from .classify import NOT_FREE_CONNEX
from .gjt import Node, render
from .guards import GuardReport, analyze


#: placeholder in a note (static / parameter class line) for the update bound derived from the
#: tree and the engine's derived steps, so the class line and "update cost:" always agree
UPDATE_BOUND = "{update bound}"


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
        worst = update.split(" per ", 1)[0]  # the class lines of the notes quote the derived bound
        lines.extend(note.replace(UPDATE_BOUND, worst) for note in self.notes or ())
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
