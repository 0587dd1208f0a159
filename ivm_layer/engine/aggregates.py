"""Grouped and aggregate views: ring payloads and per-group aggregate state (ALGORITHMS.md §7).

An aggregate view is a join view whose output variables are the group-by variables (the
*base* view: its multiplicities are the groups' ``COUNT(*)``), plus

* **ring payloads** — ``SUM(e)`` / ``COUNT(e)`` / ``AVG(e)`` where ``e`` reads one atom's
  columns: the base view's multiplicities become elements of the ring ℤ×Rᵏ (:class:`Vec`):
  a leaf tuple of the atom owning ``e`` carries ``(k, k·e(row), …)``, so the count and every
  such sum travel through the same T-representation (002 §5), the root-side delta of a group
  is ``(Δ COUNT(*), Δ SUM(e), …)`` and an update costs what a count update costs (O(1) for
  q-hierarchical views);
* the **materialized route** — aggregates whose argument spans several atoms, ``MIN``/``MAX``
  and ``DISTINCT`` aggregates: the base view also outputs the variables they read, and the
  per-group state (running sums, ordered multisets of values) is maintained from its delta
  enumeration. Never recomputed from base tables.

Each changed group's output row changes as ``(old row, -1), (new row, +1)``; a group
disappears when its count reaches zero; a global aggregate (no GROUP BY) always has its
one row. NULLs, empty inputs and result types follow DuckDB/PostgreSQL.
"""

from __future__ import annotations

import math
import operator
from dataclasses import replace
from decimal import Decimal, localcontext
from typing import Any, Callable, Iterable, Iterator, Mapping

from sortedcontainers import SortedList

from ..errors import ConcurrentModificationError, SQLError, UpdateError
from ..query import GCQ, Aggregate, AggregateSpec, Expr, expr_str, expr_vars
from .exact import EXACT, numeric_avg
from .leaves import value_kind
from .scalar import SCALAR_TAGS, compile_scalar
from .fsum import FloatSum, exact, plain
from .values import canonical
from .view import Prepared, View, subscribe_to, tell
from .view import chunked_rows as _chunks

Change = list[tuple[tuple, int]]


# -- scalar expressions ---------------------------------------------------------------------
def _num(a: Any, b: Any) -> tuple[Any, Any]:
    """Operands of one arithmetic step: a float with a Decimal computes in floats (as SQL's DOUBLE)."""
    if type(a) is float and isinstance(b, Decimal):
        return a, float(b)
    if type(b) is float and isinstance(a, Decimal):
        return float(a), b
    return a, b


def _div(a: Any, b: Any) -> float:
    """SQL ``/`` as DuckDB does it: always DOUBLE; x/0 is ±inf (nan for 0/0)."""
    a, b = float(a), float(b)
    if b == 0:
        return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a) * math.copysign(1, b)
    return a / b


_ARITH: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": _div,
}
_CMP: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda a, b: a == b, "<>": lambda a, b: a != b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}


def compile_expr(e: Expr, pos: Mapping[str, int], aggs: Callable[[int], Any] | None = None,
                 groups: Callable[[int], Any] | None = None) -> Callable[[tuple], Any]:
    """A closure evaluating ``e`` on a tuple (variables read at ``pos``), with SQL NULLs and
    three-valued logic. HAVING closures receive ``(group key, state)`` through ``aggs``/``groups``."""
    tag = e[0]
    if tag in SCALAR_TAGS:  # CASE, functions, CAST, … (ivm_layer.engine.scalar)
        return compile_scalar(e, pos)
    if tag == "var":
        i = pos[e[1]]
        return lambda t: t[i]
    if tag == "const":
        c = e[1]
        return lambda t: c
    if tag == "agg":
        j, read = e[1], aggs
        return lambda t: read(j, t)
    if tag == "grp":
        j, read = e[1], groups
        return lambda t: read(j, t)
    subs = [compile_expr(s, pos, aggs, groups) for s in e[1:]]
    if tag == "neg":
        f = subs[0]

        def neg(t):
            v = f(t)
            return None if v is None else -v
        return neg
    if tag == "isnull":
        f = subs[0]
        return lambda t: f(t) is None
    if tag == "not":
        f = subs[0]

        def not_(t):
            v = f(t)
            return None if v is None else not v
        return not_
    if tag in ("and", "or"):
        f, g = subs
        stop = tag == "or"  # the value that decides

        def logic(t):
            a, b = f(t), g(t)
            if a is stop or b is stop:
                return stop
            if a is None or b is None:
                return None
            return not stop
        return logic
    f, g = subs
    if tag in _ARITH:
        op = _ARITH[tag]

        def arith(t):
            a, b = f(t), g(t)
            if a is None or b is None:
                return None
            return op(*_num(a, b))
        return arith
    cmp = _CMP[tag]

    def compare(t):
        a, b = f(t), g(t)
        if a is None or b is None:
            return None
        a, b = _num(a, b)
        return bool(cmp(canonical(a), canonical(b)))  # NaN: equal to itself, above every number
    return compare


