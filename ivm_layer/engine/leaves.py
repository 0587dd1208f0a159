"""From table rows to leaf tuples: projection on used columns, SQL NULL semantics, filters.

A row contributes to an atom only if every *strict* variable (one that joins, or that a
predicate reads) is non-NULL, repeated variables agree (``a.x = a.y``), and the atom's
filters hold. Other rows stay in the table store (so a later delete validates) but never
propagate (ALGORITHMS.md §9).
"""

from __future__ import annotations

import datetime
import decimal
import fractions
from typing import Any, Callable

from ..errors import UpdateError
from ..query import GCQ
from .predicates import compile_filter, projector
from .values import NAN

_NUMERIC = (int, float, decimal.Decimal, fractions.Fraction)
_TEMPORAL = frozenset({"timestamp", "timestamptz", "date"})
# Kinds whose values Python orders like the database does (anything else cannot be compared).
_ORDERABLE = frozenset({"number", "text", "timestamp", "timestamptz", "date", "time", "interval", "bytes"})


_KIND_BY_TYPE: dict[type, str] = {int: "number", float: "number", bool: "number",
                                   decimal.Decimal: "number", str: "text", type(NAN): "number"}


def value_kind(v: Any) -> str:
    """The comparison domain of a value: values of different kinds cannot be ordered together."""
    k = _KIND_BY_TYPE.get(type(v))
    if k is not None:
        return k
    if isinstance(v, _NUMERIC):  # bool is an int
        return "number"
    if isinstance(v, str):
        return "text"
    if isinstance(v, datetime.datetime):
        return "timestamptz" if v.tzinfo is not None else "timestamp"
    if isinstance(v, datetime.date):
        return "date"
    if isinstance(v, datetime.time):
        return "time"
    if isinstance(v, datetime.timedelta):
        return "interval"
    return type(v).__name__


class LeafExtractor:
    """Turns rows of one table into tuples of one atom's leaf."""

    __slots__ = ("atom", "alias", "arity", "extract", "eqs", "strict", "filter", "ordered", "kinds", "temporal",
                 "positions")

    def __init__(self, gcq: GCQ, atom: int, order: list[str], strict: set[str],
                 filters, kinds: dict[str, str], ordered_vars: set[str], temporal: set[str] = frozenset(),
                 classes: "VarClasses | None" = None):
        a = gcq.atoms[atom]
        self.atom = atom
        self.alias = a.alias
        self.arity = len(a.vars)
        first: dict[str, int] = {}
        eqs = []
        for j, v in enumerate(a.vars):
            if v is None:
                continue
            if v in first:
                eqs.append((first[v], j))
            else:
                first[v] = j
        pos_in_row = {v: first[v] for v in order}
        self.extract = projector(order, pos_in_row)
        self.positions = [first[v] for v in order]  # leaf tuple position -> row position
        self.eqs = eqs
        self.strict = [i for i, v in enumerate(order) if v in strict]
        leaf_pos = {v: i for i, v in enumerate(order)}
        self.filter: Callable[[tuple], bool] | None = compile_filter(filters, leaf_pos)
        # (position, variable, its comparison class): variables compared with each other share
        # one class, so their values must be of one kind.
        find = classes.find if classes is not None else (lambda v: v)
        self.ordered = [(i, v, find(v)) for i, v in enumerate(order) if v in ordered_vars]
        self.kinds = kinds  # shared across leaves: comparison class -> kind, once known
        self.temporal = temporal

    def tuple_of(self, row: tuple) -> tuple | None:
        """The leaf tuple of ``row``, or None if the row can never contribute."""
        for i, j in self.eqs:
            a = row[i]
            if a is None or a != row[j]:
                return None
        t = self.extract(row)
        for i in self.strict:
            if t[i] is None:
                return None
        f = self.filter
        if f is not None:
            try:
                if not f(t):
                    return None
            except TypeError:  # e.g. text where a filter adds a number: refuse before any change
                raise UpdateError(f"row {row!r} of atom {self.alias}: a value has the wrong type for the "
                                  "view's conditions; no change was applied") from None
        return t

    def leaf_tuple(self, row: tuple, pending: dict[str, str]) -> tuple | None:
        """:meth:`tuple_of` for an update being validated: value kinds are checked (raising
        UpdateError, recording first-seen kinds in ``pending``) before any filter compares them."""
        for i, j in self.eqs:
            a = row[i]
            if a is None or a != row[j]:
                return None
        t = self.extract(row)
        for i in self.strict:
            if t[i] is None:
                return None
        if self.ordered:
            self.check_kinds(t, pending)
        f = self.filter
        if f is not None:
            try:
                if not f(t):
                    return None
            except TypeError as e:
                raise UpdateError(f"row {row!r} of {self.alias}: a filter cannot compare its values ({e}); "
                                  "no change was applied") from None
        return t

    def check_kinds(self, t: tuple, pending: dict[str, str]) -> None:
        """Raise UpdateError if a compared value's kind differs from what the variable holds."""
        kinds = self.kinds
        by_type = _KIND_BY_TYPE
        temporal = self.temporal
        for i, v, c in self.ordered:
            x = t[i]
            if x is None:
                continue
            if type(x) is int and v not in temporal and kinds.get(c) == "number":
                continue  # the common case, decided in one step
            k = by_type.get(type(x)) or value_kind(x)
            if v in temporal and k not in _TEMPORAL:
                raise UpdateError(
                    f"value {x!r} ({k}) of {v} (atom {self.alias}) gets an interval offset and must be a "
                    "timestamp or date; no change was applied")
            if k not in _ORDERABLE:
                raise UpdateError(f"value {x!r} of {v} (atom {self.alias}) is a {k}, which cannot be "
                                  "compared; no change was applied")
            if k == "number" and (x is NAN or type(x) is decimal.Decimal):
                # Python cannot order a Decimal against NaN: one class holds either, not both.
                sub = "NaN" if x is NAN else "DECIMAL"
                other = "DECIMAL" if x is NAN else "NaN"
                if kinds.get((c, other)) or pending.get((c, other)):
                    raise UpdateError(f"value {x!r} of {v} (atom {self.alias}) cannot be ordered against "
                                      f"the {other} values it is compared with; no change was applied")
                pending[(c, sub)] = sub
            want = kinds.get(c) or pending.get(c)
            if want is None:
                pending[c] = k
            elif want != k:
                raise UpdateError(
                    f"value {x!r} ({k}) cannot be compared with the {want} values of {v} "
                    f"(atom {self.alias}); no change was applied")


