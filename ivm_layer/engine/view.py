"""The public view object: a compiled query plus its (T, N)-representation.

Bag semantics throughout: a view row's multiplicity is the number of join results that
produce it (``SELECT cols, COUNT(*) … GROUP BY cols``). Updates are validated completely
before anything changes, so a bad batch raises :class:`~ivm_layer.errors.UpdateError`
with no state changed.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Callable, Iterable, Iterator, Mapping

from ..identifiers import resolve
from ..errors import IVMError, UpdateError
from ..planner import Plan
from .batches import leaf_deltas, probe_row, read_batch
from .bulk import BULK_MIN, CollectorPaused, batch_size
from .leaves import LeafExtractor, VarClasses, ordered_variable_kinds
from .tnotes import cost_notes, derived_steps
from .trep import TRep
from .updcode import UpdateCode

Change = list[tuple[tuple, int]]


class View:
    """An incrementally maintained view. Build it with :func:`ivm_layer.compile_view`."""

    def __init__(self, plan: Plan, sql: str = "", shared_kinds: dict[str, str] | None = None,
                 extra_ordered: Iterable[str] = (), weights: Mapping[int, Callable[[tuple], Any]] | None = None,
                 classes: VarClasses | None = None):
        # ``weights`` (atom index -> f(table row)) turns multiplicities into ring payloads: a
        # row of that atom enters its leaf with k·f(row) instead of k (aggregates, §7).
        self.sql = sql
        self._weights = dict(weights) if weights else None
        self.plan = plan
        gcq = plan.gcq
        self.columns: list[str] = list(gcq.columns)
        self._trep = TRep(plan)
        kinds, strict, temporal = ordered_variable_kinds(gcq)
        ordered = set(kinds) | set(extra_ordered)
        # Compared variables share a kind (keyed by their class); a core shares the classes.
        classes = classes if classes is not None else VarClasses()
        classes.add_predicates(gcq)
        self._kinds: dict = shared_kinds if shared_kinds is not None else {}
        self._core: View | None = None
        self._core_extractor: LeafExtractor | None = None
        if plan.core is not None:
            outer_vars = {v for p in gcq.predicates for v in p.vars}
            self._core = View(plan.core, shared_kinds=self._kinds, extra_ordered=ordered | outer_vars,
                              classes=classes)
        for v, k in kinds.items():
            if k:
                self._kinds.setdefault(classes.find(v), k)
        self._extractors: dict[str, list[LeafExtractor]] = {}
        for i, atom in enumerate(gcq.atoms):
            leaf = self._trep.leaves[i]
            ex = LeafExtractor(gcq, i, leaf.form, strict, leaf.node.filters, self._kinds, ordered, temporal,
                               classes)
            if atom.relation == plan.core_relation:
                self._core_extractor = ex
            else:
                self._extractors.setdefault(atom.relation, []).append(ex)
        self._arity = {t: len(cols) for t, cols in gcq.schema.items() if t != plan.core_relation}
        self._tables: dict[str, dict[tuple, int]] = {t: {} for t in self._extractors}
        if self._core is not None:  # one copy of each base table: the outer view validates
            self._core._drop_stores(self._tables)
        # The bag's counts are kept when the view is not free-connex (the projection is
        # materialized) or DISTINCT (a row enters/leaves the set when its count crosses zero).
        self._distinct = gcq.distinct
        self._materialized: dict[tuple, int] | None = None if plan.free_connex and not gcq.distinct else {}
        self._subscribers: list[Callable[[Change], Any]] = []
        self._membership = None  # built by the first contains()
        # Which code runs each update path (engine/updcode.py): generated (engine/updgen.py)
        # or the interpreter, built at a table's / leaf's first update; IVM_COMPILE=0 keeps
        # the interpreter everywhere.
        self._code = UpdateCode(
            self._trep, self._tables, self._extractors, self._arity, self._kinds, self._subscribers,
            [a.alias for a in gcq.atoms], self._materialized is None and not self._weights,
            self._commit_one, self._core._code if self._core is not None else None, self._core_extractor)
        self._upd = self._code.single  # table spelling -> its single-row update (hot path)

    # -- introspection ------------------------------------------------------------------
    @property
    def tables(self) -> list[str]:
        """The base tables this view reads."""
        names = list(self._extractors)
        if self._core is not None:
            names += [t for t in self._core.tables if t not in names]
        return names

    @property
    def query_class(self) -> str:
        return self.plan.klass

    def explain(self) -> str:
        """The plan: class, costs, what is materialized, and the GJT with its connex subset N
        (O(plan) plus :meth:`stats`). The plan-specific bounds of every operation are here.

        Examples:
            >>> from ivm_layer import compile_view
            >>> v = compile_view("SELECT r.a, r.b, s.c FROM r JOIN s ON r.b = s.b", {"r": ["a", "b"], "s": ["b", "c"]})
            >>> for line in v.explain().splitlines()[2:5]:
            ...     print(line)
            class: q-hierarchical
            materialized: nothing beyond the T-representation (memory linear in the input)
            update cost: O(1) per single-tuple update of a table (every leaf-to-root path is a guard path)
        """
        head = [f"view columns: {', '.join(self.columns)}", f"query: {self.plan.gcq}"]
        st = self.stats()
        stats = (f"state: {st['base_rows']} base rows, {st['index_entries']} index entries"
                 + (f", core: {st['core_entries']} index entries" if self._core is not None else "")
                 + (f", {st['materialized_rows']} materialized rows" if self._materialized is not None else ""))
        notes = cost_notes(self._trep)
        engine = ["engine:"] + [f"  {line}" for line in notes] if notes else []
        return "\n".join(head + [self.plan.explain(derived_steps(self._trep))] + engine + [stats])

    def stats(self) -> dict[str, int]:
        """What the view stores, in tuples (the memory accounting behind ``explain()``):
        ``base_rows`` (distinct rows of the input tables), ``index_entries`` (entries of the
        T-representation's indexes), ``core_entries`` (of a materialized cyclic core),
        ``materialized_rows`` (a materialized projected result) and their sum ``stored``.
        O(tables + nodes).

        Examples:
            >>> from ivm_layer import compile_view
            >>> v = compile_view("SELECT r.a, r.b, s.c FROM r JOIN s ON r.b = s.b", {"r": ["a", "b"], "s": ["b", "c"]})
            >>> v.apply({"r": [((1, 10), 1), ((2, 10), 1)], "s": [((10, "x"), 1)]})
            >>> v.stats()["base_rows"], v.stats()["materialized_rows"]
            (3, 0)
        """
        out = {"base_rows": sum(len(t) for t in self._tables.values()),
               "index_entries": self._trep.size(),
               "core_entries": self._core._trep.size() if self._core is not None else 0,
               "materialized_rows": len(self._materialized) if self._materialized is not None else 0}
        out["stored"] = sum(out.values())
        return out

    def base_rows(self, table: str) -> Mapping[tuple, int]:
        """The rows of input table ``table`` as the view holds them (``{row: multiplicity}``,
        read-only, O(1)): what sessions diff a table against when they could not see a write."""
        store = self._store(resolve(table, self.tables))
        if store is None:
            raise UpdateError(f"unknown table {table!r}; the view reads {', '.join(self.tables)}")
        return MappingProxyType(store)

    def __repr__(self) -> str:
        return f"<ivm_layer.View {self.plan.klass} columns={self.columns} rows={len(self)}>"

    # -- reading ------------------------------------------------------------------------
    def rows(self) -> Iterator[tuple[tuple, int]]:
        """Iterate ``(row, multiplicity)`` with constant delay (free-connex) or from the
        materialized result (not free-connex): O(1) per row either way. Updating the view
        while this iterator is open makes its next step raise :class:`ConcurrentModificationError`.

        Examples:
            >>> from ivm_layer import compile_view
            >>> v = compile_view("SELECT r.a, r.b, s.c FROM r JOIN s ON r.b = s.b", {"r": ["a", "b"], "s": ["b", "c"]})
            >>> v.apply({"r": [((1, 10), 1), ((1, 10), 1)], "s": [((10, "x"), 1)]})
            >>> list(v.rows()), list(v), len(v)
            ([((1, 10, 'x'), 2)], [(1, 10, 'x'), (1, 10, 'x')], 2)
        """
        if self._materialized is not None:
            return materialized_rows(self._materialized, self._distinct, self._trep)
        return self._trep.enumerate()

    def rows_batches(self, size: int = 1024) -> Iterator[list[tuple[tuple, int]]]:
        """The rows of :meth:`rows` as lists of about ``size`` ready ``(row, multiplicity)``
        pairs (the innermost loop of the enumeration runs at C speed). Updating the view while
        this iterator is open makes its next step raise :class:`ConcurrentModificationError`.

        Examples:
            >>> from ivm_layer import compile_view
            >>> v = compile_view("SELECT r.a, r.b, s.c FROM r JOIN s ON r.b = s.b", {"r": ["a", "b"], "s": ["b", "c"]})
            >>> v.apply({"r": [((i, 10), 1) for i in range(3)], "s": [((10, "x"), 1)]})
            >>> [len(batch) for batch in v.rows_batches(2)]
            [2, 1]
        """
        if self._materialized is not None:
            items = ((row, 1) for row in self._materialized) if self._distinct else self._materialized.items()
            return chunked_rows(items, size, self._trep)
        return self._trep.enumerate_batches(size)

    def contains(self, row: Iterable[Any]) -> int:
        """The multiplicity of ``row`` in the view (0 if absent; 1 for a DISTINCT view's row).
        O(1) for a free-connex view (one probe per node of N, 002 §3), a dict lookup for a
        materialized result.

        Examples:
            >>> from ivm_layer import compile_view
            >>> v = compile_view("SELECT r.a, r.b, s.c FROM r JOIN s ON r.b = s.b", {"r": ["a", "b"], "s": ["b", "c"]})
            >>> v.apply({"r": [((1, 10), 1)], "s": [((10, "x"), 1)]})
            >>> v.contains((1, 10, "x")), v.contains((2, 10, "x"))
            (1, 0)
        """
        row = probe_row(row, self.columns)
        if self._materialized is not None:
            k = self._materialized.get(row, 0)
            return (1 if k else 0) if self._distinct else k
        if not self._trep.out_vars:
            return self._trep.count
        if self._membership is None:
            from .membership import Membership

            self._membership = Membership(self._trep)
        return self._membership.multiplicity(row)

    def __iter__(self) -> Iterator[tuple]:
        for row, k in self.rows():
            for _ in range(k):
                yield row

    def __len__(self) -> int:
        """Total multiplicity, O(1): the count kept at the GJT root (for DISTINCT, the number
        of distinct rows).

        Examples:
            >>> from ivm_layer import compile_view
            >>> v = compile_view("SELECT r.a, r.b, s.c FROM r JOIN s ON r.b = s.b", {"r": ["a", "b"], "s": ["b", "c"]})
            >>> v.apply({"r": [((1, 10), 1), ((2, 10), 1)], "s": [((10, "x"), 1), ((10, "y"), 1)]})
            >>> len(v)
            4
        """
        if self._distinct:
            return len(self._materialized)
        return self._trep.count

    def lookup(self, **inputs: Any) -> Iterator[tuple[tuple, int]]:
        """Only parameterized views answer lookups (``engine/lookup.py``); this one raises
        :class:`IVMError` saying how to declare parameters."""
        raise IVMError("this view has no input parameters: declare them with col = $name placeholders "
                       "in WHERE or compile_view(..., params=(...)), then call lookup(name=value)")

    # -- writing ------------------------------------------------------------------------
    def insert(self, table: str, row: Iterable[Any]) -> None:
        """Insert one row (multiplicity +1). Cost: the plan's single-tuple update bound — O(1)
        for a q-hierarchical view, what :meth:`explain` states otherwise.

        Examples:
            >>> from ivm_layer import compile_view
            >>> v = compile_view("SELECT r.a, r.b, s.c FROM r JOIN s ON r.b = s.b", {"r": ["a", "b"], "s": ["b", "c"]})
            >>> v.insert("r", (1, 10)); v.insert("s", (10, "x"))
            >>> list(v.rows())
            [((1, 10, 'x'), 1)]
        """
        fn = self._upd.get(table)
        if fn is not None and fn(row, 1):
            return
        if not self._single(table, row, 1):
            self._apply_checked({table: [(row, 1)]}, want_change=False)

    def delete(self, table: str, row: Iterable[Any]) -> None:
        """Delete one row (multiplicity -1); raises UpdateError if the row is not present
        (nothing changed). Cost: as :meth:`insert`.

        Examples:
            >>> from ivm_layer import compile_view
            >>> v = compile_view("SELECT r.a, r.b, s.c FROM r JOIN s ON r.b = s.b", {"r": ["a", "b"], "s": ["b", "c"]})
            >>> v.insert("r", (1, 10)); v.delete("r", (1, 10)); len(v)
            0
            >>> v.delete("r", (1, 10))
            Traceback (most recent call last):
            ...
            ivm_layer.errors.UpdateError: cannot delete (1, 10) from 'r': it is not present; no change was applied
        """
        fn = self._upd.get(table)
        if fn is not None and fn(row, -1):
            return
        if not self._single(table, row, -1):
            self._apply_checked({table: [(row, -1)]}, want_change=False)

    def update_paths(self) -> dict[str, str]:
        """What runs each update path built so far (a path is built at its first update):
        ``"insert/delete <table>"`` (one row), ``"batch <atom>"`` (a leaf's share of a batch) and
        ``"change of <atom>"`` (the same, recording the change) -> ``"generated: …"``
        (engine/updgen.py, with what it touches) or ``"interpreter: <why>"``."""
        return dict(self._code.notes)

    def _single(self, table: str, row: Any, k: int) -> bool:
        """Fast path for one row (same checks as a batch). Returns False to defer to the
        general path for anything unusual (a table of the core, a non-tuple row)."""
        return self._code.single_row(table, row, k)

    def _commit_one(self, name: str, changes: dict[tuple, int]) -> None:
        """Both phases for one table's validated changes (the single-row path's general case),
        then the subscribers (as :meth:`apply`)."""
        change = self._commit(self._prepare_validated([(name, changes)]), want_change=False)
        if change and self._subscribers:
            tell(self._subscribers, change)

    def apply(self, batch: Mapping[str, Iterable[tuple[Iterable[Any], int]]]) -> None:
        """Apply a batch ``{table: [(row, k), …]}`` atomically (all or nothing). Cost: O(batch)
        to validate, then the plan's update bound per changed leaf tuple (:meth:`explain`).
        ``prepare`` + ``commit`` in one call.

        Examples:
            >>> from ivm_layer import compile_view
            >>> v = compile_view("SELECT r.a, r.b, s.c FROM r JOIN s ON r.b = s.b", {"r": ["a", "b"], "s": ["b", "c"]})
            >>> v.apply({"r": [((1, 10), 1), ((2, 10), 1)], "s": [((10, "x"), 1)]})
            >>> v.apply({"r": [((3, 10), 1), ((9, 9), -1)]})  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            ivm_layer.errors.UpdateError: cannot delete 1 copy of (9, 9) from 'r': it is not present; ...
            >>> len(v)
            2
        """
        self._apply_checked(batch, want_change=False)

    def diff(self, batch: Mapping[str, Iterable[tuple[Iterable[Any], int]]]) -> Change:
        """Apply a batch and return the view's change ``[(row, Δk)]``, consolidated. Cost: as
        :meth:`apply`, plus the delta enumeration, O(|change|) for a free-connex view.

        Examples:
            >>> from ivm_layer import compile_view
            >>> v = compile_view("SELECT r.a, r.b, s.c FROM r JOIN s ON r.b = s.b", {"r": ["a", "b"], "s": ["b", "c"]})
            >>> v.apply({"r": [((1, 10), 1)]})
            >>> v.diff({"s": [((10, "x"), 1)]})
            [((1, 10, 'x'), 1)]
            >>> sorted(v.diff({"r": [((1, 10), -1), ((2, 10), 1)]}))
            [((1, 10, 'x'), -1), ((2, 10, 'x'), 1)]
        """
        return self._apply_checked(batch, want_change=True)

    def prepare(self, batch: Mapping[str, Iterable[tuple[Iterable[Any], int]]]) -> "Prepared":
        """Phase one of a two-phase update: validate ``batch`` and compute everything the update
        needs. Raises :class:`UpdateError` for a bad batch; changes nothing. Hand the result to
        :meth:`commit` before any other update of this view (:class:`ivm_layer.maintain.ViewSet`
        uses the pair to update several views all-or-nothing). Cost: O(batch) to validate plus
        the leaf deltas (one tuple per changed row and atom); the propagation is :meth:`commit`'s.

        Examples:
            >>> from ivm_layer import compile_view
            >>> v = compile_view("SELECT r.a, r.b, s.c FROM r JOIN s ON r.b = s.b", {"r": ["a", "b"], "s": ["b", "c"]})
            >>> n = compile_view("SELECT count(*) AS n FROM r", {"r": ["a", "b"]})
            >>> batch = {"r": [((1, 10), 1)]}
            >>> steps = [(view, view.prepare(batch)) for view in (v, n)]  # nothing changed yet
            >>> [view.commit(p, want_change=True) for view, p in steps]
            [[], [((0,), -1), ((1,), 1)]]
        """
        return Prepared(self, self._trep.version, self._prepare(batch))

    def validate(self, batch: Mapping[str, Iterable[tuple[Iterable[Any], int]]]) -> list[tuple[str, dict[tuple, int]]]:
        """``batch`` checked and consolidated, ``[(table, {row: k})]`` (rows canonical, zero sums
        dropped; a delete of a row the view does not hold raises :class:`UpdateError`). Changes
        nothing. O(batch). With :meth:`prepare_validated`, :meth:`prepare` in two steps, for a
        view built on this one that checks the rows itself in between (``AggregateView``)."""
        return self._validate(batch)

    def prepare_validated(self, validated: list[tuple[str, dict[tuple, int]]]) -> "Prepared":
        """Phase one for a batch :meth:`validate` returned (see :meth:`prepare`)."""
        return Prepared(self, self._trep.version, self._prepare_validated(validated))

    def commit(self, prepared: "Prepared", want_change: bool = False, notify: bool = True) -> Change | None:
        """Phase two: apply a :meth:`prepare`-d batch (cannot fail). Returns the view's
        consolidated change when ``want_change`` (or when the view has subscribers). The
        subscribers are called with it unless ``notify`` is False: then the caller calls them
        after its own commit (:class:`ivm_layer.maintain.ViewSet`, after the database's).
        Cost: the plan's update bound per changed leaf tuple (see :meth:`explain`), plus
        O(|change|) for the change.

        Examples:
            >>> from ivm_layer import compile_view
            >>> v = compile_view("SELECT r.a, r.b, s.c FROM r JOIN s ON r.b = s.b", {"r": ["a", "b"], "s": ["b", "c"]})
            >>> p = v.prepare({"r": [((1, 10), 1)]})
            >>> v.insert("s", (10, "x"))  # another update first: the prepared batch is stale
            >>> v.commit(p)  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            ivm_layer.errors.UpdateError: this prepared batch is stale: the view changed since prepare(); ...
        """
        if prepared.view is not self or prepared.version != self._trep.version:
            raise UpdateError("this prepared batch is stale: the view changed since prepare(); "
                              "prepare it again")
        change = self._commit(prepared.steps, want_change)
        if notify and change and self._subscribers:
            tell(self._subscribers, change)
        return change

    def subscribe(self, callback: Callable[[Change], Any]) -> Callable[[], None]:
        """Call ``callback(change)`` after every update that changes the view (after the update
        is applied: an exception it raises reaches the caller of the update, which stays
        applied). Through a session, callbacks run after the database committed, through
        :class:`ivm_layer.maintain.ViewSet`, and an exception becomes a warning. Returns an
        unsubscribe function. O(1).

        Examples:
            >>> from ivm_layer import compile_view
            >>> v = compile_view("SELECT r.a, r.b, s.c FROM r JOIN s ON r.b = s.b", {"r": ["a", "b"], "s": ["b", "c"]})
            >>> v.insert("s", (10, "x"))
            >>> stop = v.subscribe(lambda change: print("changed:", change))
            >>> v.insert("r", (1, 10))
            changed: [((1, 10, 'x'), 1)]
            >>> stop(); v.insert("r", (2, 10))  # unsubscribed: nothing printed
        """
        return subscribe_to(self._subscribers, callback)

    @property
    def subscribers(self) -> tuple[Callable[[Change], Any], ...]:
        """The callbacks :meth:`subscribe` registered, in order. O(subscribers)."""
        return tuple(self._subscribers)

    # -- internals ----------------------------------------------------------------------
    def _drop_stores(self, kept_elsewhere: Mapping[str, dict]) -> None:
        for t in kept_elsewhere:
            self._tables.pop(t, None)
        if self._core is not None:
            self._core._drop_stores(kept_elsewhere)

    def _store(self, name: str) -> dict[tuple, int] | None:
        """The stored rows of a table this view (or its core) reads, for validating deletes."""
        store = self._tables.get(name)
        if store is None and self._core is not None:
            return self._core._store(name)
        return store

    def _validate(self, batch: Mapping) -> list[tuple[str, dict[tuple, int]]]:
        """Consolidate and check a batch against the schema and the stored rows (no mutation):
        :func:`~ivm_layer.engine.batches.read_batch`."""
        return read_batch(batch, self._arity, self._store)

    def _prepare(self, batch: Mapping) -> list:
        """Phase 1: validate, compute every leaf delta, check value kinds. Raises; mutates nothing
        (the value kinds first seen are recorded only when the whole batch passed)."""
        with CollectorPaused(batch_size(batch)):
            return self._prepare_validated(self._validate(batch))

    def _prepare_validated(self, validated: list[tuple[str, dict[tuple, int]]],
                           pending: dict[str, str] | None = None) -> list:
        if pending is None:
            pending = {}
        steps = []
        for name, changes in validated:
            per_atom = leaf_deltas(self._extractors.get(name, ()), self._weights, name, changes, pending)
            core_steps = None
            if self._core is not None and name in self._core._extractors:
                core_steps = self._core._prepare_validated([(name, changes)], pending)
            steps.append((name, changes, per_atom, core_steps, pending))
        return steps

    def _commit(self, steps: list, want_change: bool) -> Change | None:
        """Phase 2: apply prepared steps (cannot fail). Returns the consolidated view change
        when one is wanted (``diff``, subscribers, or a materialized result to maintain)."""
        with CollectorPaused(sum(len(st[1]) for st in steps)):
            return self._commit_steps(steps, want_change)

    def _commit_steps(self, steps: list, want_change: bool) -> Change | None:
        need_delta = want_change or bool(self._subscribers) or self._materialized is not None
        change: dict[tuple, int] | None = {} if need_delta else None
        for name, changes, per_atom, core_steps, pending in steps:
            self._kinds.update(pending)
            store = self._tables.get(name)
            if store is not None:
                if len(changes) >= BULK_MIN and (not store or store.keys().isdisjoint(changes)) \
                        and min(changes.values()) > 0:
                    store.update(changes)  # new rows only: one C-level update
                else:
                    _merge(store, changes.items())
            # Self-joins: one leaf at a time, fully propagated (ALGORITHMS.md §4).
            for atom, delta in per_atom:
                self._code.propagate(atom, delta, change)
            if core_steps is not None:
                core_change = self._core._commit(core_steps, want_change=True)
                if core_change:
                    ex = self._core_extractor
                    delta = {}
                    for row, k in core_change:
                        t = ex.tuple_of(row)
                        if t is not None:
                            delta[t] = delta.get(t, 0) + k
                    delta = {t: k for t, k in delta.items() if k}
                    if delta:
                        self._code.propagate(ex.atom, delta, change)
        self._trep.bump()
        if change is None:
            return None
        bag_change = [(row, k) for row, k in change.items() if k]
        result = bag_change
        if self._materialized is not None:
            if self._distinct:
                result = _set_change(self._materialized, bag_change)
            _merge(self._materialized, bag_change)
        return result

    def _apply_checked(self, batch: Mapping, want_change: bool) -> Change | None:
        change = self._commit(self._prepare(batch), want_change)
        if change and self._subscribers:
            tell(self._subscribers, change)
        return change


class Prepared:
    """A validated batch waiting for :meth:`View.commit` (opaque to callers)."""

    __slots__ = ("view", "version", "steps")

    def __init__(self, view: Any, version: int, steps: Any) -> None:
        self.view = view
        self.version = version
        self.steps = steps


def materialized_rows(counts: dict[tuple, int], distinct: bool, trep: Any) -> Iterator[tuple[tuple, int]]:
    """The (row, k) pairs of a materialized result (k = 1 for a DISTINCT view); raises
    ConcurrentModificationError when the view changes while the enumeration is open."""
    from ..errors import ConcurrentModificationError

    v0 = trep.version
    items = ((row, 1) for row in counts) if distinct else counts.items()
    for item in items:
        yield item
        if trep.version != v0:
            raise ConcurrentModificationError(
                "the view was updated while this enumeration was open; take list(view.rows()) first")


def chunked_rows(items: Iterable, size: int, trep: Any) -> Iterator[list]:
    """``items`` in lists of ``size``; raises if the view changes while the iterator is open
    (``trep``: anything with a ``version`` that every update bumps)."""
    from itertools import islice

    from ..errors import ConcurrentModificationError

    size = max(1, int(size))
    it = iter(items)
    v0 = trep.version
    while True:
        chunk = list(islice(it, size))
        if not chunk:
            return
        yield chunk
        if trep.version != v0:
            raise ConcurrentModificationError(
                "the view was updated while this enumeration was open; take list(view.rows()) first")


def _merge(gmr: dict[tuple, int], changes: Iterable[tuple[tuple, int]]) -> None:
    """``gmr += changes``, dropping tuples whose multiplicity becomes zero."""
    for row, k in changes:
        v = gmr.get(row, 0) + k
        if v:
            gmr[row] = v
        else:
            del gmr[row]


def _set_change(counts: dict[tuple, int], change: list[tuple[tuple, int]]) -> list[tuple[tuple, int]]:
    """The DISTINCT view's change for a bag change, given the bag's counts before it."""
    out = []
    for row, k in change:
        before = counts.get(row, 0)
        after = before + k
        if before == 0 and after > 0:
            out.append((row, 1))
        elif before > 0 and after == 0:
            out.append((row, -1))
    return out


def tell(subscribers: Iterable[Callable[[Change], Any]], change: Change) -> None:
    """Call each of ``subscribers`` with (a copy of) a committed ``change``, in order."""
    for cb in list(subscribers):
        cb(list(change))


def subscribe_to(subscribers: list, callback: Callable[[Change], Any]) -> Callable[[], None]:
    """Add ``callback`` to a view's ``subscribers``; returns the function that removes it."""
    subscribers.append(callback)

    def unsubscribe() -> None:
        if callback in subscribers:
            subscribers.remove(callback)

    return unsubscribe


def combined_stats(parts: Iterable[Any], own: int | None = None) -> dict[str, int]:
    """The :meth:`View.stats` of a view made of ``parts``: theirs summed, plus ``own`` rows it
    materializes itself (counted in ``materialized_rows`` and ``stored``)."""
    out: dict[str, int] = {}
    for part in parts:
        for k, v in part.stats().items():
            out[k] = out.get(k, 0) + v
    if own is not None:
        out["materialized_rows"] = out.get("materialized_rows", 0) + own
        out["stored"] = out.get("stored", 0) + own
    return out


def base_rows_of(views: Iterable[Any], table: str) -> Mapping[tuple, int]:
    """``table``'s rows from the first of ``views`` that reads it (composite views)."""
    views = list(views)
    name = resolve(table, {t for v in views for t in v.tables})
    for v in views:
        if name in v.tables:
            return v.base_rows(name)
    raise UpdateError(f"unknown table {table!r}")