def _arith_vars(e: Expr, inside: bool = False) -> set[str]:
    """Variables used as arithmetic operands (their values must be numbers)."""
    if e[0] == "var":
        return {e[1]} if inside else set()
    if e[0] in ("const", "agg", "grp"):
        return set()
    arith = e[0] in _ARITH or e[0] == "neg"
    out: set[str] = set()
    for s in e[1:]:
        out |= _arith_vars(s, inside or arith)
    return out


def _static_kind(e: Expr, spec: AggregateSpec, need: list[tuple[str, str]]) -> Any:
    """The value kind of ``e`` where it is known before any row arrives ("number", "text", …),
    ``("var", v)`` when it is the kind of variable v's values, None when unknown. Raises
    SQLError where SQL would reject the types (text in arithmetic or SUM/AVG, a number
    compared with text); comparisons of a variable with a constant add ``(v, kind)`` to
    ``need`` (checked on every row, before anything changes)."""
    tag = e[0]
    if tag == "var":
        return ("var", e[1])
    if tag == "const":
        return None if e[1] is None else value_kind(e[1])
    if tag == "grp":
        return ("var", spec.group_vars[e[1]])
    if tag == "agg":
        agg = spec.aggregates[e[1]]
        if agg.arg is not None:
            k = _static_kind(agg.arg, spec, need)
            if agg.func in ("sum", "avg") and isinstance(k, str) and k != "number":
                raise SQLError(f"{agg} needs numbers, but its argument is {k}")
            if agg.func in ("min", "max"):
                return k
        return "number"
    if tag in _ARITH or tag == "neg":
        for sub in e[1:]:
            k = _static_kind(sub, spec, need)
            if isinstance(k, str) and k != "number":
                raise SQLError(f"arithmetic on a {k} value in {expr_str(e)}")
        return "number"
    if tag in _CMP:
        a, b = (_static_kind(sub, spec, need) for sub in e[1:])
        if isinstance(a, str) and isinstance(b, str) and a != b:
            raise SQLError(f"{expr_str(e)} compares a {a} value with a {b} value")
        for x, y in ((a, b), (b, a)):
            if isinstance(x, tuple) and isinstance(y, str):
                need.append((x[1], y))
        return "bool"
    for sub in e[1:]:
        _static_kind(sub, spec, need)
    return "bool" if tag in ("and", "or", "not", "isnull") else None


# -- the ring of SUM payloads ---------------------------------------------------------------
_plus, _minus = operator.add, operator.sub


