"""Parameterized views (paper 004): the fracture, CQAP0, and access-top plans.

The view's variables are split into inputs I (the parameters) and outputs O. The *fracture*
renames each occurrence of an input variable, takes the connected components and merges the
copies inside each component back (``v@c``). The view is in CQAP0 when the fracture is
hierarchical, free-dominant and input-dominant (Def. 1): then a canonical variable order with
inputs on top of each chain, outputs next and bound variables last (*access-top*) gives a
simple GJT in which a lookup is an O(1) probe of the nodes over input variables followed by
constant-delay enumeration, and every update costs O(1). Outside CQAP0 the view is planned as
usual and the engine keeps a materialized answer map; :func:`plan_params` says why.

Note: 004's introduction places edge-triangle detection ``Q(·|A,B) = R(A,B), S(B,C), T(C,A)``
in CQAP0, but by Definition 1 it is not (in its fracture the bound C dominates the inputs B'
and A'); we implement Definition 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..query import GCQ, Atom, Predicate
from .plan import UPDATE_BOUND

SEP = "@"


@dataclass
class Fracture:
    atoms: list[Atom]  # renamed atoms (input occurrences -> v@c)
    inputs: frozenset[str]  # the copies v@c
    origin: dict[str, str]  # copy -> original variable
    components: list[list[int]]  # atom indexes per component


def fracture(gcq: GCQ, inputs: frozenset[str]) -> Fracture:
    n = len(gcq.atoms)
    comp = list(range(n))

    def find(i: int) -> int:
        while comp[i] != i:
            comp[i] = comp[comp[i]]
            i = comp[i]
        return i

    owner: dict[str, int] = {}
    for i, a in enumerate(gcq.atoms):
        for v in a.varset - inputs:
            if v in owner:
                comp[find(i)] = find(owner[v])
            else:
                owner[v] = i
    roots = sorted({find(i) for i in range(n)})
    index = {r: k for k, r in enumerate(roots)}
    components = [[i for i in range(n) if find(i) == r] for r in roots]
    atoms, copies, origin = [], set(), {}
    for i, a in enumerate(gcq.atoms):
        c = index[find(i)]
        vs = []
        for v in a.vars:
            if v is not None and v in inputs:
                cv = f"{v}{SEP}{c}"
                copies.add(cv)
                origin[cv] = v
                vs.append(cv)
            else:
                vs.append(v)
        atoms.append(Atom(a.relation, a.alias, tuple(vs)))
    return Fracture(atoms, frozenset(copies), origin, components)


def cqap0_reason(atoms: list[Atom], inputs: frozenset[str], free: frozenset[str],
                 origin: dict[str, str]) -> str | None:
    """None when the (fractured) atoms are hierarchical, free- and input-dominant; else why not."""
    at: dict[str, frozenset[int]] = {}
    for i, a in enumerate(atoms):
        for v in a.varset:
            at[v] = at.get(v, frozenset()) | {i}
    name = lambda v: origin.get(v, v)
    kind = lambda v: "input" if v in inputs else ("output" if v in free else "bound variable")
    for x in sorted(at):
        for y in sorted(at):
            ax, ay = at[x], at[y]
            if ax & ay and not (ax <= ay or ay <= ax):
                return (f"not hierarchical: {name(x)} and {name(y)} occur together in "
                        f"{', '.join(sorted(atoms[i].alias for i in ax & ay))} but neither's atoms contain the other's")
            if ax < ay and x in free and y not in free:
                return f"{kind(y)} {name(y)} dominates {kind(x)} {name(x)} (not free-dominant)"
            if ax < ay and x in inputs and y not in inputs:
                return f"{kind(y)} {name(y)} dominates input {name(x)} (not input-dominant)"
    return None


@dataclass
class ParamPlan:
    cqap0: bool
    reason: str
    gcq: GCQ  # the query the view maintains (fractured for CQAP0); output = param vars + columns
    param_vars: list[str]  # per parameter, its variable in ``gcq`` (a copy when fractured)
    copies: dict[str, list[str]] = field(default_factory=dict)  # param -> all its copies
    components: list[list[str]] = field(default_factory=list)  # atom aliases per fracture component
    plan: object = None  # planner.Plan for CQAP0, else None (plan ``gcq`` as usual)


def plan_params(gcq: GCQ, params: list[str], param_vars: list[str], column_vars: list[str]) -> ParamPlan:
    """Classify and, for CQAP0, plan the view ``Q(O | I)`` (see the module docstring).

    ``gcq``'s atoms and predicates are the view's; ``param_vars`` are the input variables in
    parameter order and ``column_vars`` the variables of the view's columns.

    Examples:
        >>> from ivm_layer.gcqtext import parse_gcq
        >>> q = parse_gcq("r(a, b) ⋈ s(b, c)")
        >>> pp = plan_params(q, ["b"], ["b"], ["a", "c"])  # Q(a, c | b): look up by the join key
        >>> pp.cqap0, pp.reason
        (True, 'fracture hierarchical, free-dominant and input-dominant')
        >>> plan_params(q, ["a"], ["a"], ["c"]).reason  # Q(c | a): b is bound but above a
        'bound variable b dominates input a (not free-dominant)'
    """
    from .split import split_predicates
    from .trees import plan_from_order

    inputs = frozenset(param_vars)
    outputs = frozenset(column_vars) - inputs
    base_output = list(param_vars) + list(column_vars)
    usual = GCQ(gcq.atoms, gcq.predicates, base_output, list(params) + [f"c{i}" for i in range(len(column_vars))],
                schema=gcq.schema, distinct=gcq.distinct)
    _, joins = split_predicates(usual)
    if gcq.distinct:
        return ParamPlan(False, "DISTINCT keeps each answer as a set in the materialized map", usual,
                         list(param_vars))
    if joins:
        return ParamPlan(False, "inequality joins are outside paper 004 (" + "; ".join(map(str, joins)) + ")",
                         usual, list(param_vars))
    fr = fracture(usual, inputs)
    free = fr.inputs | outputs
    comps = [[gcq.atoms[i].alias for i in c] for c in fr.components]
    reason = cqap0_reason(fr.atoms, fr.inputs, free, fr.origin)
    if reason is not None:
        return ParamPlan(False, reason, usual, list(param_vars), components=comps)
    if cqap0_reason(usual.atoms, inputs, inputs | outputs, {}) is None:
        # the query itself is access-top hierarchical: no need to split inputs (rows() stays a plain walk)
        fr = Fracture(list(usual.atoms), inputs, {v: v for v in inputs}, [list(range(len(usual.atoms)))])
        rename_in = {i: (lambda v: v) for i in range(len(usual.atoms))}
    else:
        comp_of = {i: k for k, c in enumerate(fr.components) for i in c}
        rename_in = {i: (lambda v, k=comp_of[i]: f"{v}{SEP}{k}" if v in inputs else v) for i in comp_of}
    copies = {p: sorted(c for c, o in fr.origin.items() if o == v) for p, v in zip(params, param_vars)}
    preds: list[Predicate] = []
    for i, a in enumerate(usual.atoms):
        rn = rename_in[i]
        for p in usual.predicates:
            if p.vars <= a.varset:
                q = Predicate(rn(p.left), p.op, rn(p.right) if p.right is not None else None, p.offset)
                if q not in preds:
                    preds.append(q)
    pvars = [copies[p][0] for p in params]
    first = {v: copies[p][0] for p, v in zip(params, param_vars)}
    out = pvars + [first.get(v, v) for v in column_vars]
    out += [c for p in params for c in copies[p][1:]]  # every copy is free (lookups bind them all)
    fgcq = GCQ(fr.atoms, preds, out, list(usual.columns), schema=gcq.schema, distinct=gcq.distinct)
    rank = {**{v: 0 for v in fr.inputs}, **{v: 1 for v in outputs}}
    plan = plan_from_order(fgcq, lambda v: rank.get(v, 2), klass="q-hierarchical")
    if plan is None:
        return ParamPlan(False, "no access-top variable order was found", usual, list(param_vars), components=comps)
    for n in plan.root.walk():
        if not n.is_leaf and n.vars and n.vars <= fr.inputs:
            n.pinned = True  # the engine keeps input nodes' own tuples: lookups probe them
    return ParamPlan(True, "fracture hierarchical, free-dominant and input-dominant", fgcq, pvars,
                     copies=copies, components=comps, plan=plan)


def describe(pp: ParamPlan, params: list[str]) -> list[str]:
    comps = "; ".join("{" + ", ".join(c) + "}" for c in pp.components) if pp.components else "-"
    lines = [f"parameters: {', '.join(params)}", f"fracture components: {comps}"]
    if pp.cqap0:
        split = [p for p, c in pp.copies.items() if len(c) > 1]
        lines.append("parameter class: CQAP0 (" + pp.reason + ") — O(N) preprocessing, " + UPDATE_BOUND + " update (as derived under update cost), "
                     "lookup: O(1) probe of the input nodes then O(1) delay (O(1) for an empty answer)")
        if split:
            lines.append(f"rows()/len() over all parameter values: {', '.join(split)} split across fracture "
                         "components, so they join the components and filter (not constant delay); use lookup()")
    else:
        lines.append(f"parameter class: not CQAP0: {pp.reason}; a materialized answer map "
                     "{inputs → rows} is maintained from delta enumeration — lookup O(1) probe and O(1) delay, "
                     "update cost the size of the answer change, memory proportional to the output")
    return lines
