"""What every composite view shares (computed columns, set operations, semi-joins, nested views).

A composite view combines engine views; it implements the two-phase update
(``prepare``/``commit``), ``rows``, ``__len__`` and ``explain`` itself and gets the rest of the
View API (:class:`ivm_layer.View`) here, written once: single-row and batch updates through
``prepare``/``commit``, iteration as a bag, ``rows_batches`` and ``contains`` over ``rows``,
subscribers, and refusing ``lookup`` (no composite view has inputs). The cost of an update is
its parts' costs plus the composite's own work per changed part row: each view's
``explain()`` says which.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import islice
from typing import Any

from ..identifiers import resolve
from ..errors import IVMError, UpdateError
from .values import canonical_row
from .view import Change, base_rows_of, subscribe_to


class CompositeView:
    """Mixin: the View API in terms of ``prepare``, ``commit`` and ``rows``; subclasses keep
    their callbacks in ``self._subscribers``, say what they are ``made_of`` and, when they
    combine ``branches``, get ``tables`` and ``base_rows`` from them."""

    _subscribers: list
    made_of = "several views"
    branches: list

    @property
    def tables(self) -> list[str]:
        out: list[str] = []
        for b in self.branches:
            out += [t for t in b.tables if t not in out]
        return out

    def base_rows(self, table: str) -> Mapping[tuple, int]:
        """The rows of input table ``table`` as the view holds them (see :meth:`View.base_rows`)."""
        return base_rows_of(self.branches, table)

    @property
    def plan(self):
        """A composite view has no single join plan (the pipeline's per-atom sharding and type
        inference need one): say so instead of an AttributeError."""
        raise IVMError(f"this view is made of several incremental views ({self.made_of}); it has no single "
                       "join plan: use it from a session, or pass the column types")

    def split_batch(self, batch: Mapping) -> dict[str, list]:
        """A batch's changes by (lower-cased) table name; an unknown table or a batch that is not
        a mapping raises :class:`UpdateError` (nothing is prepared yet)."""
        if not isinstance(batch, Mapping):
            raise UpdateError("a batch is a mapping {table: [(row, k), …]}")
        known = self.tables
        parts: dict[str, list] = {}
        for table, changes in batch.items():
            name = resolve(table, known)
            if name not in known:
                raise UpdateError(f"unknown table {table!r}; the view reads {', '.join(known)}; "
                                  "no change was applied")
            parts.setdefault(name, []).extend(changes)
        return parts

    @staticmethod
    def prepare_each(views: Iterable[Any], parts: dict[str, list]) -> list:
        """Each view's prepared share of ``parts`` (``None`` for a view none of it touches)."""
        steps = []
        for v in views:
            sub = {t: ch for t, ch in parts.items() if t in v.tables}
            steps.append(v.prepare(sub) if sub else None)
        return steps

    def __iter__(self) -> Iterator[tuple]:
        """The bag: each row repeated by its multiplicity (O(1) per row)."""
        for row, k in self.rows():
            for _ in range(k):
                yield row

    def rows_batches(self, size: int = 1024) -> Iterator[list[tuple[tuple, int]]]:
        """:meth:`rows` in lists of ``size`` ``(row, multiplicity)`` pairs (O(1) per row)."""
        it = self.rows()
        size = max(1, int(size))
        while chunk := list(islice(it, size)):
            yield chunk

    def contains(self, row: Iterable[Any]) -> int:
        """The multiplicity of ``row`` (0 if absent): a scan of :meth:`rows`, O(view) — a
        composite view keeps no index of its output rows."""
        want = canonical_row(tuple(row))
        return sum(k for r, k in self.rows() if r == want)

    def lookup(self, **inputs: Any) -> Iterator[tuple[tuple, int]]:
        raise IVMError("this view has no input parameters (parameterized views are not supported yet)")

    def insert(self, table: str, row: Iterable[Any]) -> None:
        """One row, +1: :meth:`apply` of a one-row batch (cost: :meth:`explain`)."""
        self.apply({table: [(row, 1)]})

    def delete(self, table: str, row: Iterable[Any]) -> None:
        """One row, −1 (UpdateError if absent, nothing changed). Cost: as :meth:`insert`."""
        self.apply({table: [(row, -1)]})

    def apply(self, batch: Mapping) -> None:
        """A batch, all or nothing: ``prepare`` then ``commit`` (cost: :meth:`explain`)."""
        self.commit(self.prepare(batch))

    def diff(self, batch: Mapping) -> Change:
        """:meth:`apply`, returning the view's consolidated change (O(|change|) more)."""
        return self.commit(self.prepare(batch), want_change=True)

    def subscribe(self, callback: Callable[[Change], Any]) -> Callable[[], None]:
        """Call ``callback(change)`` after every update that changes the view (see
        :meth:`ivm_layer.engine.view.View.subscribe`); returns an unsubscribe function. O(1)."""
        return subscribe_to(self._subscribers, callback)

    @property
    def subscribers(self) -> tuple[Callable[[Change], Any], ...]:
        """The callbacks :meth:`subscribe` registered, in order."""
        return tuple(self._subscribers)