class Vec:
    """An element ``(c, v1, …, vk)`` of the ring ℤ×Rᵏ of 002 §5 / ALGORITHMS.md §7: ``c``
    counts join results, ``vj`` sums the j-th aggregated value over them. Addition is
    componentwise, ``(c, v)·(c', v') = (c·c', c·v' + c'·v)``; an int ``n`` is ``(n, 0…0)``.
    Each ``vj`` is owned by one atom (its leaf tuples carry ``(1, …, value, …)``, the other
    atoms' tuples plain counts), so the product gives every join result its value once.

    The count component keeps a T-representation entry alive: with bare sums as
    multiplicities, values of opposite sign cancel at a projection node and the tuples below
    it would be lost to enumeration."""

    __slots__ = ("c", "v")

    def __init__(self, c: int, v: tuple) -> None:
        self.c = c
        self.v = v

    def __add__(self, o: Any) -> "Vec":
        if type(o) is Vec:
            return Vec(self.c + o.c, tuple(map(_plus, self.v, o.v)))
        return Vec(self.c + o, self.v)

    __radd__ = __add__

    def __sub__(self, o: Any) -> "Vec":
        if type(o) is Vec:
            return Vec(self.c - o.c, tuple(map(_minus, self.v, o.v)))
        return Vec(self.c - o, self.v)

    def __rsub__(self, o: Any) -> "Vec":
        return Vec(o - self.c, tuple([-a for a in self.v]))

    def __neg__(self) -> "Vec":
        return Vec(-self.c, tuple([-a for a in self.v]))

    def __mul__(self, o: Any) -> "Vec":
        if type(o) is Vec:
            c1, c2 = self.c, o.c
            return Vec(c1 * c2, tuple([c1 * b + c2 * a for a, b in zip(self.v, o.v)]))
        if o == 1:
            return self
        return Vec(self.c * o, tuple([a * o for a in self.v]))

    __rmul__ = __mul__

    def __bool__(self) -> bool:
        return bool(self.c) or any(self.v)

    def __eq__(self, o: object) -> bool:
        if type(o) is Vec:
            return self.c == o.c and self.v == o.v
        return not any(self.v) and self.c == o

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Vec({self.c!r}, {self.v!r})"


# -- per-group state -----------------------------------------------------------------------
_NAN = ("NaN",)  # the key NaN values are counted under (NaN != NaN cannot be a dict key)


class Multiset:
    """A group's values of one MIN/MAX/DISTINCT aggregate, with counts (NULLs not kept).

    ``ordered`` keeps the distinct values sorted (MIN/MAX in O(1), updates O(log n));
    ``dsum`` is the sum of the distinct values (SUM/AVG(DISTINCT))."""

    __slots__ = ("counts", "sorted", "dsum", "summed")

    def __init__(self, ordered: bool, summed: bool) -> None:
        self.counts: dict[Any, int] = {}
        self.sorted: SortedList | None = SortedList() if ordered else None
        self.dsum: Any = 0
        self.summed = summed

    def add(self, value: Any, k: int) -> None:
        if value != value:  # NaN: one key, kept out of the ordered list and the sum
            value = _NAN
        counts = self.counts
        before = counts.get(value, 0)
        after = before + k
        if after:
            counts[value] = after
        else:
            del counts[value]
        if value is _NAN:
            return
        if before == 0 and after:
            if self.sorted is not None:
                self.sorted.add(value)
            if self.summed:
                self.dsum = _add(self.dsum, exact(value))
        elif before and after == 0:
            if self.sorted is not None:
                self.sorted.remove(value)
            if self.summed:
                self.dsum = _add(self.dsum, -exact(value))


def _add(a: Any, b: Any) -> Any:
    a, b = _num(a, b)
    return a + b


class _Slot:
    """One accumulator of the group state: a number (count, ring or materialized sum) or a
    :class:`Multiset`."""

    def __init__(self, kind: str, arg: Expr | None, route: str) -> None:
        self.kind = kind  # "nonnull" (count of non-NULL values), "sum", "multiset", "ordered"
        self.arg = arg
        self.route = route  # "ring" (a Vec component) or "materialized" (from delta rows)
        self.index = -1
        self.summed = False  # a multiset SUM/AVG(DISTINCT) reads: keep the sum of its values


def _reader(agg: Aggregate, slots: dict[tuple, _Slot], dialect: str = "duckdb") -> Callable[[list], Any]:
    """f(state) -> the aggregate's SQL result."""
    if agg.arg is None:
        return lambda st: st[0]
    if agg.func in ("min", "max"):
        i = slots[("ordered", agg.arg)].index
        pick = 0 if agg.func == "min" else -1

        def minmax(st):
            ms = st[i]
            s = ms.sorted
            if _NAN in ms.counts and (pick == -1 or not s):  # NaN sorts above every number (DuckDB)
                return math.nan
            return s[pick] if s else None
        return minmax
    if agg.distinct:
        i = slots[("multiset", agg.arg)].index
        if agg.func == "count":
            return lambda st: len(st[i].counts)
        if agg.func == "sum":
            return lambda st: (math.nan if _NAN in st[i].counts else plain(st[i].dsum)) if st[i].counts else None
        return lambda st: math.nan if _NAN in st[i].counts else _avg(st[i].dsum, len(st[i].counts))
    n = slots[("nonnull", agg.arg)].index
    if agg.func == "count":
        return lambda st: st[n]
    s = slots[("sum", agg.arg)].index
    if agg.func == "sum":
        return lambda st: plain(st[s]) if st[n] else None
    if dialect == "postgres":  # AVG(numeric) is a numeric in PostgreSQL
        return lambda st: numeric_avg(st[s], st[n]) if isinstance(st[s], Decimal) else _avg(st[s], st[n])
    return lambda st: _avg(st[s], st[n])


def _avg(total: Any, n: int) -> float | None:
    """AVG as DuckDB returns it: DOUBLE (also for DECIMAL input); NULL over no values."""
    if not n:
        return None
    if type(total) is FloatSum:
        return total.mean(n)
    if isinstance(total, int):
        return total / n  # exact int division to the nearest double
    return float(total) / n


def value_checks(spec: AggregateSpec, slots: list[_Slot], atoms) -> tuple[dict, dict]:
    """The value checks an aggregate view makes before anything changes: per table, the
    columns that must hold numbers (arithmetic operands, SUM) or mutually comparable values
    (MIN/MAX/DISTINCT), and the kinds fixed by constants (``HAVING max(x) > 'a'``).
    Returns ``(checks, value_kinds)``: ``{table: [(position, var, numeric)]}`` and
    ``{(table, position, numeric): kind}``."""
    # Value checks done before anything changes: arithmetic operands must be numbers,
    # MIN/MAX/DISTINCT values of one aggregate must be mutually comparable.
    numeric: set[str] = set()
    compared: set[str] = set()
    for sl in slots:
        numeric |= _arith_vars(sl.arg)
        if (sl.kind == "sum" or sl.summed) and sl.arg[0] == "var":
            numeric.add(sl.arg[1])
        if sl.kind in ("ordered", "multiset") and sl.arg[0] == "var":
            compared.add(sl.arg[1])
    checks: dict[str, list[tuple[int, str, bool]]] = {}
    for a in atoms:
        for j, v in enumerate(a.vars):
            if v in numeric or v in compared:
                checks.setdefault(a.relation, []).append((j, v, v in numeric))
    value_kinds: dict[tuple[str, int, bool], str] = {}
    # Kinds fixed before any row: text in SUM/arithmetic is rejected here, a column compared
    # with a constant (HAVING max(x) > 'a') must hold values of the constant's kind.
    need: list[tuple[str, str]] = []
    for agg in spec.aggregates:
        _static_kind(("agg", spec.aggregates.index(agg)), spec, need)
    if spec.having is not None:
        _static_kind(spec.having, spec, need)
    for var, kind in need:
        for a in atoms:
            for j, v in enumerate(a.vars):
                if v == var:
                    checks.setdefault(a.relation, []).append((j, v, False))
                    value_kinds[(a.relation, j, False)] = kind
    return checks, value_kinds


def aggregate_routes(spec: AggregateSpec, ring_ok: bool, owner, atoms) -> tuple[dict[tuple, _Slot], list[str]]:
    """The accumulators (slots) the aggregates need and, per aggregate, how it is kept."""
    slots: dict[tuple, _Slot] = {}
    routes: list[str] = []
    for agg in spec.aggregates:
        if agg.arg is None:
            routes.append("count of the join (base view)")
            continue
        if agg.func in ("min", "max"):
            slots.setdefault(("ordered", agg.arg), _Slot("ordered", agg.arg, "materialized"))
            routes.append("materialized: per-group ordered multiset of values")
            continue
        if agg.distinct:
            sl = slots.setdefault(("multiset", agg.arg), _Slot("multiset", agg.arg, "materialized"))
            sl.summed = sl.summed or agg.func in ("sum", "avg")
            routes.append("materialized: per-group multiset of distinct values")
            continue
        a = owner(agg.arg)
        route = "ring" if ring_ok and a is not None else "materialized"
        for kind in ("nonnull",) + (("sum",) if agg.func != "count" else ()):
            slots.setdefault((kind, agg.arg), _Slot(kind, agg.arg, route))
        routes.append(f"ring payload on atom {atoms[a].alias}" if route == "ring" else
                      "materialized: per-group running sums from the join's delta enumeration"
                      + (" (the expression spans several atoms)" if a is None else
                         " (the view has a materialized core)"))
    return slots, routes


