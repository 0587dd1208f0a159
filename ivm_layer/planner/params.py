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
    #: the range parameters' variable whose order serves lookups (CQAP0: the GJT node right under
    #: the input nodes keeps its enumeration index ordered on it; answer map: each input value's
    #: rows are kept ordered on it), or None; ``range_why`` says why there is none
    range_var: str | None = None
    range_node: int | None = None  # CQAP0: the id of that GJT node
    range_why: str = ""


def plan_params(gcq: GCQ, params: list[str], param_vars: list[str], column_vars: list[str],
                range_vars: list[str] = ()) -> ParamPlan:
    """Classify and, for CQAP0, plan the view ``Q(O | I)`` (see the module docstring).

    ``gcq``'s atoms and predicates are the view's; ``param_vars`` are the input variables in
    parameter order and ``column_vars`` the variables of the view's columns (the compared
    columns of range parameters ``col > $p`` included). ``range_vars``: those compared
    columns' variables; the first one that is not an input gets an ordered index
    (:func:`_range_index`): a lookup bisects it, O(log n), instead of filtering every row under
    the inputs.

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
    ranged = [v for v in dict.fromkeys(range_vars) if v not in inputs]
    rv = ranged[0] if ranged else None
    if gcq.distinct:
        return ParamPlan(False, "DISTINCT keeps each answer as a set in the materialized map", usual,
                         list(param_vars), range_var=rv)
    if joins:
        return ParamPlan(False, "inequality joins are outside paper 004 (" + "; ".join(map(str, joins)) + ")",
                         usual, list(param_vars), range_var=rv)
    fr = fracture(usual, inputs)
    free = fr.inputs | outputs
    comps = [[gcq.atoms[i].alias for i in c] for c in fr.components]
    reason = cqap0_reason(fr.atoms, fr.inputs, free, fr.origin)
    if reason is not None:
        return ParamPlan(False, reason, usual, list(param_vars), components=comps, range_var=rv)
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
    plan = None
    if rv is not None:  # the range column right under the inputs: its order is the index
        plan = plan_from_order(fgcq, lambda v: 0.5 if v == rv else rank.get(v, 2), klass="q-hierarchical")
    if plan is None:
        plan = plan_from_order(fgcq, lambda v: rank.get(v, 2), klass="q-hierarchical")
    if plan is None:
        return ParamPlan(False, "no access-top variable order was found", usual, list(param_vars), components=comps)
    for n in plan.root.walk():
        if not n.is_leaf and n.vars and n.vars <= fr.inputs:
            n.pinned = True  # the engine keeps input nodes' own tuples: lookups probe them
    pp = ParamPlan(True, "fracture hierarchical, free-dominant and input-dominant", fgcq, pvars,
                   copies=copies, components=comps, plan=plan)
    if rv is not None:
        _range_index(pp, rv, fr.inputs)
    elif range_vars:
        pp.range_why = "the compared column is also an equality input: one value per lookup, so no order helps"
    return pp


def _range_index(pp: ParamPlan, rv: str, inputs: frozenset[str]) -> None:
    """Order the enumeration index of the GJT node that first binds ``rv`` below the input
    nodes (its parent's variables are all inputs, or it hangs off the root): every tuple of
    that node extends to output rows (the T-representation is calibrated), so a lookup probes
    the inputs, bisects that node's group to the range, O(log n), and enumerates from there
    with constant delay. When ``rv`` sits deeper (below an output or a bound variable common
    to more atoms than its own), no such node exists and lookups filter instead."""
    plan = pp.plan
    for n in plan.root.walk():
        p = n.parent
        if p is None or n.id not in plan.in_n or rv not in n.vars or not p.vars <= inputs:
            continue
        n.order_by = rv
        pp.range_var, pp.range_node = rv, n.id
        return
    pp.range_why = (f"{rv} is not bound right under the inputs: the variable order puts variables shared by "
                    "more atoms above it, so no single index order covers the range")


def describe(pp: ParamPlan, params: list[str], ranges: list[tuple[str, str, str]] = (),
             merge: bool = False) -> list[str]:
    """EXPLAIN's lines for a parameterized view; ``ranges`` are its range parameters
    ``(name, op, compared variable)``, ``merge`` says whether rows differing only in a
    compared column are merged (it is not among the view's columns)."""
    comps = "; ".join("{" + ", ".join(c) + "}" for c in pp.components) if pp.components else "-"
    shown = list(params) + [f"{n} ({op})" for n, op, _ in ranges]
    lines = [f"parameters: {', '.join(shown) if shown else '-'}", f"fracture components: {comps}"]
    indexed = pp.range_var is not None and (pp.range_node is not None or not pp.cqap0)
    if pp.cqap0:
        split = [p for p, c in pp.copies.items() if len(c) > 1]
        if not ranges:
            look = "lookup: O(1) probe of the input nodes then O(1) delay (O(1) for an empty answer)"
        elif indexed:
            look = ("lookup: O(1) probe of the input nodes, O(log n) bisection of the range index, then "
                    + ("O(1) delay" if not merge else "O(1) per row in the range") + " (O(log n) for an empty answer)")
        else:
            look = "lookup: see the range parameters below"
        lines.append("parameter class: CQAP0 (" + pp.reason + ") — O(N) preprocessing, " + UPDATE_BOUND
                     + " update (as derived under update cost), " + look)
        if split:
            lines.append(f"rows()/len() over all parameter values: {', '.join(split)} split across fracture "
                         "components, so they join the components and filter (not constant delay); use lookup()")
    else:
        lines.append(f"parameter class: not CQAP0: {pp.reason}; a materialized answer map "
                     "{inputs → rows} is maintained from delta enumeration — "
                     + ("" if ranges else "lookup O(1) probe and O(1) delay, ")
                     + "update cost the size of the answer change"
                     + (" times O(log n) (its rows are ordered for the range parameters)" if indexed else "")
                     + ", memory proportional to the output")
    if ranges:
        lines.append(_describe_ranges(pp, params, ranges, merge, indexed))
    return lines


def _describe_ranges(pp: ParamPlan, params: list[str], ranges: list[tuple[str, str, str]], merge: bool,
                     indexed: bool) -> str:
    on = [f"${n} ({op})" for n, op, v in ranges if indexed and v == pp.range_var]
    off = [f"${n} ({op} on {v})" for n, op, v in ranges if not (indexed and v == pp.range_var)]
    under = f"under the equality inputs ({', '.join(params)})" if params else "over the whole view (no equality input)"
    if not indexed:
        rs = ", ".join(off)
        why = pp.range_why or "no ordered index"
        return (f"range parameters {rs}: no ordered index ({why}) — each lookup " + (
            f"probes the equality inputs ({', '.join(params)}) in O(1), then filters and consolidates every row "
            "under them: O(rows under the equality key), not O(log n + answer)" if params else
            "scans and filters every row of the view: O(n), not O(log n + answer)"))
    where = ("the enumeration index of the GJT node right under the inputs" if pp.cqap0 else
             "each input value's rows in the answer map")
    text = (f"range parameters {', '.join(on)}: ordered index on {pp.range_var} ({where}, sorted chunks) {under} — "
            "each lookup bisects to the range in O(log n) and reads only the rows inside it: O(log n + answer); "
            "each change of the index costs O(log n)")
    if off:
        text += (f"; {', '.join(off)} checked row by row inside that range (one order serves one column): "
                 f"O(log n + rows in the {pp.range_var} range)")
    if merge:
        text += ("; the compared column is not selected, so rows that differ only in it are merged before the "
                 "first is returned (the answer's rows, not O(1) to the first)")
    return text
