"""The planner's passes: each takes the :class:`Draft` of a plan and returns it refined.

``planner.RULES`` lists them in the order they run (sqlglot's optimizer ``RULES`` is the
model). A pass may set ``draft.plan``; the planner then stops (a materialized core, the
simple tree of a q-hierarchical query, or :func:`classify` at the end). Each pass costs at
most polynomial time in the query's size (atoms, variables, predicates), never in the data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from ..errors import CyclicQueryError
from ..query import GCQ, Predicate
from .classify import FREE_CONNEX, NOT_FREE_CONNEX, Q_HIERARCHICAL, is_q_hierarchical
from .gjt import Node, render
from .guards import is_simple
from .gyo import build_gjt_pair
from .layout import better, rank
from .plan import Plan
from .redundancy import drop_implied_inequalities, implied_closure
from .split import split_predicates
from .transform import binarize_with_filters, check_invariants, make_sibling_closed, tighten_edges
from .trees import plan_from_order


@dataclass
class Draft:
    """A plan being built: the query, what the passes so far decided, and the plan once one is."""

    gcq: GCQ
    #: a query cyclic only through inequalities may get a materialized core (cores.py)
    allow_core: bool = True
    #: the predicates whose transitive consequences may tighten edges (default: the query's own)
    implied_from: list[Predicate] | None = None
    #: the rules this draft runs under: a materialized core is planned with them (a draft
    #: without rules gets no core: the cyclic query's error is raised)
    rules: tuple = ()
    #: Algorithm 3 takes conditional subsets sharing a key first (another valid tree)
    keyed_first: bool = False
    atom_filters: list[list[Predicate]] = field(default_factory=list)
    joins: list[Predicate] = field(default_factory=list)
    dropped: list[Predicate] = field(default_factory=list)
    #: var(X): the variables of the roots after Algorithm 3's first stage (= out iff free-connex)
    frontier: frozenset[str] | None = None
    root: Node | None = None
    in_n: set[int] = field(default_factory=set)
    plan: Plan | None = None

    def tree(self) -> str:
        """The tree built so far, drawn as EXPLAIN draws it."""
        atoms = self.gcq.atoms
        return render(self.root, self.in_n,
                      lambda i: f"{atoms[i].alias}({', '.join(v or '_' for v in atoms[i].vars)})")


class PlannerPass(Protocol):
    """A planner pass: takes the draft as its only argument and returns it refined (it may
    change it in place). A pass that decides the plan sets ``draft.plan``."""

    def __call__(self, draft: Draft, /) -> Draft: ...


def run(draft: Draft, rules: tuple[PlannerPass, ...]) -> Plan:
    """Run ``rules`` over ``draft`` until one sets the plan."""
    for rule in rules:
        if draft.plan is not None:
            break
        draft = rule(draft)
    if draft.plan is None:
        raise AssertionError("the planner's rules ended without a plan (the last rule must classify)")
    return draft.plan


def split_filters(draft: Draft) -> Draft:
    """Predicates over one atom's variables become its filters; the rest join atoms.

    Examples:
        >>> from ivm_layer.gcqtext import parse_gcq
        >>> d = split_filters(Draft(parse_gcq("r(x, y), s(y, z) | y > 5 ∧ x < z")))
        >>> [[str(p) for p in f] for f in d.atom_filters], [str(p) for p in d.joins]
        ([['y > 5'], ['y > 5']], ['x < z'])
    """
    draft.atom_filters, draft.joins = split_predicates(draft.gcq)
    return draft


def drop_implied(draft: Draft) -> Draft:
    """Drop join inequalities implied by the others through transitivity (001 §3): a query
    cyclic as written may be *semantically* acyclic.

    Examples:
        >>> from ivm_layer.gcqtext import parse_gcq
        >>> d = drop_implied(split_filters(Draft(parse_gcq("r(x), s(z), t(u) | x < z ∧ z < u ∧ x < u"))))
        >>> [str(p) for p in d.joins], [str(p) for p in d.dropped]
        (['x < z', 'z < u'], ['x < u'])
    """
    draft.joins, draft.dropped = drop_implied_inequalities(draft.joins)
    return draft


def eliminate(draft: Draft) -> Draft:
    """Algorithm 3 (000 §6.2, generalized GYO with ISO/CSE/FLT in two stages) builds the GJT
    pair (T, N). A cyclic query raises :class:`~ivm_layer.errors.CyclicQueryError` naming its
    atoms, unless only inequalities close the cycle and ``allow_core``: then the smallest set
    of atoms whose join leaves an acyclic query is maintained as a core, and the plan is set.

    Examples:
        >>> from ivm_layer.gcqtext import parse_gcq
        >>> d = eliminate(drop_implied(split_filters(Draft(parse_gcq(
        ...     "π[x, u](r(x, y) ⋈ s(y, z, w) ⋈ t(u, v) | x < z ∧ w < u)")))))
        >>> print(d.tree())
        {} [N]
        └── {} [N]
            └── {y, z} [N]
                ├── r(x, y) [N]  on x < z
                └── {y, z} [N]
                    └── {w, y, z} [N]
                        ├── {u} [N]  on w < u
                        │   └── t(u, v)
                        └── s(y, z, w) [N]
        >>> sorted(d.frontier)  # var(X) ≠ {x, u}: Example 3's projection is not free-connex
        ['u', 'w', 'x', 'y', 'z']
        >>> eliminate(Draft(parse_gcq("r(x, y), s(y, z), t(x, z)")))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ivm_layer.errors.CyclicQueryError: query is cyclic: no generalized join tree exists for the atoms r, s, t. ...
    """
    gcq = draft.gcq
    hyperedges = [a.varset for a in gcq.atoms]
    try:
        res = build_gjt_pair(hyperedges, gcq.out, draft.joins, [a.alias for a in gcq.atoms],
                             keyed_first=draft.keyed_first)
    except CyclicQueryError as err:
        if not draft.allow_core or not draft.rules:
            raise
        from .cores import find_core

        def plan_part(part: GCQ, allow_core: bool = True, implied_from=None) -> Plan:
            return run(Draft(part, allow_core, implied_from, rules=draft.rules), draft.rules)

        split, outer, core = find_core(gcq, err, plan_part)
        outer.core = core
        outer.core_relation = split.relation
        outer.gcq.columns = list(gcq.columns)
        draft.plan = outer
        return draft
    draft.root, draft.in_n, draft.frontier = res.root, res.in_n, res.frontier_vars
    return draft


def close_siblings(draft: Draft) -> Draft:
    """Make N sibling-closed (000 §3, violators of type 1 and 2, Lemmas 2–3): a node of N
    has all its children in N or none. Algorithm 3's own trees rarely need it; a hand-built
    one, here a type-2 violator (the root's guard child is outside N, its other children in),
    does:

    Examples:
        >>> from ivm_layer.gcqtext import parse_gcq
        >>> from ivm_layer.planner.gjt import Node
        >>> g, a, b = Node(frozenset("xyw"), atom=0), Node(frozenset("xz"), atom=1), Node(frozenset("yq"), atom=2)
        >>> root = Node(frozenset("xy"), children=[g, a, b])
        >>> d = Draft(parse_gcq("r(x, y, w), s(x, z), t(y, q)"), root=root, in_n={root.id, a.id, b.id})
        >>> print(close_siblings(d).tree())
        {x, y} [N]
        ├── s(x, z) [N]
        ├── t(y, q) [N]
        └── {x, y} [N]
            └── r(x, y, w)
    """
    draft.in_n = make_sibling_closed(draft.root, draft.in_n)
    return draft


def make_binary(draft: Draft) -> Draft:
    """Make every node binary (000 Fig. 5), put each atom's filters on its leaf, move
    one-sided edge predicates into filters and fuse nodes that only copy their child.

    Examples:
        >>> from ivm_layer.gcqtext import parse_gcq
        >>> d = make_binary(close_siblings(eliminate(split_filters(Draft(parse_gcq(
        ...     "r(a, b), s(a, c), t(a, d), u(a, e) | b < c ∧ e > 0"))))))
        >>> print(d.tree())
        {} [N]
        └── {a, c} [N]
            ├── {a, b} [N]  on b < c
            │   ├── {a} [N]
            │   │   ├── {a} [N]
            │   │   │   └── t(a, d) [N]
            │   │   └── {a} [N]
            │   │       └── u(a, e) [N]  where e > 0
            │   └── r(a, b) [N]
            └── s(a, c) [N]
    """
    draft.root, draft.in_n = binarize_with_filters(draft.root, draft.in_n, draft.atom_filters)
    return draft


def tighten(draft: Draft) -> Draft:
    """Give edges that compare two variables the other bounds the query implies between
    them (``S1.ts < S2.ts < L.ts < S1.ts + 3600`` bounds ``S2.ts`` by ``S1.ts + 3600``), so
    range scans stay inside the window; then check the tree's invariants (binary,
    sibling-closed, connex, connected).

    Examples:
        >>> from ivm_layer.gcqtext import parse_gcq
        >>> d = tighten(make_binary(close_siblings(eliminate(split_filters(Draft(parse_gcq(
        ...     "r(x, z), s(y) | x < y ∧ y < z ∧ z < x + 10")))))))
        >>> print(d.tree())
        {} [N]
        └── {x, z} [N]
            ├── s(y) [N]  on x < y ∧ y < z ∧ y < x + 10 ∧ y > z - 10
            └── r(x, z) [N]  where z < x + 10
    """
    closure = implied_closure(draft.implied_from if draft.implied_from is not None else draft.gcq.predicates)
    tighten_edges(draft.root, closure)
    check_invariants(draft.root, draft.in_n)
    return draft


#: the passes that turn the predicates into a finished tree; :func:`keys_first` reruns them
TREE: tuple[PlannerPass, ...] = (eliminate, close_siblings, make_binary, tighten)


def keys_first(draft: Draft) -> Draft:
    """For joins with inequalities, build the tree of a second elimination order (conditional
    subsets sharing a key first) and keep it when its worst update path is cheaper
    (``layout.py``: 000's Q5, Q6, Q8 then fan out only inside a key group); Algorithm 3's own
    tree wins ties.

    Examples:
        >>> from ivm_layer.gcqtext import parse_gcq
        >>> q5 = parse_gcq("r(k, a), s(k, d), t(g) | a < d ∧ d < g")
        >>> d = tighten(make_binary(close_siblings(eliminate(split_filters(Draft(q5))))))
        >>> print(d.tree())  # t's updates fan out to every s tuple below it: Θ(n)
        {} [N]
        └── {d, k} [N]
            ├── r(k, a) [N]  on a < d
            └── {d, k} [N]
                ├── t(g) [N]  on d < g
                └── s(k, d) [N]
        >>> print(keys_first(d).tree())  # t on the top join, derived in O(log n); r fans out in its key group
        {} [N]
        └── {g} [N]
            ├── {d} [N]  on d < g
            │   └── {d, k} [N]
            │       ├── r(k, a) [N]  on a < d
            │       └── s(k, d) [N]
            └── t(g) [N]
    """
    if not any(p.op != "=" for p in draft.joins):
        return draft
    alt = Draft(draft.gcq, allow_core=False, implied_from=draft.implied_from, rules=draft.rules,
                keyed_first=True, atom_filters=draft.atom_filters, joins=draft.joins, dropped=draft.dropped)
    for rule in TREE:
        alt = rule(alt)
    if alt.frontier == draft.frontier and better(rank(alt.root), rank(draft.root)):
        draft.root, draft.in_n = alt.root, alt.in_n
    return draft


def classify(draft: Draft) -> Draft:
    """The query's class — q-hierarchical, free-connex or acyclic-not-free-connex — and the
    :class:`Plan`. A q-hierarchical query whose tree Algorithm 3 did not make *simple* gets
    the simple tree of its canonical variable order (O(1) per update, 002 §3).

    Examples:
        >>> from ivm_layer.gcqtext import parse_gcq
        >>> def klass(text):
        ...     d = Draft(parse_gcq(text))
        ...     for rule in (split_filters, drop_implied, *TREE, keys_first, classify):
        ...         d = rule(d)
        ...     return d.plan.klass
        >>> klass("r(a, b), s(a, c)"), klass("r(a, b), s(b, c), t(c, d)"), klass("π[a, c](r(a, b), s(b, c))")
        ('q-hierarchical', 'free-connex', 'acyclic-not-free-connex')
    """
    gcq = draft.gcq
    hyperedges = [a.varset for a in gcq.atoms]
    if draft.frontier != gcq.out:
        klass = NOT_FREE_CONNEX
    elif not draft.joins and is_q_hierarchical(hyperedges, gcq.out):
        klass = Q_HIERARCHICAL
        if not is_simple(draft.root):  # Algorithm 3 missed the simple tree: build it from the canonical VO
            simple = plan_from_order(gcq, lambda v: 0 if v in gcq.out else 1)
            if simple is not None:
                simple.dropped = draft.dropped
                draft.plan = simple
                return draft
    else:
        klass = FREE_CONNEX
    var_n = frozenset().union(*(n.vars for n in draft.root.walk() if n.id in draft.in_n))
    draft.plan = Plan(gcq=gcq, root=draft.root, in_n=draft.in_n, klass=klass, join_predicates=draft.joins,
                      dropped=draft.dropped, atom_filters=draft.atom_filters, var_n=var_n)
    return draft
