"""Compile predicates into small closures over node tuples (SQL semantics: NULL fails)."""

from __future__ import annotations

import operator
import re
from collections import Counter
from typing import TYPE_CHECKING, Any, Callable

from ..query import Predicate
from .scalar import compile_condition
from .values import canonical, offset_adder, typed_offset

if TYPE_CHECKING:
    from ..planner.gjt import Node


def expr_check(cond: Any, pos: dict[str, int]) -> Callable[[tuple], bool]:
    """A :class:`~ivm_layer.query.Condition` over one tuple: True where it is TRUE."""
    return compile_condition(cond.expr, pos, cond.dialect)

OPS: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "=": operator.eq,
    "<>": operator.ne,
}


def _like_regex(pattern: str, ignore_case: bool) -> "re.Pattern[str]":
    """SQL LIKE pattern (``%`` any run, ``_`` one character) as a compiled regex."""
    out = []
    for ch in pattern:
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
    return re.compile("".join(out), re.DOTALL | (re.IGNORECASE if ignore_case else 0))


def _unary_check(p: Predicate, i: int, pos: dict[str, int]) -> Callable[[tuple], bool]:
    """One constant filter on position ``i`` under SQL semantics (NULL -> not true)."""
    op, c = p.op, p.offset
    c = [canonical(x) for x in c] if op in ("in", "not in") else canonical(c)
    if op == "never":
        return lambda t: False
    if op == "expr":  # a condition of any shape: see ivm_layer.engine.scalar
        return expr_check(c, pos)
        return lambda t: False
    if op == "is null":
        return lambda t: t[i] is None
    if op == "is not null":
        return lambda t: t[i] is not None
    if op in ("in", "not in"):
        values = [v for v in c if v is not None]
        has_null = len(values) != len(c)
        try:
            members = frozenset(values)
            member = members.__contains__
        except TypeError:
            member = values.__contains__
        if op == "in":
            return lambda t: t[i] is not None and member(t[i])
        if has_null:  # x NOT IN (…, NULL) is never true
            return lambda t: False
        return lambda t: t[i] is not None and not member(t[i])
    if op in ("like", "not like", "ilike", "not ilike"):
        rx = _like_regex(c, op.endswith("ilike"))
        full = rx.fullmatch
        if op.startswith("not"):
            return lambda t: isinstance(t[i], str) and full(t[i]) is None
        return lambda t: isinstance(t[i], str) and full(t[i]) is not None
    fn = OPS[op]
    if c is None:
        return lambda t: False
    return lambda t: t[i] is not None and fn(t[i], c)


def compile_filter(preds: list[Predicate], pos: dict[str, int]) -> Callable[[tuple], bool] | None:
    """A function ``f(t) -> bool`` checking every predicate over one tuple (None if no predicate)."""
    if not preds:
        return None
    checks: list[Callable[[tuple], bool]] = []
    for p in preds:
        i = pos[p.left]
        if p.right is None:
            checks.append(_unary_check(p, i, pos))
            continue
        op, j, c = OPS[p.op], pos[p.right], p.offset or 0
        if c and typed_offset(c):
            add = offset_adder(c)
            checks.append(lambda t, op=op, i=i, j=j, add=add: t[i] is not None and t[j] is not None
                          and op(t[i], add(t[j])))
        elif c:
            checks.append(lambda t, op=op, i=i, j=j, c=c: t[i] is not None and t[j] is not None and op(t[i], t[j] + c))
        else:
            checks.append(lambda t, op=op, i=i, j=j: t[i] is not None and t[j] is not None and op(t[i], t[j]))
    if len(checks) == 1:
        return checks[0]

    def check(t: tuple) -> bool:
        for f in checks:
            if not f(t):
                return False
        return True

    return check


def compile_cross_check(preds: list[Predicate], left_pos: dict[str, int], right_pos: dict[str, int]
                        ) -> Callable[[tuple, tuple], bool] | None:
    """``f(lt, rt)`` for predicates ``left_var op right_var + c``: left vars read from ``lt``,
    right vars from ``rt``."""
    if not preds:
        return None
    checks = [(OPS[p.op], left_pos[p.left], right_pos[p.right], p.offset or 0) for p in preds]
    if any(typed_offset(c) for _, _, _, c in checks):
        typed = [(op, i, j, offset_adder(c) if c else (lambda v: v)) for op, i, j, c in checks]

        def check_typed(lt: tuple, rt: tuple) -> bool:
            for op, i, j, add in typed:
                if not op(lt[i], add(rt[j])):
                    return False
            return True

        return check_typed
    if len(checks) == 1:
        op, i, j, c = checks[0]
        if c:
            return lambda lt, rt: op(lt[i], rt[j] + c)
        return lambda lt, rt: op(lt[i], rt[j])

    def check(lt: tuple, rt: tuple) -> bool:
        for op, i, j, c in checks:
            if not op(lt[i], rt[j] + c if c else rt[j]):
                return False
        return True

    return check


