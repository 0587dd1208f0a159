"""The public view object: a compiled query plus its (T, N)-representation.

Bag semantics throughout: a view row's multiplicity is the number of join results that
produce it (``SELECT cols, COUNT(*) … GROUP BY cols``). Updates are validated completely
before anything changes, so a bad batch raises :class:`~ivm_layer.errors.UpdateError`
with no state changed.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Mapping

from ..errors import IVMError, UpdateError
from ..planner import Plan
from ..planner.classify import NOT_FREE_CONNEX
from .leaves import LeafExtractor, bad_row, ordered_variable_kinds
from .trep import TRep

Change = list[tuple[tuple, int]]


class View:
    """An incrementally maintained view. Build it with :func:`ivm_layer.compile_view`."""

    def __init__(self, plan: Plan, sql: str = ""):
        self.sql = sql
        self.plan = plan
        gcq = plan.gcq
        self.columns: list[str] = list(gcq.columns)
        self._trep = TRep(plan)
        kinds, strict = ordered_variable_kinds(gcq)
        self._kinds: dict[str, str] = {v: k for v, k in kinds.items() if k}
        self._extractors: dict[str, list[LeafExtractor]] = {}
        for i, atom in enumerate(gcq.atoms):
            leaf = self._trep.leaves[i]
            ex = LeafExtractor(gcq, i, leaf.vars, strict, leaf.node.filters, self._kinds, set(kinds))
            self._extractors.setdefault(atom.relation, []).append(ex)
        self._arity = {t: len(cols) for t, cols in gcq.schema.items()}
        self._tables: dict[str, dict[tuple, int]] = {t: {} for t in self._extractors}
        self._materialized: dict[tuple, int] | None = None if plan.free_connex else {}
        self._subscribers: list[Callable[[Change], Any]] = []

    # -- introspection ------------------------------------------------------------------
    @property
    def tables(self) -> list[str]:
        """The base tables this view reads."""
        return list(self._extractors)

    @property
    def query_class(self) -> str:
        return self.plan.klass

    def explain(self) -> str:
        """The plan: class, costs, what is materialized, and the GJT with its connex subset N."""
        head = [f"view columns: {', '.join(self.columns)}", f"query: {self.plan.gcq}"]
        stats = (f"state: {sum(len(t) for t in self._tables.values())} base rows, "
                 f"{self._trep.size()} index entries"
                 + (f", {len(self._materialized)} materialized rows" if self._materialized is not None else ""))
        return "\n".join(head + [self.plan.explain(), stats])

    def __repr__(self) -> str:
        return f"<ivm_layer.View {self.plan.klass} columns={self.columns} rows={len(self)}>"

    # -- reading ------------------------------------------------------------------------
    def rows(self) -> Iterator[tuple[tuple, int]]:
        """Iterate ``(row, multiplicity)`` with constant delay (free-connex) or from the
        materialized result (not free-connex). Updating the view while this iterator is
        open makes its next step raise :class:`ConcurrentModificationError`."""
        if self._materialized is not None:
            return self._iter_materialized()
        return self._trep.enumerate()

    def _iter_materialized(self) -> Iterator[tuple[tuple, int]]:
        from ..errors import ConcurrentModificationError

        v0 = self._trep.version
        for item in self._materialized.items():
            yield item
            if self._trep.version != v0:
                raise ConcurrentModificationError(
                    "the view was updated while this enumeration was open; take list(view.rows()) first")

    def __iter__(self) -> Iterator[tuple]:
        for row, k in self.rows():
            for _ in range(k):
                yield row

    def __len__(self) -> int:
        """Total multiplicity (bag size), O(1): the count kept at the GJT root."""
        return self._trep.count

    def lookup(self, **inputs: Any) -> Iterator[tuple[tuple, int]]:
        raise IVMError("this view has no input parameters (parameterized views are not supported yet)")

    # -- writing ------------------------------------------------------------------------
    def insert(self, table: str, row: Iterable[Any]) -> None:
        """Insert one row (multiplicity +1)."""
        self._apply_checked({table: [(row, 1)]}, want_change=False)

    def delete(self, table: str, row: Iterable[Any]) -> None:
        """Delete one row (multiplicity -1); raises UpdateError if the row is not present."""
        self._apply_checked({table: [(row, -1)]}, want_change=False)

    def apply(self, batch: Mapping[str, Iterable[tuple[Iterable[Any], int]]]) -> None:
        """Apply a batch ``{table: [(row, k), …]}`` atomically (all or nothing)."""
        self._apply_checked(batch, want_change=False)

    def diff(self, batch: Mapping[str, Iterable[tuple[Iterable[Any], int]]]) -> Change:
        """Apply a batch and return the view's change ``[(row, Δk)]``, consolidated."""
        return self._apply_checked(batch, want_change=True)

    def subscribe(self, callback: Callable[[Change], Any]) -> Callable[[], None]:
        """Call ``callback(change)`` after every update that changes the view. Returns an
        unsubscribe function."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    # -- internals ----------------------------------------------------------------------
    def _validate(self, batch: Mapping) -> list[tuple[str, dict[tuple, int]]]:
        if not isinstance(batch, Mapping):
            raise UpdateError("a batch is a mapping {table: [(row, k), …]}")
        out: list[tuple[str, dict[tuple, int]]] = []
        for table, changes in batch.items():
            name = str(table).lower()
            arity = self._arity.get(name)
            if arity is None:
                raise UpdateError(f"unknown table {table!r}; the schema has {', '.join(self._arity)}; "
                                  "no change was applied")
            store = self._tables.get(name)
            consolidated: dict[tuple, int] = {}
            for item in changes:
                try:
                    row, k = item
                except (TypeError, ValueError):
                    raise UpdateError(f"batch entries are (row, k) pairs, got {item!r}; no change was applied") from None
                if not isinstance(row, tuple):
                    if isinstance(row, (str, bytes)) or not isinstance(row, Iterable):
                        raise bad_row(name, row, arity)
                    row = tuple(row)
                if len(row) != arity:
                    raise bad_row(name, row, arity)
                if not isinstance(k, int) or isinstance(k, bool):
                    raise UpdateError(f"multiplicity {k!r} must be an int; no change was applied")
                try:
                    consolidated[row] = consolidated.get(row, 0) + k
                except TypeError:
                    raise UpdateError(f"row {row!r} has an unhashable value; no change was applied") from None
            if store is None:  # a schema table this view does not read: nothing to do
                continue
            for row, k in consolidated.items():
                if k < 0 and store.get(row, 0) + k < 0:
                    have = store.get(row, 0)
                    raise UpdateError(
                        f"cannot delete {-k} cop{'y' if k == -1 else 'ies'} of {row!r} from {table!r}: "
                        f"{'it is not present' if not have else f'only {have} present'}; no change was applied")
            out.append((name, {r: k for r, k in consolidated.items() if k}))
        return out

    def _leaf_deltas(self, validated) -> list[tuple[str, dict[tuple, int], list[tuple[int, dict]]]]:
        pending: dict[str, str] = {}
        plan = []
        for name, changes in validated:
            per_atom = []
            for ex in self._extractors[name]:
                delta: dict[tuple, int] = {}
                for row, k in changes.items():
                    t = ex.tuple_of(row)
                    if t is None:
                        continue
                    ex.check_kinds(t, pending)
                    delta[t] = delta.get(t, 0) + k
                delta = {t: k for t, k in delta.items() if k}
                if delta:
                    per_atom.append((ex.atom, delta))
            plan.append((name, changes, per_atom))
        self._kinds.update(pending)
        return plan

    def _apply_checked(self, batch: Mapping, want_change: bool) -> Change | None:
        validated = self._validate(batch)
        # Phase 1 (may raise): leaf tuples, filters and value kinds. Phase 2 cannot fail.
        plan = self._leaf_deltas(validated)
        need_delta = want_change or bool(self._subscribers) or self._materialized is not None
        change: dict[tuple, int] | None = {} if need_delta else None
        trep = self._trep
        for name, changes, per_atom in plan:
            store = self._tables[name]
            for row, k in changes.items():
                v = store.get(row, 0) + k
                if v:
                    store[row] = v
                else:
                    del store[row]
            # Self-joins: one leaf at a time, fully propagated (ALGORITHMS.md §4).
            for atom, delta in per_atom:
                if change is None:
                    trep.propagate(atom, delta)
                    continue
                record: dict[int, dict] = {}
                if trep.propagate(atom, delta, record):
                    for row, m in trep.delta_rows(atom, record):
                        change[row] = change.get(row, 0) + m
        trep.version += 1
        if change is None:
            return None
        result = [(row, k) for row, k in change.items() if k]
        mat = self._materialized
        if mat is not None:
            for row, k in result:
                v = mat.get(row, 0) + k
                if v:
                    mat[row] = v
                else:
                    del mat[row]
        if result:
            for cb in list(self._subscribers):
                cb(list(result))
        return result
