"""Static tables (paper 003): classification and guard-path plans (STATIC_TABLES.md).

A view may declare tables *static*: loaded once, never changed after the first update of a
dynamic table. :func:`classify` decides C_lin / C_poly / C_exp / outside (well-behaved:
body-safe paths between dynamic atoms, head-safe paths to the head; Prop. 20).
:func:`plan_static` builds, for C_lin and C_poly, a GJT whose dynamic leaves all sit on guard
paths: the dynamic atoms' canonical free-top variable order, with each *static part* (the
static atoms connected outside the dynamic variables) attached under the lowest of its
dynamic variables. A part of one atom is a leaf; a part of several atoms is pre-joined into
a derived relation ``P(I ∪ F)`` maintained by its own plan (O(N^w) for C_poly), which also
serves queries that are cyclic only through static tables (003 Fig. 4). Other queries, and
queries with inequality joins (outside 003), are planned as usual; EXPLAIN says why.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import CyclicQueryError
from ..query import GCQ, Atom
from .gjt import fmt_vars
from .gyo import build_gjt_pair
from .plan import UPDATE_BOUND
from .vorder import VONode, canonical_order, gjt_from_order

C_LIN, C_POLY, C_EXP, OUTSIDE = "C_lin", "C_poly", "C_exp", "outside"
PREFIX = "__static_"


def _gaifman(edges: list[frozenset[str]]) -> dict[str, set[str]]:
    g: dict[str, set[str]] = {}
    for e in edges:
        for v in e:
            g.setdefault(v, set()).update(e - {v})
    return g


def _path(g: dict[str, set[str]], src: frozenset[str], dst: frozenset[str], removed: frozenset[str]) -> list[str] | None:
    """A shortest path from a variable of ``src`` to one of ``dst`` avoiding ``removed``."""
    prev: dict[str, str | None] = {v: None for v in sorted(src) if v not in removed}
    frontier = list(prev)
    while frontier:
        nxt = []
        for v in frontier:
            if v in dst:
                out = [v]
                while prev[out[-1]] is not None:
                    out.append(prev[out[-1]])
                return out[::-1]
            for w in sorted(g.get(v, ())):
                if w not in prev and w not in removed:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return None


def well_behaved(edges: list[frozenset[str]], names: list[str], dynamic: list[int],
                 free: frozenset[str]) -> str | None:
    """None when well-behaved, else the witness path in words (003 §4, Prop. 20)."""
    g = _gaifman(edges)
    for i, x in enumerate(dynamic):
        for y in dynamic[i + 1:]:
            c = edges[x] & edges[y]
            if edges[x] - c and edges[y] - c:
                p = _path(g, edges[x] - c, edges[y] - c, c)
                if p is not None:
                    return (f"path ({', '.join(p)}) between dynamic {names[x]} and {names[y]} "
                            "avoids their shared variables")
    for x in dynamic:
        c = edges[x] & free
        if edges[x] - free and free - edges[x]:
            p = _path(g, edges[x] - free, free - edges[x], c)
            if p is not None:
                return f"path ({', '.join(p)}) from dynamic {names[x]} to the output avoids {names[x]}'s output columns"
    return None


def free_connex(edges: list[frozenset[str]], free: frozenset[str]) -> bool:
    try:
        res = build_gjt_pair(list(edges), free, [], [str(i) for i in range(len(edges))])
    except CyclicQueryError:
        return False
    return res.frontier_vars == free


def classify(gcq: GCQ, static_atoms: set[int]) -> tuple[str, str]:
    """(class, reason) for the query with the given static atoms (equality joins only)."""
    edges = [a.varset for a in gcq.atoms]
    names = [a.alias for a in gcq.atoms]
    dynamic = [i for i in range(len(edges)) if i not in static_atoms]
    witness = well_behaved(edges, names, dynamic, gcq.out)
    if witness is None:
        if free_connex(edges, gcq.out):
            return C_LIN, "well-behaved and free-connex acyclic"
        return C_POLY, "well-behaved, not free-connex acyclic: the static parts are pre-joined"
    static_vars = frozenset().union(*(edges[i] for i in static_atoms)) if static_atoms else frozenset()
    if all(edges[i] <= static_vars for i in dynamic):
        return C_EXP, witness
    return OUTSIDE, witness


@dataclass
class StaticPart:
    atoms: list[int]  # indexes into the query's atoms
    inter: frozenset[str]  # I: variables shared with dynamic atoms
    free: frozenset[str]  # F: output variables of the part
    relation: str | None = None  # the derived relation when the part is pre-joined
    gcq: GCQ | None = None  # its query (output I ∪ F)


@dataclass
class StaticPlan:
    klass: str
    reason: str
    gcq: GCQ  # the query the main view maintains (pre-joined parts as derived atoms)
    parts: list[StaticPart] = field(default_factory=list)
    static_atoms: frozenset[int] = frozenset()  # indexes into ``gcq.atoms``
    plan: object = None  # planner.Plan, or None: plan ``gcq`` as usual


def static_parts(gcq: GCQ, static_atoms: set[int]) -> list[StaticPart]:
    """Components of the static atoms after dropping the dynamic variables (003 §5 step 1)."""
    dyn_vars = frozenset().union(*(a.varset for i, a in enumerate(gcq.atoms) if i not in static_atoms))
    comps: list[tuple[set[str], list[int]]] = []
    for i in sorted(static_atoms):
        rest = set(gcq.atoms[i].varset - dyn_vars)
        merged = [c for c in comps if c[0] & rest] if rest else []
        for c in merged:
            comps.remove(c)
            rest |= c[0]
        comps.append((rest, [x for c in merged for x in c[1]] + [i]))
    out = []
    for _, atoms in comps:
        vs = frozenset().union(*(gcq.atoms[i].varset for i in atoms))
        out.append(StaticPart(sorted(atoms), vs & dyn_vars, vs & gcq.out))
    return out


def _rank(free: frozenset[str]):
    return lambda v: 0 if v in free else 1


def plan_static(gcq: GCQ, static_tables: frozenset[str]) -> StaticPlan:
    """Classify and plan ``gcq`` with the given static tables (see the module docstring).

    Examples:
        >>> from ivm_layer.gcqtext import parse_gcq
        >>> path = parse_gcq("r(a, b) ⋈ s(b, c) ⋈ t(c, d)")
        >>> plan_static(path, frozenset()).reason  # every table dynamic: an r or t update fans out
        'path (b, c) between dynamic r and t avoids their shared variables'
        >>> sp = plan_static(path, frozenset({"r"}))  # r loaded once
        >>> sp.klass, sp.reason
        ('C_lin', 'well-behaved and free-connex acyclic')
    """
    from .split import split_predicates
    from .trees import finish_tree

    static_atoms = {i for i, a in enumerate(gcq.atoms) if a.relation in static_tables}
    _, joins = split_predicates(gcq)
    if joins:
        return StaticPlan(OUTSIDE, "inequality joins are outside paper 003 (" + "; ".join(map(str, joins))
                          + ")", gcq, static_atoms=frozenset(static_atoms))
    klass, reason = classify(gcq, static_atoms)
    usual = StaticPlan(klass, reason, gcq, static_atoms=frozenset(static_atoms))
    if klass not in (C_LIN, C_POLY) or not static_atoms:
        return usual
    if len(static_atoms) == len(gcq.atoms):
        usual.reason = "every table is static: the view is loaded once and never updated"
        return usual
    parts = static_parts(gcq, static_atoms)
    atoms: list[Atom] = [a for i, a in enumerate(gcq.atoms) if i not in static_atoms]
    schema = dict(gcq.schema)
    kept_static: list[int] = []
    for k, part in enumerate(parts):
        if len(part.atoms) == 1:
            kept_static.append(len(atoms))
            atoms.append(gcq.atoms[part.atoms[0]])
            continue
        out = sorted(part.inter | part.free)
        if not out:
            return usual  # a pre-join without columns: keep the usual plan
        members = [gcq.atoms[i] for i in part.atoms]
        preds = [p for p in gcq.predicates if any(p.vars <= a.varset for a in members)]
        part.relation = f"{PREFIX}p{k}"
        part.gcq = GCQ(members, preds, out, out, schema=dict(gcq.schema))
        schema[part.relation] = [f"c{j}" for j in range(len(out))]
        kept_static.append(len(atoms))
        label = "P" + str(k) + "(" + ", ".join(a.alias for a in members) + ")"
        atoms.append(Atom(part.relation, label, tuple(out)))
    preds = [p for p in gcq.predicates if any(p.vars <= a.varset for a in atoms)]
    main = GCQ(atoms, preds, list(gcq.output), list(gcq.columns), schema=schema, distinct=gcq.distinct)
    tree = _guard_path_tree(main, set(kept_static))
    if tree is None:
        return usual
    root, in_n = tree
    plan = finish_tree(main, root, in_n, "free-connex")
    if plan is None:
        return usual
    rep = plan.guards()
    if not all(rep.leaves[i].guard_path for i in range(len(atoms)) if i not in kept_static):
        return usual  # the construction's guarantee failed: do not claim O(1)
    return StaticPlan(klass, reason, main, parts=parts, static_atoms=frozenset(kept_static), plan=plan)


def _guard_path_tree(main: GCQ, static_atoms: set[int]):
    """003 §5 steps 3–5: the dynamic skeleton's VO with each static leaf attached, as a GJT."""
    free = main.out
    dyn = {i: a.varset for i, a in enumerate(main.atoms) if i not in static_atoms}
    order = canonical_order(dyn, _rank(free))
    if order is None:
        return None
    roots, top = order
    atom_vars = {i: a.varset for i, a in enumerate(main.atoms)}
    dyn_vars = frozenset().union(*dyn.values()) if dyn else frozenset()
    for i in sorted(static_atoms):
        vs = atom_vars[i]
        inter = vs & dyn_vars
        chain = [tuple(sorted(vs & free - inter)), tuple(sorted(vs - free - inter))]
        chain = [VONode(c) for c in chain if c]
        for up, down in zip(chain, chain[1:]):
            up.children.append(down)
        at = _lowest(roots, inter) if inter else None
        if inter and at is None:
            return None
        if chain:
            chain[-1].atoms.append(i)
            (at.children if at is not None else roots).append(chain[0])
        elif at is not None:
            at.atoms.append(i)
        else:
            top.append(i)
    return gjt_from_order(roots, top, atom_vars, free)