def compile_bounds(preds: list[Predicate], right_pos: dict[str, int]):
    """For predicates ``s op r_var + c`` on one sort variable ``s``, a function of the probing
    tuple ``r`` returning ``(lo, lo_inclusive, hi, hi_inclusive)`` (None = unbounded)."""
    specs = [(p.op, right_pos[p.right], p.offset or 0) for p in preds]
    if any(typed_offset(c) for _, _, c in specs):
        typed = [(op, j, offset_adder(c)) for op, j, c in specs]

        def bounds_typed(r: tuple):
            lo = hi = None
            li = hii = False
            for op, j, add in typed:
                v = add(r[j])
                if op in ("<", "<=", "="):
                    incl = op != "<"
                    if hi is None or v < hi or (v == hi and not incl):
                        hi, hii = v, incl
                if op in (">", ">=", "="):
                    incl = op != ">"
                    if lo is None or v > lo or (v == lo and not incl):
                        lo, li = v, incl
            return lo, li, hi, hii

        return bounds_typed
    if len(specs) == 1:
        op, j, c = specs[0]
        if op == "<":
            return (lambda r: (None, False, r[j] + c, False)) if c else (lambda r: (None, False, r[j], False))
        if op == "<=":
            return (lambda r: (None, False, r[j] + c, True)) if c else (lambda r: (None, False, r[j], True))
        if op == ">":
            return (lambda r: (r[j] + c, False, None, False)) if c else (lambda r: (r[j], False, None, False))
        if op == ">=":
            return (lambda r: (r[j] + c, True, None, False)) if c else (lambda r: (r[j], True, None, False))
        return (lambda r: (r[j] + c, True, r[j] + c, True)) if c else (lambda r: (r[j], True, r[j], True))

    def bounds(r: tuple):
        lo = hi = None
        li = hii = False
        for op, j, c in specs:
            v = r[j] + c if c else r[j]
            if op in ("<", "<=", "="):
                incl = op != "<"
                if hi is None or v < hi or (v == hi and not incl):
                    hi, hii = v, incl
            if op in (">", ">=", "="):
                incl = op != ">"
                if lo is None or v > lo or (v == lo and not incl):
                    lo, li = v, incl
        return lo, li, hi, hii

    return bounds


#: one-sided range sums of an ordered group (engine/groups.py) per operator of ``s op bound``
RANGE_SUM = {"<": "below", "<=": "upto", ">": "above", ">=": "atleast"}


def bound_source(preds: list[Predicate], right_pos: dict[str, int], tvar: str,
                 const: Callable[[Any], str]) -> tuple[str, str] | None:
    """Source for the predicates :func:`compile_bounds` takes when there is one of them and its
    offset needs no :func:`offset_adder`: ``(op, bound)``, the range being ``s op bound`` with
    ``bound`` read from tuple variable ``tvar`` (``const(c)`` names a constant in the generated
    code's namespace). None otherwise: generated code then calls the compiled closure."""
    if len(preds) != 1:
        return None
    p = preds[0]
    c = p.offset or 0
    if c and typed_offset(c):
        return None
    x = f"{tvar}[{right_pos[p.right]}]"
    if c:
        x = f"({x} + {const(c)})"
    return p.op, x


def bounds_lines(preds: list[Predicate], right_pos: dict[str, int], tvar: str, const: Callable[[Any], str],
                 out: str) -> list[str] | None:
    """Straight-line source computing :func:`compile_bounds`' range into ``{out}lo, {out}li,
    {out}hi, {out}hii`` (several predicates on one sort variable: the tightest bound on each
    side, an exclusive bound winning a tie); None when an offset needs :func:`offset_adder`."""
    lo, li, hi, hii = f"{out}lo", f"{out}li", f"{out}hi", f"{out}hii"
    lines = [f"{lo} = {hi} = None", f"{li} = {hii} = False"]
    for p in preds:
        c = p.offset or 0
        if c and typed_offset(c):
            return None
        x = f"{tvar}[{right_pos[p.right]}]" + (f" + {const(c)}" if c else "")
        v = f"{out}v"
        lines.append(f"{v} = {x}")
        if p.op in ("<", "<=", "="):
            incl = p.op != "<"
            lines.append(f"if {hi} is None or {v} < {hi} or ({v} == {hi} and {not incl}): {hi}, {hii} = {v}, {incl}")
        if p.op in (">", ">=", "="):
            incl = p.op != ">"
            lines.append(f"if {lo} is None or {v} > {lo} or ({v} == {lo} and {not incl}): {lo}, {li} = {v}, {incl}")
    return lines