def ring_weights(ring: list[_Slot], owner: Callable[[Expr], int | None], atoms) -> dict[int, Callable[[tuple], Any]]:
    """Per atom owning some ring accumulator: the function giving a row's vector payload
    (its values of the components that atom owns, zeros elsewhere)."""
    weights: dict[int, Callable[[tuple], Any]] = {}
    for a in sorted({owner(sl.arg) for sl in ring}):
        first: dict[str, int] = {}
        for j, v in enumerate(atoms[a].vars):
            if v is not None:
                first.setdefault(v, j)
        comps = [(j, sl.kind == "sum", compile_expr(sl.arg, first))
                 for j, sl in enumerate(ring) if owner(sl.arg) == a]
        weights[a] = _vec_weight(len(ring), comps)
    return weights


def check_values(checks_by_table: dict, known: dict, validated: list[tuple[str, dict[tuple, int]]]) -> dict:
    """Raise :class:`UpdateError` when a validated batch holds a value the view's aggregates
    cannot take (:func:`value_checks`); returns the value kinds the batch fixes for the first
    time (recorded when it commits)."""
    pending: dict[tuple[str, int, bool], str] = {}
    for name, changes in validated:
        checks = checks_by_table.get(name)
        if not checks:
            continue
        for row in changes:
            for j, var, numeric in checks:
                v = row[j]
                if v is None:
                    continue
                kind = value_kind(v)
                if numeric:
                    if kind != "number" or isinstance(v, bool):
                        raise UpdateError(f"column value {v!r} of {name!r} is used in arithmetic or SUM/AVG "
                                          "but is not a number; no change was applied")
                    if type(v) is int:
                        continue  # ints mix with either
                    kind = "float" if isinstance(v, float) else "decimal"
                # one column's values must be mutually summable (numeric) / comparable
                col = (name, j, numeric)
                have = known.get(col) or pending.get(col)
                if have is None:
                    pending[col] = kind
                elif have != kind:
                    raise UpdateError(f"value {v!r} of {name!r} ({kind}) cannot be aggregated with earlier "
                                      f"{have} values of the same column; no change was applied")
    return pending


