"""Views with constant inputs (:class:`ConstantInputs`): ``SELECT 1``, ``VALUES`` lists and
set-returning functions of constants (``generate_series(1, 10)``) in FROM.

The SQL front end (:mod:`ivm_layer.sql.constants`) replaces each constant input by a table
``__const_<n>``; this wrapper loads its rows into the compiled view once, when it is built, and
hides those tables: they are not tables of the view (an update naming one is refused), they never
change, and they cost nothing per update. A view whose only inputs are constants never changes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from ..identifiers import resolve
from ..errors import UpdateError
from .composite import CompositeView
from .view import Change, Prepared, tell


class ConstantInputs(CompositeView):
    """A view (any kind) some of whose inputs are constant tables loaded once (View API)."""

    made_of = "constant inputs"

    def __init__(self, inner: Any, tables: Iterable[Any], sql: str = ""):
        self.sql = sql
        self.inner = inner
        self.constants = list(tables)
        self._names = {t.name for t in self.constants}
        self.columns = list(inner.columns)
        self._subscribers: list[Callable[[Change], Any]] = []
        load = {t.name: list(Counter(t.rows).items()) for t in self.constants if t.rows}
        if load:
            inner.apply(load)

    # -- introspection ------------------------------------------------------------------
    @property
    def tables(self) -> list[str]:
        return [t for t in self.inner.tables if t not in self._names]

    @property
    def branches(self) -> list:
        return [self.inner]

    @property
    def plan(self):
        return self.inner.plan

    @property
    def positions(self):
        return getattr(self.inner, "positions", None)

    @property
    def query_class(self) -> str:
        return self.inner.query_class

    def explain(self) -> str:
        lines = ["constant inputs (loaded once, never updated, no cost per update): "
                 + "; ".join(f"{t.name} = {t.text} ({len(t.rows)} rows)" for t in self.constants)]
        lines.extend(self.inner.explain().splitlines())
        return "\n".join(lines)

    def stats(self) -> dict[str, int]:
        return self.inner.stats()

    def base_rows(self, table: str) -> Mapping[tuple, int]:
        if resolve(table, self._names) in self._names:
            raise UpdateError(f"unknown table {table!r}")
        return self.inner.base_rows(table)

    def __repr__(self) -> str:
        return f"<ivm_layer.ConstantInputs columns={self.columns} rows={len(self)}>"

    # -- reading ------------------------------------------------------------------------
    def rows(self) -> Iterator[tuple[tuple, int]]:
        return self.inner.rows()

    def __iter__(self) -> Iterator[tuple]:
        return iter(self.inner)

    def __len__(self) -> int:
        return len(self.inner)

    def contains(self, row: Iterable[Any]) -> int:
        return self.inner.contains(row)

    def lookup(self, **inputs: Any):
        return self.inner.lookup(**inputs)

    @property
    def params(self):
        return getattr(self.inner, "params", None)

    # -- writing ------------------------------------------------------------------------
    def prepare(self, batch: Mapping) -> Prepared:
        """Phase one: the inner view's prepare (raises, changes nothing). Cost: the inner view's."""
        parts = self.split_batch(batch)  # a constant table is not a table of the view: refused
        return Prepared(self, None, self.inner.prepare(parts) if parts else None)

    def commit(self, prepared: Prepared, want_change: bool = False, notify: bool = True) -> Change | None:
        """Phase two (cannot fail): the inner view's commit, at its cost; ``notify=False``
        leaves the subscribers to the caller."""
        if prepared.view is not self:
            raise UpdateError("this prepared batch belongs to another view")
        change = self.inner.commit(prepared.steps, want_change=True) if prepared.steps is not None else []
        if notify and change and self._subscribers:
            tell(self._subscribers, change)
        return change if want_change else None
