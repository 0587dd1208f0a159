"""Nested views: a view whose FROM reads the change stream of other views (:class:`NestedView`).

A subquery in FROM that is not select–project–join (``GROUP BY``, ``DISTINCT``, an outer
join…) is maintained as its own incremental view; each of its changes ``(row, ±k)`` is an
update of a derived relation of the outer view. An update goes to the nested views reading
its tables first, then the outer view takes the base-table part and the derived changes
together. Cost: the nested views' own costs plus the outer view's cost per derived change;
memory: the nested views' state plus the outer view's copy of the derived rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..errors import UpdateError
from .composite import CompositeView
from .view import Change, Prepared, base_rows_of, combined_stats, tell


class NestedView(CompositeView):
    """An outer view fed by nested views through derived relations (View API)."""

    made_of = "nested views"

    def __init__(self, nested: list[tuple[str, Any]], outer: Any, sql: str = ""):
        self.sql = sql
        self.nested = nested  # [(relation, view)]
        self.outer = outer
        self.columns = list(outer.columns)
        self._relations = {r for r, _ in nested}
        self._version = 0
        self._subscribers: list[Callable[[Change], Any]] = []

    @property
    def tables(self) -> list[str]:
        out: list[str] = []
        for _, v in self.nested:
            out += [t for t in v.tables if t not in out]
        out += [t for t in self.outer.tables if t not in out and t not in self._relations]
        return out


    @property
    def query_class(self) -> str:
        return self.outer.query_class

    def explain(self) -> str:
        how = ("nested views feed derived relations of the outer view (each nested change is one "
               "update of the outer view; memory: the nested views plus the derived rows):")
        lines = [f"view columns: {', '.join(self.columns)}", how, "outer view:"]
        lines.extend("    " + line for line in self.outer.explain().splitlines())
        for rel, v in self.nested:
            lines.append(f"nested view {rel}:")
            lines.extend("    " + line for line in v.explain().splitlines())
        return "\n".join(lines)

    def stats(self) -> dict[str, int]:
        return combined_stats([self.outer] + [v for _, v in self.nested])

    def base_rows(self, table: str) -> Mapping[tuple, int]:
        """The rows of input table ``table`` as the view holds them (see :meth:`View.base_rows`)."""
        return base_rows_of([v for _, v in self.nested] + [self.outer], table)

    def __repr__(self) -> str:
        return f"<ivm_layer.NestedView columns={self.columns} rows={len(self)}>"

    def rows(self) -> Iterator[tuple[tuple, int]]:
        return self.outer.rows()

    def __iter__(self) -> Iterator[tuple]:
        return iter(self.outer)

    def __len__(self) -> int:
        return len(self.outer)

    def lookup(self, **inputs: Any) -> Iterator[tuple[tuple, int]]:
        return self.outer.lookup(**inputs)

    def prepare(self, batch: Mapping) -> Prepared:
        """Phase one: prepare the nested views and validate the outer view's base-table part.
        Cost: their own ``prepare``."""
        parts = self.split_batch(batch)
        steps = self.prepare_each([v for _, v in self.nested], parts)
        outer_part = {t: ch for t, ch in parts.items() if t in self.outer.tables}
        if outer_part:
            self.outer.prepare(outer_part)  # validation only: the real batch adds the derived changes
        return Prepared(self, self._version, (steps, outer_part))

    def commit(self, prepared: Prepared, want_change: bool = False, notify: bool = True) -> Change | None:
        """Phase two: commit the nested views, then the outer view with their changes. The outer
        batch's base part was validated in phase one and the derived rows are the nested views'
        own consistent changes, so this does not fail. Cost: the nested views' commits plus the
        outer view's update by their changes."""
        if prepared.view is not self or prepared.version != self._version:
            raise UpdateError("this prepared batch is stale: the view changed since prepare(); prepare it again")
        self._version += 1
        steps, outer_part = prepared.steps
        batch = dict(outer_part)
        for (rel, v), p in zip(self.nested, steps):
            if p is None:
                continue
            change = v.commit(p, want_change=True)
            if change:
                batch[rel] = list(change)
        if not batch:
            return [] if want_change else None
        change = self.outer.commit(self.outer.prepare(batch), want_change=True) or []
        if notify and change and self._subscribers:
            tell(self._subscribers, change)
        return change if want_change else None