def compile_range_sum(preds: list[Predicate], right_pos: dict[str, int]) -> Callable[[Any, tuple], Any]:
    """``f(group, r)``: the sum of an ordered group's weights inside the range the predicates
    :func:`compile_bounds` takes admit for tuple ``r`` — one one-sided call (``below`` …) for a
    single predicate with a plain offset, ``range_sum(*bounds(r))`` otherwise."""
    src = bound_source(preds, right_pos, "r", repr) if preds else None
    if src is not None and src[0] in RANGE_SUM and all(type(p.offset or 0) is int for p in preds):
        op, x = src
        return eval(f"lambda g, r: g.{RANGE_SUM[op]}({x})")  # noqa: S307 - built from ints and names
    bounds = compile_bounds(preds, right_pos)
    return lambda g, r: g.range_sum(*bounds(r))


def range_args_source(op: str, x: str) -> str:
    """``lo, lo_incl, hi, hi_incl`` source of the range ``s op x``."""
    return {"<": f"None, False, {x}, False", "<=": f"None, False, {x}, True",
            ">": f"{x}, False, None, False", ">=": f"{x}, True, None, False",
            "=": f"{x}, True, {x}, True"}[op]


def key_expr(var_names: list[str], pos: dict[str, int], tvar: str) -> str:
    """Python source for the hash key of ``var_names`` read from tuple variable ``tvar``."""
    if not var_names:
        return "()"
    if len(var_names) == 1:
        return f"{tvar}[{pos[var_names[0]]}]"
    return "(" + ", ".join(f"{tvar}[{pos[v]}]" for v in var_names) + ")"


def key_fn(var_names: list[str], pos: dict[str, int]) -> Callable[[tuple], Any]:
    """The hash key of ``var_names``: ``()``, a scalar, or a tuple (same shape as :func:`key_expr`)."""
    if not var_names:
        return lambda t: ()
    if len(var_names) == 1:
        return operator.itemgetter(pos[var_names[0]])
    return operator.itemgetter(*(pos[v] for v in var_names))


def projector(var_names: list[str], pos: dict[str, int]) -> Callable[[tuple], tuple]:
    """Project a tuple onto ``var_names`` (always returns a tuple)."""
    idx = [pos[v] for v in var_names]
    if not idx:
        return lambda t: ()
    if len(idx) == 1:
        i = idx[0]
        return lambda t: (t[i],)
    return operator.itemgetter(*idx)


def oriented_cross(child: Node, parent: Node) -> list[Predicate]:
    """Edge predicates of ``parent -> child`` written as ``child_var op parent_var + c``."""
    out = []
    for p in child.preds:
        if p.left in child.vars and p.right in parent.vars:
            out.append(p)
        else:
            out.append(p.flipped())
    return out


def flip_all(preds: list[Predicate]) -> list[Predicate]:
    return [p.flipped() for p in preds]


def split_on_sort_var(preds: list[Predicate]) -> tuple[str | None, list[Predicate], list[Predicate]]:
    """Choose the left variable used by most predicates as the order; the rest are residual."""
    if not preds:
        return None, [], []
    counts = Counter(p.left for p in preds)
    sort_var = min(counts, key=lambda v: (-counts[v], v))
    on = [p for p in preds if p.left == sort_var]
    rest = [p for p in preds if p.left != sort_var]
    return sort_var, on, rest


def box_vars(preds: list[Predicate]) -> list[str] | None:
    """The left variables of predicates ``left op right + c`` when they are two or more and every
    predicate is a comparison (``<``, ``<=``, ``>``, ``>=``, ``=`` with an offset): an edge a
    multi-level box index covers completely (engine/boxgroup.py), the variable most predicates
    use first. None otherwise (at most one variable: one order covers it)."""
    if not preds or any(p.op not in ("<", "<=", ">", ">=", "=") or p.right is None for p in preds):
        return None
    counts = Counter(p.left for p in preds)
    if len(counts) < 2 or len({p.right for p in preds}) < 2:
        # one variable on either side: one order serves that side's probes (a band such as
        # 000 §1's fraud query keeps its single-order plan)
        return None
    return sorted(counts, key=lambda v: (-counts[v], v))


def compile_box_bounds(preds: list[Predicate], variables: list[str], right_pos: dict[str, int]
                       ) -> Callable[[tuple], tuple]:
    """``f(r)``: per variable of ``variables`` (in that order), the range :func:`compile_bounds`
    gives for the predicates on it, read from the probing tuple ``r``."""
    fs = [compile_bounds([p for p in preds if p.left == v], right_pos) for v in variables]
    if len(fs) == 2:
        f0, f1 = fs
        return lambda r: (f0(r), f1(r))
    if len(fs) == 3:
        f0, f1, f2 = fs
        return lambda r: (f0(r), f1(r), f2(r))
    return lambda r: tuple(f(r) for f in fs)
