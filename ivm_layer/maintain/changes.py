"""The one shape of a batch of row changes: :class:`Changes`, ``{table: {row: Δk}}``.

Every driver hands the views its captured changes in this shape (:class:`.viewset.ViewSet`),
and the checkpoint log records it. A ``Changes`` is a ``dict`` of ``dict``: consolidated (one
entry per distinct row of a table, its summed multiplicity change) and without zero entries
(a row inserted and deleted in the same batch is not there at all).

The edges build it in O(the rows they are given), with no second pass:

- a DuckDB statement's captured rows (:meth:`Changes.from_rows`: deleted, inserted);
- PostgreSQL transactions (:meth:`Changes.add_pairs` of a transaction's ``[(row, ±1)]`` in
  stream order; :meth:`Changes.truncate` for a TRUNCATE, relative to the rows held before);
- the daemon's source rows ``(lsn, seq, table, sign, row)`` (:func:`ivm_layer.daemon.state.batch_changes`);
- a checkpoint log line (``{table: [(row, Δk)]}``, :meth:`Changes.of`).

The engine's update methods take ``{table: iterable of (row, k)}``: :meth:`Changes.batch`
hands them each table's ``dict.items()`` (no copy). Rows are tuples of canonical values (a
NaN is :data:`ivm_layer.engine.values.NAN`): the decoders of change streams and checkpoints
produce them; a DuckDB capture passes ``canonical=True``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..engine.values import canonical_row

Row = tuple
Pairs = Iterable[tuple[Row, int]]


class Changes(dict):
    """``{table: {row: Δk}}``, consolidated, no zero entries (see the module docstring)."""

    __slots__ = ()

    # -- building ------------------------------------------------------------------------
    @classmethod
    def of(cls, batch: Mapping[str, Any] | None) -> Changes:
        """A ``Changes`` from any batch shape callers hold: ``{table: [(row, k)]}``,
        ``{table: {row: k}}`` (a ``Counter`` too) or a ``Changes`` (returned as it is).
        O(rows)."""
        if type(batch) is cls:
            return batch
        out = cls()
        for table, rows in (batch or {}).items():
            out.add_pairs(table, rows.items() if isinstance(rows, Mapping) else rows)
        return out

    @classmethod
    def from_rows(cls, table: str, deleted: Iterable[Row] = (), inserted: Iterable[Row] = (),
                  canonical: bool = False) -> Changes:
        """The change of one statement on ``table``: ``deleted`` rows −1 each, ``inserted``
        rows +1 each (an UPDATE's old and new rows; equal ones cancel). ``canonical``: replace
        NaNs by the engine's one NaN first (rows read back from DuckDB). O(rows)."""
        out = cls()
        if canonical:
            deleted = map(canonical_row, deleted)
            inserted = map(canonical_row, inserted)
        out.add_rows(table, deleted, -1)
        out.add_rows(table, inserted, 1)
        return out

    def add(self, table: str, row: Row, k: int = 1) -> None:
        """``row`` of ``table`` changes by ``k``. O(1)."""
        d = self.get(table)
        if d is None:
            if k:
                self[table] = {row: k}
            return
        n = d.get(row, 0) + k
        if n:
            d[row] = n
        else:
            d.pop(row, None)
            if not d:
                del self[table]

    def add_rows(self, table: str, rows: Iterable[Row], k: int) -> None:
        """Each of ``rows`` changes by ``k``. O(rows)."""
        if not k:
            return
        d = self.setdefault(table, {})
        get = d.get
        for row in rows:
            n = get(row, 0) + k
            if n:
                d[row] = n
            else:
                del d[row]
        if not d:
            del self[table]

    def add_pairs(self, table: str, pairs: Pairs) -> None:
        """Each ``(row, k)`` of ``pairs`` (in order). O(pairs)."""
        d = self.setdefault(table, {})
        get = d.get
        for row, k in pairs:
            n = get(row, 0) + k
            if n:
                d[row] = n
            else:
                d.pop(row, None)
        if not d:
            del self[table]

    def merge(self, other: Mapping[str, Mapping[Row, int]]) -> Changes:
        """Add ``other``'s changes to these (in place); returns ``self``. O(other)."""
        for table, rows in other.items():
            self.add_pairs(table, rows.items())
        return self

    def truncate(self, table: str, held: Mapping[Row, int]) -> None:
        """A TRUNCATE of ``table`` at this point of the batch: every row present now goes —
        ``held`` (the rows before the batch) and what the batch added so far. O(held)."""
        d = {row: -k for row, k in held.items() if k}
        if d:
            self[table] = d
        else:
            self.pop(table, None)

    # -- reading -------------------------------------------------------------------------
    def batch(self, tables: Iterable[str] | None = None) -> dict[str, Any]:
        """The engine's batch shape ``{table: (row, k) pairs}`` of ``tables`` (all when None),
        sharing this object's dicts (no copy): hand it to a view before changing ``self``."""
        if tables is None:
            return {t: d.items() for t, d in self.items()}
        return {t: self[t].items() for t in tables if t in self}

    def pairs(self) -> dict[str, list[tuple[Row, int]]]:
        """``{table: [(row, Δk)]}`` (lists: what the checkpoint log and sinks encode). O(rows)."""
        return {t: list(d.items()) for t, d in self.items()}

    def negated(self) -> Changes:
        """The inverse batch (what undoes this one). O(rows)."""
        out = Changes()
        for t, d in self.items():
            out[t] = {row: -k for row, k in d.items()}
        return out

    def only(self, tables: Iterable[str]) -> Changes:
        """The changes of ``tables`` (the same per-table dicts, not copied)."""
        out = Changes()
        for t in tables:
            d = self.get(t)
            if d:
                out[t] = d
        return out

    @property
    def size(self) -> int:
        """Distinct changed rows (entries), all tables. O(tables)."""
        return sum(map(len, self.values()))

    def volume(self) -> int:
        """Σ |Δk|: the row changes this batch stands for. O(rows)."""
        return sum(abs(k) for d in self.values() for k in d.values())

    def applied_to(self, held: Mapping[Row, int], table: str) -> dict[Row, int]:
        """``held`` (a table's rows ``{row: k}``, as a view stores them: canonical) with this
        batch's changes of ``table`` added: the table's rows after the batch (a new dict).
        O(held + changes)."""
        out = dict(held)
        for row, k in self.get(table, {}).items():
            row = canonical_row(row)
            n = out.get(row, 0) + k
            if n:
                out[row] = n
            else:
                out.pop(row, None)
        return out
