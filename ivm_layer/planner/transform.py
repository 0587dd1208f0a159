"""Pure transformations of GJT pairs (T, N) (paper 000 §3, Prop. 1–3), plus the clean-up the engine wants.

* :func:`make_sibling_closed` removes violators of type 1 and 2 (Lemmas 2–3).
* :func:`binarize` splits k-ary nodes into chains of binary nodes (Fig. 5, Lemma 4).
* :func:`simplify` moves predicates that touch one side only into node filters and collapses
  single-child nodes that do not project (they would only copy their child's GMR).

Every function mutates the tree in place and returns the (possibly new) root and N.
"""

from __future__ import annotations

from ..query import Predicate
from .gjt import Node


def _descendant_guard_leaf(node: Node) -> Node:
    n = node
    while not n.is_leaf:
        guards = n.guard_children()
        n = guards[0]
    return n


def make_sibling_closed(root: Node, in_n: set[int]) -> set[int]:
    """Apply the type-1 / type-2 violator removals until N is sibling-closed."""
    in_n = set(in_n)
    changed = True
    while changed:
        changed = False
        for n in root.walk():
            if n.id not in in_n:
                continue
            inside = [c for c in n.children if c.id in in_n]
            outside = [c for c in n.children if c.id not in in_n]
            if not inside or not outside:
                continue
            guards_inside = [c for c in inside if n.vars <= c.vars]
            if guards_inside:  # type 1
                g = guards_inside[0]
                leaf = _descendant_guard_leaf(g)
                parent = leaf.parent
                p = Node(leaf.vars)
                p.preds = leaf.preds
                parent.replace_child(leaf, p)
                p.add_child(leaf, [])
                for c in outside:
                    preds = c.preds
                    n.remove_child(c)
                    p.add_child(c, preds)
                if leaf.id in in_n:
                    in_n.discard(leaf.id)
                    in_n.add(p.id)
            else:  # type 2
                p = Node(n.vars)
                for c in outside:
                    preds = c.preds
                    n.remove_child(c)
                    p.add_child(c, preds)
                n.add_child(p, [])
                in_n.add(p.id)
            changed = True
            break
    return in_n


def binarize(root: Node, in_n: set[int]) -> set[int]:
    """Replace every node with k > 2 children by a chain of k-1 binary nodes (Fig. 5)."""
    in_n = set(in_n)
    for n in list(root.walk()):
        if len(n.children) <= 2:
            continue
        kids = list(n.children)
        guard = next(c for c in kids if n.vars <= c.vars)
        kids.remove(guard)
        kids.insert(0, guard)
        frontier = not any(c.id in in_n for c in kids)
        for c in kids:
            n.children.remove(c)
            c.parent = None
        acc = kids[0]
        for c in kids[1:-1]:
            m = Node(n.vars)
            m.add_child(acc, acc.preds)
            m.add_child(c, c.preds)
            acc = m
            acc.preds = []
            if not frontier:
                in_n.add(m.id)
        n.add_child(acc, acc.preds)
        n.add_child(kids[-1], kids[-1].preds)
    return in_n


def simplify(root: Node, in_n: set[int]) -> tuple[Node, set[int]]:
    """Push one-sided edge predicates into node filters; collapse non-projecting single-child nodes."""
    in_n = set(in_n)
    # 1. Predicates over one side only are filters of that side (valid: ρ_c is only used by
    #    its parent, and a predicate over var(p) can be applied after the projection).
    for n in list(root.walk()):
        keep: list[Predicate] = []
        for p in n.preds:
            if p.vars <= n.vars:
                n.filters.append(p)
            elif n.parent is not None and p.vars <= n.parent.vars:
                n.parent.filters.append(p)
            else:
                keep.append(p)
        n.preds = keep
    # 2. Collapse n -> c when n has a single child c with var(n) = var(c): ρ_n = σ(ρ_c).
    changed = True
    while changed:
        changed = False
        for n in list(root.walk()):
            if len(n.children) != 1 or n.children[0].vars != n.vars:
                continue
            c = n.children[0]
            c.filters.extend(f for f in n.filters if f not in c.filters)
            c.filters.extend(p for p in c.preds if p not in c.filters)  # edge preds ⊆ var(c)
            c.preds = list(n.preds)
            if n.id in in_n:
                in_n.discard(n.id)
                in_n.add(c.id)
            else:
                in_n.discard(c.id)
            if n.parent is None:
                n.children.clear()
                c.parent = None
                root = c
            else:
                n.parent.replace_child(n, c)
            changed = True
            break
    return root, in_n


def binarize_with_filters(root: Node, in_n: set[int],
                          atom_filters: list[list[Predicate]]) -> tuple[Node, set[int]]:
    """The tree made binary, each leaf with its atom's filters, then simplified."""
    in_n = binarize(root, in_n)
    for n in root.walk():
        if n.is_leaf:
            n.filters.extend(atom_filters[n.atom])
    return simplify(root, in_n)


def check_invariants(root: Node, in_n: set[int]) -> None:
    """Assert the GJT pair properties the engine relies on (programming errors only)."""
    assert root.id in in_n, "root must be in N"
    occurrences: dict[str, list[Node]] = {}
    for n in root.walk():
        assert len(n.children) <= 2, f"{n} is not binary"
        if n.children:
            assert n.guard_children(), f"{n} has no guard child"
            in_kids = [c.id in in_n for c in n.children]
            if n.id in in_n:
                assert all(in_kids) or not any(in_kids), f"N is not sibling-closed at {n}"
            else:
                assert not any(in_kids), f"N is not connex at {n}"
        for p in n.preds:
            assert n.parent is not None and p.vars <= n.vars | n.parent.vars
        for v in n.vars:
            occurrences.setdefault(v, []).append(n)
    # connectedness: nodes containing v form a connected subtree
    for v, nodes in occurrences.items():
        tops = [n for n in nodes if n.parent is None or v not in n.parent.vars]
        assert len(tops) == 1, f"variable {v} violates the connectedness condition"


def tighten_edges(root: Node, closure) -> None:
    """Add transitively implied bounds to edges that already compare the same two variables.

    E.g. with ``S1.ts < S2.ts < L.ts < S1.ts + 3600`` the edge comparing ``S2.ts`` with
    ``S1.ts`` also gets ``S2.ts < S1.ts + 3600``, so a range scan ordered on either side stays
    inside the window instead of walking the whole group. The added predicates are implied by
    the query, so results are unchanged; the tree's shape is not touched.
    """
    from .redundancy import implied_predicates

    if not closure:
        return
    for n in root.walk():
        if not n.preds or n.parent is None:
            continue
        pairs = []
        for p in n.preds:
            x, y = (p.left, p.right) if p.left in n.vars else (p.right, p.left)
            if (x, y) not in pairs:
                pairs.append((x, y))
        have = set(n.preds)
        for x, y in pairs:
            for q in implied_predicates(closure, x, y):
                if q not in have and q.flipped() not in have:
                    n.preds.append(q)
                    have.add(q)