class VarClasses:
    """Union-find over variables compared with each other (``r.a < s.d`` puts a and d in one
    class): their values are ordered together, so they must be of one kind. A view and its
    materialized core share one instance."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, v: str) -> str:
        parent = self.parent
        while parent.get(v, v) != v:
            v = parent[v]
        return v

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            lo, hi = sorted((ra, rb))
            self.parent[hi] = lo

    def add_predicates(self, gcq: GCQ) -> None:
        for p in gcq.predicates:
            if p.right is not None and p.op in ("<", "<=", ">", ">=", "=", "<>"):
                self.union(p.left, p.right)


def ordered_variable_kinds(gcq: GCQ) -> tuple[dict[str, str | None], set[str], set[str]]:
    """Variables read by comparisons, with the kind their constants fix (None = set by data);
    the strict variables (a NULL there means the row can never contribute); and the variables
    that must hold timestamps or dates (they get interval offsets)."""
    kinds: dict[str, str | None] = {}
    temporal: set[str] = set()
    strict: set[str] = set()
    for p in gcq.predicates:
        if p.op in ("is null", "is not null", "never", "expr"):
            continue
        strict |= p.vars
        if p.op in ("like", "not like", "ilike", "not ilike"):
            kinds[p.left] = kinds.get(p.left) or "text"
            continue
        if p.op in ("in", "not in"):
            kinds.setdefault(p.left, None)
            known = [v for v in p.offset if v is not None]
            if known and kinds[p.left] is None:
                kinds[p.left] = value_kind(known[0])
            continue
        for v in p.vars:
            kinds.setdefault(v, None)
        if p.right is None and p.offset is not None:
            kinds[p.left] = value_kind(p.offset)
        elif isinstance(p.offset, datetime.timedelta) and p.offset:
            temporal |= p.vars
        elif p.offset and isinstance(p.offset, _NUMERIC) and not isinstance(p.offset, bool):
            kinds[p.left] = kinds[p.right] = "number"
    seen: dict[str, int] = {}
    for a in gcq.atoms:
        for v in a.varset:
            seen[v] = seen.get(v, 0) + 1
        counted: set[str] = set()
        for v in a.vars:
            if v is not None:
                if v in counted:
                    strict.add(v)
                counted.add(v)
    strict |= {v for v, k in seen.items() if k >= 2}
    return kinds, strict, temporal


def bad_row(table: str, row: Any, arity: int) -> UpdateError:
    return UpdateError(f"row {row!r} for table {table!r} must be a tuple of {arity} values; no change was applied")