# -- the view ---------------------------------------------------------------------------
class AggregateView:
    """An incrementally maintained ``GROUP BY`` / aggregate view (the :class:`ivm_layer.View`
    protocol) over a join view it builds and drives through the engine's public operations
    (``validate``, ``prepare_validated``, ``commit``). ``make_plan`` plans a join query (the
    compiler passes :func:`ivm_layer.planner.plan`): the view picks the join's output columns
    and ring payloads, the planner the tree."""

    def __init__(self, gcq: GCQ, sql: str, make_plan: Callable[[GCQ], Any]):
        spec: AggregateSpec = gcq.aggregate
        self.sql = sql
        self.spec = spec
        self.columns: list[str] = list(spec.columns)
        self._distinct = gcq.distinct
        join = replace(gcq, aggregate=None, distinct=False)
        atoms = gcq.atoms

        def owner(e: Expr) -> int | None:
            vs = expr_vars(e)
            for i, a in enumerate(atoms):
                if vs <= a.varset:
                    return i
            return None

        for ring_ok in (True, False):  # a view with a materialized core takes no ring payloads
            slots, routes = aggregate_routes(spec, ring_ok, owner, atoms)
            extras = sorted({v for sl in slots.values() if sl.route == "materialized" for v in expr_vars(sl.arg)}
                            - set(spec.group_vars))
            base_gcq = join if not extras else replace(join, output=list(join.output) + extras,
                                                       columns=list(join.columns) + extras)
            base_plan = make_plan(base_gcq)
            if base_plan.core is None or not any(sl.route == "ring" for sl in slots.values()):
                break
        self.routes = routes
        for i, slot in enumerate(slots.values(), start=1):
            slot.index = i
        self._slots = list(slots.values())
        self._nslots = len(self._slots) + 1
        self._ng = len(spec.group_vars)
        # Ring accumulators: components of one vector payload carried by the base view's
        # T-representation; the atom owning a component puts its value there.
        ring = [sl for sl in self._slots if sl.route == "ring"]
        self._ring_index = [sl.index for sl in ring]
        weights = ring_weights(ring, owner, atoms)
        # ``plan.gcq`` is the aggregate query (``gcq.aggregate`` tells callers this is a grouped
        # view); the join it maintains is ``self._base.plan``.
        self.plan = replace(base_plan, gcq=gcq)
        self._base = View(base_plan, sql, weights=weights)
        pos = {v: i for i, v in enumerate(base_gcq.output)}
        # Materialized accumulators read the base view's change rows.
        self._mat: list[tuple[int, str, Callable[[tuple], Any]]] = [
            (sl.index, sl.kind, compile_expr(sl.arg, pos)) for sl in self._slots if sl.route == "materialized"]
        self._checks, self._value_kinds = value_checks(spec, self._slots, atoms)
        self._readers = [_reader(agg, slots, getattr(spec, "dialect", "duckdb")) for agg in spec.aggregates]
        readers = self._readers
        self._having = (compile_expr(spec.having, {}, aggs=lambda j, gs: readers[j](gs[1]),
                                     groups=lambda j, gs: gs[0][j]) if spec.having is not None else None)
        self._items = spec.items
        self._state: dict[tuple, list] = {}
        self._group_rows: dict[tuple, tuple] = {}  # group -> its visible output row
        self._rows: dict[tuple, int] = {}  # output row -> multiplicity
        self._total = 0
        self._version = 0
        self._subscribers: list[Callable[[Change], Any]] = []
        if not spec.grouped:  # a global aggregate has its row even over no input
            self._state[()] = self._new_state()
            self._refresh([()])

    # -- introspection ------------------------------------------------------------------
    @property
    def tables(self) -> list[str]:
        return self._base.tables

    @property
    def query_class(self) -> str:
        return self._base.query_class

    def explain(self) -> str:
        lines = [f"view columns: {', '.join(self.columns)}",
                 f"aggregate view: GROUP BY {', '.join(self.spec.group_vars) or '() (one global row)'}"]
        for agg, route in zip(self.spec.aggregates, self.routes):
            lines.append(f"  {agg}: {route}")
        if self.spec.having is not None:
            lines.append(f"  HAVING {expr_str(self.spec.having)} (evaluated per changed group)")
        if self._distinct:
            lines.append("  DISTINCT: set semantics over the output rows")
        lines.append(f"aggregate state: {len(self._state)} groups; ring payload: "
                     + (f"a vector of {len(self._ring_index)} sums/counts per T-representation entry"
                        if self._ring_index else "none (plain counts)"))
        lines.append("join (base view, multiplicities = COUNT(*) per group):")
        lines.append(self._base.explain())
        return "\n".join(lines)

    def stats(self) -> dict[str, int]:
        """The join's :meth:`View.stats` plus ``groups`` (per-group aggregate states) and
        ``multiset_values`` (distinct values held by MIN/MAX/DISTINCT multisets)."""
        out = self._base.stats()
        out["groups"] = len(self._state)
        out["multiset_values"] = sum(len(x.counts) for st in self._state.values() for x in st
                                     if isinstance(x, Multiset))
        out["stored"] += out["groups"] + out["multiset_values"]
        return out

    def __repr__(self) -> str:
        return f"<ivm_layer.AggregateView {self.query_class} columns={self.columns} rows={len(self)}>"

    # -- reading ------------------------------------------------------------------------
    def rows(self) -> Iterator[tuple[tuple, int]]:
        """``(row, multiplicity)`` of the current result (one row per visible group)."""
        v0 = self._version
        for row, k in self._rows.items():
            yield row, (1 if self._distinct else k)
            if self._version != v0:
                raise ConcurrentModificationError(
                    "the view was updated while this enumeration was open; take list(view.rows()) first")

    def rows_batches(self, size: int = 1024) -> Iterator[list[tuple[tuple, int]]]:
        """:meth:`rows` as lists of about ``size`` ready ``(row, multiplicity)`` pairs."""
        items = ((row, 1) for row in self._rows) if self._distinct else self._rows.items()
        return _chunks(items, size, self)

    def contains(self, row: Iterable[Any]) -> int:
        """The multiplicity of ``row`` in the result (0 if absent), a dict lookup."""
        from ..errors import IVMError
        from .values import canonical_row

        if not isinstance(row, tuple):
            if isinstance(row, (str, bytes)) or not isinstance(row, Iterable):
                raise IVMError(f"contains() takes a row tuple of {len(self.columns)} values, got {row!r}")
            row = tuple(row)
        if len(row) != len(self.columns):
            raise IVMError(f"contains() takes a row of {len(self.columns)} values, got {len(row)}")
        try:
            k = self._rows.get(canonical_row(row), 0)
        except TypeError:
            raise IVMError(f"row {row!r} has an unhashable value") from None
        return (1 if k else 0) if self._distinct else k

    @property
    def version(self) -> int:
        return self._version

    def __iter__(self) -> Iterator[tuple]:
        for row, k in self.rows():
            for _ in range(k):
                yield row

    def __len__(self) -> int:
        return len(self._rows) if self._distinct else self._total

    # -- writing ------------------------------------------------------------------------
    def insert(self, table: str, row: Iterable[Any]) -> None:
        """One row, +1: the join's update (its bound: :meth:`explain`) plus O(1) per changed
        join row and group (O(log n) for MIN/MAX and DISTINCT aggregates)."""
        self.apply({table: [(row, 1)]})

    def delete(self, table: str, row: Iterable[Any]) -> None:
        """One row, −1 (UpdateError if absent, nothing changed). Cost: as :meth:`insert`."""
        self.apply({table: [(row, -1)]})

    def apply(self, batch: Mapping[str, Iterable[tuple[Iterable[Any], int]]]) -> None:
        """A batch, all or nothing: the join's update, then O(1) per changed join row and O(1)
        per changed group to recompute its output row (:meth:`explain`)."""
        self._apply(batch)

    def diff(self, batch: Mapping[str, Iterable[tuple[Iterable[Any], int]]]) -> Change:
        """:meth:`apply`, returning the view's consolidated change (one entry per changed group row).
        Cost: as :meth:`apply`."""
        return self._apply(batch)

    def subscribe(self, callback: Callable[[Change], Any]) -> Callable[[], None]:
        """Call ``callback(change)`` after every update that changes the view (see
        :meth:`ivm_layer.engine.view.View.subscribe`); returns an unsubscribe function. O(1)."""
        return subscribe_to(self._subscribers, callback)

    @property
    def subscribers(self) -> tuple[Callable[[Change], Any], ...]:
        """The callbacks :meth:`subscribe` registered, in order."""
        return tuple(self._subscribers)

    def base_rows(self, table: str) -> Mapping[tuple, int]:
        """The rows of input table ``table`` as the view holds them (see :meth:`View.base_rows`)."""
        return self._base.base_rows(table)

    def lookup(self, **inputs: Any) -> Iterator[tuple[tuple, int]]:
        return self._base.lookup(**inputs)

    # -- internals ----------------------------------------------------------------------
    def _new_state(self) -> list:
        st: list = [0] * self._nslots
        for sl in self._slots:
            if sl.kind in ("ordered", "multiset"):
                st[sl.index] = Multiset(sl.kind == "ordered", sl.summed)
        return st

    def _check_values(self, validated: list[tuple[str, dict[tuple, int]]]) -> dict:
        return check_values(self._checks, self._value_kinds, validated)

    def prepare(self, batch: Mapping) -> Prepared:
        """Phase one of a two-phase update (see :meth:`View.prepare`): validate and compute;
        raises :class:`UpdateError`, changes nothing. Cost: the join's ``prepare`` plus O(batch)
        for the aggregates' value checks."""
        base = self._base
        validated = base.validate(batch)  # raises before anything changes
        kinds = self._check_values(validated)
        with localcontext(EXACT):  # DECIMAL(38, s) sums need more than 28 digits
            prepared = base.prepare_validated(validated)
        return Prepared(self, self._version, (kinds, prepared))

    def commit(self, prepared: Prepared, want_change: bool = False, notify: bool = True) -> Change:
        """Phase two: apply a prepared batch (cannot fail); returns the view's change and, unless
        ``notify`` is False (see :meth:`View.commit`), tells the subscribers. Cost: the join's
        commit plus O(1) per changed join row and group (MIN/MAX, DISTINCT: O(log n))."""
        if prepared.view is not self or prepared.version != self._version:
            raise UpdateError("this prepared batch is stale: the view changed since prepare(); "
                              "prepare it again")
        kinds, base_prepared = prepared.steps
        change = self._commit_steps(kinds, base_prepared)
        if notify and change and self._subscribers:
            tell(self._subscribers, change)
        return change

    def _apply(self, batch: Mapping) -> Change:
        return self.commit(self.prepare(batch))

    def _commit_steps(self, kinds: dict, prepared: Prepared) -> Change:
        with localcontext(EXACT):  # DECIMAL(38, s) sums need more than 28 digits
            return self._commit_exact(kinds, prepared)

    def _commit_exact(self, kinds: dict, prepared: Prepared) -> Change:
        base = self._base
        self._value_kinds.update(kinds)
        self._version += 1
        state = self._state
        ng = self._ng
        touched: dict[tuple, None] = {}
        new_state = self._new_state
        mat = self._mat
        ring = self._ring_index
        for row, d in base.commit(prepared, want_change=True) or ():
            g = row[:ng]
            st = state.get(g)
            if st is None:
                st = state[g] = new_state()
            touched[g] = None
            if type(d) is Vec:
                k = d.c
                for i, x in zip(ring, d.v):
                    if x:
                        st[i] += x
            else:
                k = d
            st[0] += k
            if not k:
                continue
            for i, kind, fn in mat:
                v = fn(row)
                if v is None:
                    continue
                if kind == "nonnull":
                    st[i] += k
                elif kind == "sum":
                    st[i] = _add(st[i], k * exact(v))
                else:
                    st[i].add(v, k)
        return self._refresh(touched)

    def _refresh(self, groups: Iterable[tuple]) -> Change:
        """Recompute the output rows of the changed groups; return the consolidated change."""
        delta: dict[tuple, int] = {}
        state = self._state
        grouped = self.spec.grouped
        for g in groups:
            st = state[g]
            old = self._group_rows.pop(g, None)
            new = None
            if st[0] or not grouped:
                new = self._row(g, st)
                if self._having is not None and self._having((g, st)) is not True:
                    new = None
            elif grouped:
                del state[g]
            if old == new:
                if new is not None:
                    self._group_rows[g] = new
                continue
            if old is not None:
                delta[old] = delta.get(old, 0) - 1
            if new is not None:
                self._group_rows[g] = new
                delta[new] = delta.get(new, 0) + 1
        rows = self._rows
        out: Change = []
        for row, k in delta.items():
            if not k:
                continue
            before = rows.get(row, 0)
            after = before + k
            if after:
                rows[row] = after
            else:
                del rows[row]
            self._total += k
            if self._distinct:
                if before == 0:
                    out.append((row, 1))
                elif after == 0:
                    out.append((row, -1))
            else:
                out.append((row, k))
        return out

    def _row(self, g: tuple, st: list) -> tuple:
        readers = self._readers
        return tuple(g[i] if kind == "group" else readers[i](st) for kind, i in self._items)


def _vec_weight(width: int, comps: list[tuple[int, bool, Callable[[tuple], Any]]]) -> Callable[[tuple], Vec]:
    """The payload of one row of an atom owning ring components: ``(1, …)`` with, at each
    owned position, the value (SUM; NULL adds 0) or 1 if the value is not NULL (COUNT)."""
    def weight(row):
        v = [0] * width
        for j, is_sum, fn in comps:
            x = fn(row)
            if x is not None:
                v[j] = exact(x) if is_sum else 1
        return Vec(1, tuple(v))
    return weight
