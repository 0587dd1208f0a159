"""``View``: the interface every incremental view of the engine satisfies, declared once.

Twelve classes implement it — :class:`~.view.View` (select–project–join), its subclasses
:class:`~.static.StaticView` (static tables) and :class:`~.lookup.ParamView` (input
parameters), :class:`~.aggregates.AggregateView` (``GROUP BY``), and the composite views
(:class:`~.composite.CompositeView`'s :class:`~.project.ProjectView`,
:class:`~.union.SetOpView`, :class:`~.semijoin.SemiJoinView`, :class:`~.nested.NestedView`,
:class:`~.outerjoin.JoinView` (join trees with outer joins), :class:`~.window.WindowView`
(window functions, Top-N) and :class:`~.constant.ConstantInputs` (``VALUES``, constants)) —
and :func:`ivm_layer.compile_view` returns one of them. ``ivm_layer.View`` is this protocol
(``runtime_checkable``: ``isinstance(view, ivm_layer.View)`` holds for each of them), as
psycopg declares its connection classes in ``abc.py``. Callers — the sessions, the daemon,
:class:`ivm_layer.maintain.ViewSet` — use views only through it.

Costs: reading is constant delay per row (``rows``) and O(1) for ``len`` and, for free-connex
join views, ``contains``; an update costs what the view's plan bounds, which differs by plan
(O(1) per changed tuple for a q-hierarchical view, O(log n) with inequality joins, …):
``explain()`` states it for the view at hand, and each implementation's docstrings say how it
adds its own work to its parts'.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

Change = list[tuple[tuple, int]]
Batch = Mapping[str, Iterable[tuple[Iterable[Any], int]]]


@runtime_checkable
class View(Protocol):
    """An incrementally maintained view (see the module docstring)."""

    #: output column names, in SELECT order
    columns: list[str]

    # -- introspection ------------------------------------------------------------------
    @property
    def tables(self) -> list[str]:
        """The base tables the view reads (lower case). O(tables)."""

    @property
    def query_class(self) -> str:
        """The planner's class of the query (``q-hierarchical``, ``free-connex``, …). O(1)."""

    def explain(self) -> str:
        """The plan, its class, the cost of an update and of enumeration, what is stored."""

    def stats(self) -> dict[str, int]:
        """What the view stores, in tuples (``base_rows``, ``index_entries``, …, ``stored``)."""

    def base_rows(self, table: str) -> Mapping[tuple, int]:
        """``table``'s rows as the view holds them, ``{row: multiplicity}``, read-only. O(1)."""

    # -- reading ------------------------------------------------------------------------
    def rows(self) -> Iterator[tuple[tuple, int]]:
        """``(row, multiplicity)`` pairs, constant delay; an update during the iteration makes
        its next step raise :class:`~ivm_layer.errors.ConcurrentModificationError`."""

    def rows_batches(self, size: int = 1024) -> Iterator[list[tuple[tuple, int]]]:
        """:meth:`rows` in lists of about ``size`` pairs. O(1) per row."""

    def contains(self, row: Iterable[Any]) -> int:
        """The multiplicity of one output row: O(1) for free-connex joins and aggregates (a
        probe), O(view) for composite views (a scan)."""

    def __iter__(self) -> Iterator[tuple]:
        """The bag: each row repeated by its multiplicity."""

    def __len__(self) -> int:
        """Total multiplicity. O(1)."""

    def lookup(self, **inputs: Any) -> Iterator[tuple[tuple, int]]:
        """A parameterized view's rows for these inputs; other views raise ``IVMError``."""

    # -- writing ------------------------------------------------------------------------
    def insert(self, table: str, row: Iterable[Any]) -> None:
        """One row, +1. Cost: the plan's single-tuple bound (:meth:`explain`)."""

    def delete(self, table: str, row: Iterable[Any]) -> None:
        """One row, −1; ``UpdateError`` (nothing changed) if absent. Cost: as :meth:`insert`."""

    def apply(self, batch: Batch) -> None:
        """A batch ``{table: [(row, k)]}``, all or nothing. Cost: O(batch) to validate plus the
        plan's bound per changed tuple (:meth:`explain`)."""

    def diff(self, batch: Batch) -> Change:
        """:meth:`apply`, returning the consolidated change ``[(row, Δk)]`` (O(|change|) more)."""

    def prepare(self, batch: Batch) -> Any:
        """Phase one of a two-phase update: validate and compute; raises ``UpdateError`` and
        changes nothing. Hand the result to :meth:`commit` before any other update."""

    def commit(self, prepared: Any, want_change: bool = False, notify: bool = True) -> Change | None:
        """Phase two (cannot fail): returns the change when ``want_change`` (or subscribed);
        ``notify=False`` leaves calling the subscribers to the caller, after its own commit."""

    def subscribe(self, callback: Callable[[Change], Any]) -> Callable[[], None]:
        """Call ``callback(change)`` after each update that changes the view; returns the
        function that unsubscribes. O(1)."""

    @property
    def subscribers(self) -> tuple[Callable[[Change], Any], ...]:
        """The registered callbacks, in order."""
