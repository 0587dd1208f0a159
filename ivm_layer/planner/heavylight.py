"""The heavy/light trade-off for parameterized views outside CQAP0 (paper 004, §6, Thm. 17 /
Cor. 18): class CQAP1, the partition key, and the two plans the engine keeps.

For a CQAP1 view ``Q(O | I)`` whose fracture is one hierarchical component, let K be the
variables every atom shares that are not inputs (the top of its canonical variable order: the
variables that dominate the inputs or the free variables, e.g. B in ``Q(B|A) = R(A,B), S(B)``).
Each derivation has one K-value, so ``Q = Q[heavy K] + Q[light K]`` where a K-value is *heavy*
when its degree (rows carrying it, summed over the atoms) reaches θ = M^ε (M ≈ 2N):

* heavy part: ``Q(O∖K | I ∪ K)`` over the heavy rows, which is CQAP0 (checked): O(1) update,
  and a lookup probes it once per heavy K-value — at most 2N/θ = O(N^{1−ε}) of them — so the
  enumeration delay is O(N^{1−ε});
* light part: the materialized answer map over the light rows: an update changes at most the
  other atom's rows under its K-value, < θ = O(N^ε) of them (this module checks that at most
  one *other* atom carries variables beyond K, so the change is one degree, not a product);
* a K-value crossing θ (up) or θ/2 (down) moves its rows to the other part, and θ moves with
  N (M doubles or halves): rebuilds cost O(N^{1+ε}) after Ω(N) updates, so updates are
  O(N^ε) amortized. Preprocessing is O(N^{1+ε}) (the light answer map).

ε = 0: every K-value is heavy (O(1) update, O(N) delay); ε = 1: none is (today's answer map).
Shapes outside this construction are refused with the class and the reason
(:class:`HeavyLightRefused`). Cost of the analysis: polynomial in the query's size.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import HeavyLightRefused, ProgrammingError
from ..query import GCQ, Atom
from .params import cqap0_reason, fracture, plan_params


@dataclass
class HeavyLightPlan:
    epsilon: float
    klass: str  # "CQAP1" (or why not)
    key: list[str]  # the partition variables K
    key_positions: dict[str, list[int]]  # relation -> column of each K variable in its rows
    heavy: object  # planner.params.ParamPlan: Q(O∖K | I ∪ K), CQAP0
    heavy_columns: list[str]  # the view's output variables that the heavy part returns (O∖K)
    column_vars: list[str]  # the view's output variables, in column order
    boolean: bool  # no outputs: a lookup sums the multiplicities of every part
    reason: str = ""  # why the view is CQAP1 and not CQAP0

    def notes(self) -> list[str]:
        e = self.epsilon
        pre, upd, dly = _power(1 + e), _power(e), _power(1 - e)
        return [
            f"parameter class: CQAP1 ({self.reason}) — heavy/light with ε = {e:g}: {upd} amortized update, "
            f"{dly} lookup delay",
            f"heavy/light (paper 004 Cor. 18): class CQAP1, ε = {e:g}, partition key "
            f"{{{', '.join(self.key)}}} (θ = M^ε, M ≈ 2N; heavy from degree θ, light again below θ/2)",
            f"heavy/light bounds: preprocessing {pre}, update {upd} amortized "
            f"(rebalancing when a value crosses θ or N doubles/halves), lookup delay {dly} "
            f"(≤ 2N/θ heavy values probed in O(1) each; light answers O(1) delay)",
            "heavy part: Q(" + ", ".join(self.heavy_columns) + " | inputs, " + ", ".join(self.key)
            + ") over the heavy rows, CQAP0; light part: answer map over the light rows "
            "(update cost the change, < θ rows)",
            "the class/update/enumeration lines of this EXPLAIN describe the third structure, the "
            "T-representation of all input/output pairs that rows() and len() read (its cost is part of "
            "each update); lookups use the heavy and light parts with the bounds above",
        ]


def _power(x: float) -> str:
    x = round(x, 6)
    if x == 0:
        return "O(1)"
    if x == 1:
        return "O(N)"
    return f"O(N^{x:g})"


def almost_dominant(atoms: list[Atom], chosen: frozenset[str]) -> bool:
    """Paper 004 Def. (almost free-/input-dominant, condition 1): for every variable B outside
    ``chosen`` and every atom R of B there is another atom S of B such that R ∪ S covers the
    ``chosen`` variables that B dominates."""
    at: dict[str, frozenset[int]] = {}
    for i, a in enumerate(atoms):
        for v in a.varset:
            at[v] = at.get(v, frozenset()) | {i}
    for b, ab in at.items():
        if b in chosen:
            continue
        dominated = {a for a, aa in at.items() if a in chosen and aa < ab}
        if not dominated:
            continue
        for r in ab:
            if not any(dominated <= atoms[r].varset | atoms[s].varset for s in ab if s != r):
                return False
    return True


def _dominant(atoms: list[Atom], chosen: frozenset[str]) -> bool:
    at: dict[str, frozenset[int]] = {}
    for i, a in enumerate(atoms):
        for v in a.varset:
            at[v] = at.get(v, frozenset()) | {i}
    return not any(at[x] < at[y] and x in chosen and y not in chosen for x in at for y in at)


def parameter_class(gcq: GCQ, param_vars: list[str], column_vars: list[str]) -> tuple[str, str]:
    """``("CQAP0" | "CQAP1" | "beyond CQAP1", reason)`` of ``Q(column_vars | param_vars)`` by
    Definition 1 of paper 004, on the fracture."""
    inputs = frozenset(param_vars)
    fr = fracture(gcq, inputs)
    free = fr.inputs | (frozenset(column_vars) - inputs)
    reason = cqap0_reason(fr.atoms, fr.inputs, free, fr.origin)
    if reason is None:
        return "CQAP0", "fracture hierarchical, free-dominant and input-dominant"
    if reason.startswith("not hierarchical"):
        return "beyond CQAP1", f"the fracture is {reason}"
    fd = _dominant(fr.atoms, free) or almost_dominant(fr.atoms, free)
    idom = _dominant(fr.atoms, fr.inputs) or almost_dominant(fr.atoms, fr.inputs)
    if fd and idom:
        return "CQAP1", f"{reason}, but almost dominant (two atoms cover what it dominates)"
    return "beyond CQAP1", f"{reason}, and not almost {'free' if not fd else 'input'}-dominant"


def plan_heavy_light(gcq: GCQ, params: list[str], param_vars: list[str], column_vars: list[str],
                     epsilon: float) -> HeavyLightPlan:
    """The heavy/light plan of ``Q(column_vars | param_vars)`` (see the module docstring), or
    :class:`HeavyLightRefused` naming the class and the reason."""
    from .split import split_predicates

    head = f"WITH (epsilon = {epsilon:g}): "
    if gcq.distinct:
        raise HeavyLightRefused(head + "DISTINCT views keep their answers as sets in the materialized map; "
                                "the heavy/light construction is built for bag (SELECT ALL) views")
    _, joins = split_predicates(gcq)
    if joins:
        raise HeavyLightRefused(head + "inequality joins are outside paper 004 ("
                                + "; ".join(map(str, joins)) + ")")
    klass, why = parameter_class(gcq, param_vars, column_vars)
    if klass == "CQAP0":
        raise HeavyLightRefused(head + "this view is in CQAP0 (" + why + "): it already has O(1) update and "
                                "O(1) delay, there is no trade-off to choose; drop the option")
    if klass != "CQAP1":
        need = ("Thm. 17's trade-off needs a hierarchical fracture" if why.startswith("the fracture is not")
                else "its general form for hierarchical fractures (Thm. 17, update O(N^(δε))) is not built")
        raise HeavyLightRefused(head + f"the view is not in CQAP1 ({why}); the heavy/light construction is "
                                f"built for CQAP1 (paper 004 Cor. 18) and {need}; without the option the view "
                                "keeps a materialized answer map (update cost the size of the answer change)")
    inputs = frozenset(param_vars)
    fr = fracture(gcq, inputs)
    built = "CQAP1, but the heavy/light construction is built for "
    if len(fr.components) != 1:
        raise HeavyLightRefused(head + built + "one-component fractures; this one has "
                                f"{len(fr.components)} (the components' product is not built)")
    rels = [a.relation for a in gcq.atoms]
    if len(set(rels)) != len(rels):
        raise HeavyLightRefused(head + built + "views without self-joins (a table occurs twice here)")
    common = frozenset.intersection(*(a.varset for a in gcq.atoms))
    key = sorted(common - inputs)
    if not key:
        raise HeavyLightRefused(head + built + "views whose atoms share a non-input variable to partition on "
                                "(the violation is deeper in the variable order)")
    kset = frozenset(key)
    wide = [a.alias for a in gcq.atoms if a.varset - kset]
    if len(wide) > 2 or (len(wide) == 2 and len(gcq.atoms) > 2):
        raise HeavyLightRefused(head + built + f"views where at most one other atom carries variables beyond the "
                                f"key {{{', '.join(key)}}} (here {', '.join(wide)} do): a light update would "
                                "change a product of degrees, not one")
    outputs = [v for v in column_vars if v not in inputs]
    if outputs and not kset <= frozenset(outputs):
        raise HeavyLightRefused(head + built + f"views whose key {{{', '.join(key)}}} is among the outputs (or that "
                                "have no outputs): rows from different heavy values would have to be merged")
    heavy_cols = [v for v in column_vars if v not in kset]
    hp = plan_params(gcq, list(params) + [f"__hl_{k}" for k in key], list(param_vars) + key, heavy_cols)
    if not hp.cqap0:
        raise HeavyLightRefused(head + built + f"views whose heavy part Q(… | inputs, {', '.join(key)}) is CQAP0; "
                                f"here it is not ({hp.reason})")
    positions = {a.relation: [a.vars.index(k) for k in key] for a in gcq.atoms}
    return HeavyLightPlan(float(epsilon), "CQAP1", key, positions, hp, heavy_cols, list(column_vars),
                          boolean=not column_vars, reason=why)


def check_epsilon(epsilon) -> float:
    """``epsilon`` as a float in [0, 1], or :class:`ProgrammingError` (22023, PostgreSQL's
    invalid_parameter_value) in the user's terms."""
    try:
        e = float(epsilon)
    except (TypeError, ValueError):
        raise ProgrammingError(f"epsilon must be a number between 0 and 1, got {epsilon!r}",
                               sqlstate="22023") from None
    if not 0.0 <= e <= 1.0 or e != e:
        raise ProgrammingError(f"epsilon must be between 0 and 1 (paper 004's trade-off θ = N^ε), got {epsilon!r}",
                               sqlstate="22023")
    return e


def cyclic_param_reason(gcq: GCQ, pp) -> str:
    """Why a cyclic parameterized view is refused, with its class (paper 004 Def. 1): the text
    after "Parameter analysis … with inputs …: " in the :class:`CyclicQueryError`."""
    n = len(pp.param_vars)
    klass, why = parameter_class(gcq, list(gcq.output[:n]), list(gcq.output[n:]))
    if klass == "CQAP1":
        return (f"not CQAP0, class CQAP1 ({why}); 004's heavy/light construction (Cor. 18: O(N^ε) update, O(N^(1−ε)) "
                "delay) covers it in principle, but it is built here for one-component acyclic fractures only, "
                "and the fallback (a materialized answer map over a generalized join tree of the whole query) "
                "needs an acyclic query")
    return (f"{'not CQAP0' if klass == 'CQAP0' else 'not CQAP0, beyond CQAP1'} ({why}); paper 004 gives no trade-off for a "
            "fracture that is not hierarchical (Thm. 17 needs one), and the fallback (a materialized answer map "
            "over a generalized join tree of the whole query) needs an acyclic query")
