"""What every composite view shares (computed columns, set operations, semi-joins, nested views).

A composite view combines engine views; it implements the two-phase update
(``prepare``/``commit``), ``rows``, ``__len__`` and ``explain`` itself and gets the rest of the
View API here, written once: single-row and batch updates through ``prepare``/``commit``,
iteration as a bag, subscribers, and refusing ``lookup`` (no composite view has inputs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from ..errors import IVMError
from .view import Change


class CompositeView:
    """Mixin: the View API in terms of ``prepare``, ``commit`` and ``rows``; subclasses keep
    their callbacks in ``self._subscribers``."""

    _subscribers: list

    def __iter__(self) -> Iterator[tuple]:
        for row, k in self.rows():
            for _ in range(k):
                yield row

    def lookup(self, **inputs: Any) -> Iterator[tuple[tuple, int]]:
        raise IVMError("this view has no input parameters (parameterized views are not supported yet)")

    def insert(self, table: str, row: Iterable[Any]) -> None:
        self.apply({table: [(row, 1)]})

    def delete(self, table: str, row: Iterable[Any]) -> None:
        self.apply({table: [(row, -1)]})

    def apply(self, batch: Mapping) -> None:
        self.commit(self.prepare(batch))

    def diff(self, batch: Mapping) -> Change:
        return self.commit(self.prepare(batch), want_change=True)

    def subscribe(self, callback: Callable[[Change], Any]) -> Callable[[], None]:
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe
