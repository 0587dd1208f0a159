"""Generalized join trees (000 Def. 1) and their text rendering.

A node is a leaf (labelled by an atom) or an interior node labelled by a variable set.
Edge predicates ``pred(parent → node)`` are stored on the child node (``node.preds``).
``filters`` are predicates over the node's own variables that the planner's clean-up
pass moved off the edges (000 §6.2 FLT): ``ρ_n`` is filtered by them.
"""

from __future__ import annotations

from itertools import count
from typing import Iterator

from ..query import Predicate

_ids = count()


class Node:
    __slots__ = ("id", "vars", "atom", "children", "preds", "parent", "filters", "pinned", "order_by")

    def __init__(self, vars_: frozenset[str], atom: int | None = None, children: list["Node"] | None = None):
        self.id = next(_ids)
        self.vars = frozenset(vars_)
        self.atom = atom  # index into GCQ.atoms for leaves
        self.children: list[Node] = []
        self.preds: list[Predicate] = []
        self.filters: list[Predicate] = []
        self.parent: Node | None = None
        self.pinned = False  # keep this node's own tuples (never fused with its child): lookups probe it
        # a variable of this node its enumeration index P_n is ordered on although no inequality
        # asks for it: a range parameter's column (planner/params.py), read by bisection
        self.order_by: str | None = None
        for c in children or ():
            self.add_child(c)

    @property
    def is_leaf(self) -> bool:
        return self.atom is not None

    def add_child(self, child: "Node", preds: list[Predicate] | None = None) -> None:
        child.parent = self
        if preds is not None:
            child.preds = list(preds)
        self.children.append(child)

    def remove_child(self, child: "Node") -> None:
        self.children.remove(child)
        child.parent = None

    def replace_child(self, old: "Node", new: "Node") -> None:
        i = self.children.index(old)
        self.children[i] = new
        new.parent = self
        old.parent = None

    def walk(self) -> Iterator["Node"]:
        """Pre-order traversal."""
        stack = [self]
        while stack:
            n = stack.pop()
            yield n
            stack.extend(reversed(n.children))

    def guard_children(self) -> list["Node"]:
        return [c for c in self.children if self.vars <= c.vars]

    def __repr__(self) -> str:
        kind = f"atom#{self.atom}" if self.is_leaf else "node"
        return f"<{kind} {sorted(self.vars)}>"


def fmt_vars(vars_: frozenset[str]) -> str:
    return "{" + ", ".join(sorted(vars_)) + "}"


def render(root: Node, in_n: set[int], atom_label) -> str:
    """Indented drawing of the tree: node variables, edge predicates, filters, N membership."""
    lines: list[str] = []

    def rec(n: Node, prefix: str, last: bool, top: bool) -> None:
        label = atom_label(n.atom) if n.is_leaf else fmt_vars(n.vars)
        tags = ["N"] if n.id in in_n else []
        extra = ""
        if n.preds:
            extra += "  on " + " ∧ ".join(str(p) for p in n.preds)
        if n.filters:
            extra += "  where " + " ∧ ".join(str(p) for p in n.filters)
        tag = f" [{', '.join(tags)}]" if tags else ""
        branch = "" if top else ("└── " if last else "├── ")
        lines.append(f"{prefix}{branch}{label}{tag}{extra}")
        child_prefix = prefix if top else prefix + ("    " if last else "│   ")
        for i, c in enumerate(n.children):
            rec(c, child_prefix, i == len(n.children) - 1, False)

    rec(root, "", True, True)
    return "\n".join(lines)
