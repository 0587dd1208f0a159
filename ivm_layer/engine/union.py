"""Set operations over views: ``UNION [ALL]``, ``EXCEPT [ALL]``, ``INTERSECT [ALL]``.

:class:`SetOpView` holds two branch views (each any view object: a join, an aggregate, a
projection or another set operation) and, per output row, its multiplicity in each branch.
The output multiplicity is a function of the two counts (UNION ALL: a + b; UNION: 1 if
a + b > 0; EXCEPT ALL: max(a − b, 0); EXCEPT: 1 if a > 0 and b = 0; INTERSECT ALL:
min(a, b); INTERSECT: 1 if both > 0). Cost per update: the branches' own costs plus O(1) per
changed branch row; memory: two counts per distinct row. A batch goes to each branch with
the tables that branch reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..errors import ConcurrentModificationError, UpdateError
from .composite import CompositeView
from .view import Change, Prepared, combined_stats, tell

_MULT: dict[tuple[str, bool], Callable[[int, int], int]] = {
    ("union", True): lambda a, b: a + b,
    ("union", False): lambda a, b: 1 if a + b > 0 else 0,
    ("except", True): lambda a, b: max(a - b, 0),
    ("except", False): lambda a, b: 1 if a > 0 and b == 0 else 0,
    ("intersect", True): lambda a, b: min(a, b),
    ("intersect", False): lambda a, b: 1 if a > 0 and b > 0 else 0,
}


class SetOpView(CompositeView):
    """``left <kind> [ALL] right`` maintained from the branches' changes (View API)."""

    made_of = "a set operation"

    def __init__(self, kind: str, all_: bool, left: Any, right: Any, columns: list[str], sql: str = ""):
        self.sql = sql
        self.kind = kind
        self.all = all_
        self.branches = [left, right]
        self.columns = list(columns)
        self._mult = _MULT[(kind, all_)]
        self._counts: dict[tuple, list[int]] = {}  # row -> [count in left, count in right]
        self._total = 0
        self._size = 0  # rows with a nonzero output multiplicity
        self._version = 0
        self._subscribers: list[Callable[[Change], Any]] = []

    # -- introspection ------------------------------------------------------------------


    @property
    def query_class(self) -> str:
        classes = [b.query_class for b in self.branches]
        return classes[0] if len(set(classes)) == 1 else " + ".join(classes)

    def explain(self) -> str:
        op = f"{self.kind.upper()}{' ALL' if self.all else ''}"
        how = (f"{op} of two views: each update goes to the branches reading its tables; per distinct "
               f"row the engine keeps its count in each branch ({len(self._counts)} rows): O(1) per changed "
               "branch row, memory grows with the branches' outputs")
        lines = [f"view columns: {', '.join(self.columns)}", how]
        for i, b in enumerate(self.branches):
            lines.append(f"branch {i + 1}:")
            lines.extend("    " + line for line in b.explain().splitlines())
        return "\n".join(lines)

    def stats(self) -> dict[str, int]:
        return combined_stats(self.branches, len(self._counts))


    def __repr__(self) -> str:
        return f"<ivm_layer.SetOpView {self.kind} columns={self.columns} rows={len(self)}>"

    # -- reading ------------------------------------------------------------------------
    def rows(self) -> Iterator[tuple[tuple, int]]:
        v0 = self._version
        mult = self._mult
        for row, (a, b) in self._counts.items():
            k = mult(a, b)
            if k:
                yield row, k
            if self._version != v0:
                raise ConcurrentModificationError(
                    "the view was updated while this enumeration was open; take list(view.rows()) first")

    def __len__(self) -> int:
        return self._total

    # -- writing ------------------------------------------------------------------------
    def prepare(self, batch: Mapping) -> Prepared:
        """Phase one: split the batch by branch and prepare each branch (raises, changes nothing).
        Cost: the branches' own ``prepare``."""
        parts = self.split_batch(batch)
        steps = self.prepare_each(self.branches, parts)
        return Prepared(self, self._version, steps)

    def commit(self, prepared: Prepared, want_change: bool = False, notify: bool = True) -> Change | None:
        """Phase two: commit every branch and combine their changes (cannot fail). Cost: the
        branches' commits plus O(1) per changed branch row."""
        if prepared.view is not self or prepared.version != self._version:
            raise UpdateError("this prepared batch is stale: the view changed since prepare(); prepare it again")
        self._version += 1
        counts, mult = self._counts, self._mult
        before: dict[tuple, int] = {}
        for i, (b, p) in enumerate(zip(self.branches, prepared.steps)):
            if p is None:
                continue
            for row, k in b.commit(p, want_change=True) or ():
                c = counts.get(row)
                if c is None:
                    c = counts[row] = [0, 0]
                if row not in before:
                    before[row] = mult(c[0], c[1])
                c[i] += k
        out: Change = []
        for row, old in before.items():
            c = counts[row]
            new = mult(c[0], c[1])
            if not c[0] and not c[1]:
                del counts[row]
            if new != old:
                out.append((row, new - old))
                self._total += new - old
        if notify and out and self._subscribers:
            tell(self._subscribers, out)
        return out if want_change else None
