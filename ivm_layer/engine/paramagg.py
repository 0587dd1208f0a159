"""Parameterized aggregates (paper 004 with ``GROUP BY``): ``SELECT r.b, count(*) FROM r
WHERE r.a = $a GROUP BY r.b`` is maintained as the aggregate grouped by the inputs too
(``GROUP BY r.b, r.a``), an ordinary :class:`~ivm_layer.engine.aggregates.AggregateView`, and
an answer map ``{input tuple: {row: multiplicity}}`` kept from its change. So

* an update costs the aggregate view's own update (its EXPLAIN) plus O(1) per changed group;
* ``lookup(a=…)`` is one dict probe, then O(1) per row. An input value with no group gives
  what SQL gives: nothing for a grouped query, the aggregate over no rows (``count(*)`` = 0,
  ``sum`` NULL, subject to HAVING) for a global one;
* memory: the groups (one per input value and group key).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..errors import ConcurrentModificationError
from .answers import fold_change
from .inputs import bind_inputs


class ParamAggregateView:
    """An aggregate view with input parameters (see the module docstring). ``inner`` is the
    aggregate grouped by the inputs as well, whose last ``len(params)`` columns are the
    inputs; ``empty``: the rows of the query over no input (a global aggregate's one row)."""

    def __init__(self, inner: Any, params: list[str], empty: list[tuple[tuple, int]], sql: str):
        self._inner = inner
        self.params = list(params)
        self.sql = sql
        n = len(self.params)
        self._n = n
        self.columns = list(inner.columns[:-n])
        self._empty = list(empty)
        self.cqap0 = False
        self._answers: dict[tuple, dict[tuple, int]] = {}
        self._on_change(list(inner.rows()))
        inner.subscribe(self._on_change)

    # -- delegated: updates, introspection -------------------------------------------------
    def __getattr__(self, name: str) -> Any:  # insert / delete / apply / diff / prepare / commit / …
        return getattr(self._inner, name)

    @property
    def plan(self):
        return self._inner.plan

    def explain(self) -> str:
        return "\n".join([
            f"parameters: {', '.join(self.params)}",
            "parameter class: aggregate per input value — the aggregate grouped by the inputs as well, "
            "and an answer map {inputs → rows} kept from its change: lookup one O(1) probe then O(1) per row "
            "(an input with no rows: " + ("the aggregate over no rows" if self._empty else "empty")
            + "), update cost the aggregate's (below) plus O(1) per changed group",
            self._inner.explain()])

    def __repr__(self) -> str:
        return f"<ivm_layer.ParamAggregateView params={self.params} columns={self.columns}>"

    # -- reading -----------------------------------------------------------------------------
    def lookup(self, *args: Any, **kwargs: Any) -> Iterator[tuple[tuple, int]]:
        """``(row over columns, multiplicity)`` for these inputs; a NULL input matches nothing
        (a global aggregate then gives its row over no input, as SQL does)."""
        key = bind_inputs(self.params, args, kwargs)
        answer = None if any(v is None for v in key) else self._answers.get(key)
        if not answer:
            return iter(list(self._empty))
        return self._iter(answer)

    def _iter(self, answer: dict) -> Iterator[tuple[tuple, int]]:
        v0 = self._inner.version
        for item in answer.items():
            yield item
            if self._inner.version != v0:
                raise ConcurrentModificationError(
                    "the view was updated while this lookup was open; take list(view.lookup(...)) first")

    def rows(self) -> Iterator[tuple[tuple, int]]:
        """Every ``params + columns`` pair with a group (input values without rows are not listed)."""
        n = self._n
        for row, k in self._inner.rows():
            yield row[-n:] + row[:-n], k

    def __iter__(self) -> Iterator[tuple]:
        for row, k in self.rows():
            for _ in range(k):
                yield row

    def __len__(self) -> int:
        return len(self._inner)

    def commit(self, prepared: Any, want_change: bool = False, notify: bool = True):
        """The inner view's commit; with ``notify=False`` (a session's transaction: subscribers
        are told after the database's commit) the answer map takes the change at once all the
        same, so lookups inside the transaction see its own writes (and an undo, committed the
        same way, takes them back)."""
        change = self._inner.commit(prepared, want_change=True, notify=notify)
        if not notify and change:
            self._on_change(change)
        return change

    @property
    def subscribers(self) -> tuple[Callable, ...]:
        """The callbacks to tell after a deferred commit (the answer map's own is not one: it
        took the change at :meth:`commit`)."""
        return tuple(cb for cb in self._inner.subscribers if cb != self._on_change)

    def subscribe(self, callback: Callable) -> Callable[[], None]:
        n = self._n
        return self._inner.subscribe(lambda change: callback([(r[-n:] + r[:-n], k) for r, k in change]))

    # -- the answer map ----------------------------------------------------------------------
    def _on_change(self, change) -> None:
        fold_change(self._answers, change, self._n, inputs_last=True)