def _lowest(roots: list[VONode], inter: frozenset[str]) -> VONode | None:
    """The deepest VO node on a root path that holds all of ``inter`` (the lowest variable's node)."""
    best: tuple[int, VONode] | None = None

    def rec(g: VONode, above: frozenset[str], depth: int) -> None:
        nonlocal best
        here = above | frozenset(g.vars)
        if inter <= here and inter & frozenset(g.vars):
            if best is None or depth > best[0]:
                best = (depth, g)
        for c in g.children:
            rec(c, here, depth + 1)

    for r in roots:
        rec(r, frozenset(), 0)
    return best[1] if best is not None else None


def describe(sp: StaticPlan, static_tables: frozenset[str], gcq: GCQ) -> list[str]:
    """EXPLAIN lines for the static classification and pre-joins."""
    names = ", ".join(sorted(static_tables))
    if sp.plan is not None and sp.klass == C_LIN:
        lines = [f"static class: C_lin (static: {names}) — O(N) preprocessing, {UPDATE_BOUND} update of a "
                 "dynamic table (as derived under update cost), O(1) delay"]
    elif sp.plan is not None:
        lines = [f"static class: C_poly (static: {names}) — O(N^w) preprocessing for the pre-joins, "
                 f"{UPDATE_BOUND} update of a dynamic table (as derived under update cost), O(1) delay"]
    elif sp.klass in (C_LIN, C_POLY):
        lines = [f"static class: {sp.klass} (static: {names}): {sp.reason}; planned as usual"
                 if sp.reason.startswith("every table") else
                 f"static class: {sp.klass} (static: {names}), but no guard-path tree was built; planned as usual"]
    else:
        lines = [f"static class: not tractable with static {{{names}}} ({sp.klass}): {sp.reason}; "
                 "planned as usual, update cost as below"]
    for part in sp.parts:
        if part.relation is not None:
            members = " ⋈ ".join(gcq.atoms[i].alias for i in part.atoms)
            lines.append(f"static pre-join {part.relation}{fmt_vars(part.inter | part.free)} = π({members}), "
                         "maintained by its own plan (below) while static tables load")
    lines.append("static tables are loaded before the first update of a dynamic table; a later change "
                 "to one is refused (UpdateError)")
    return lines
