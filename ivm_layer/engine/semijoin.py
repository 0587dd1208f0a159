"""Semi-joins and anti-joins: ``[NOT] EXISTS (…)`` and ``[NOT] IN (SELECT …)`` (:class:`SemiJoinView`).

The outer rows come from a left view (visible columns followed by key columns), the subquery's
keys from a right view. The engine keeps per key the number of subquery rows (and, for
``NOT IN``, how many are NULL and how many there are in all) and the left rows grouped by key.
A left change costs O(1) per changed row; a key whose count crosses zero emits its left rows
(exactly the view's change); for ``NOT IN`` a NULL appearing in (or the last row leaving) the
subquery flips every outer row, as SQL's NULL rules say. Memory: the left view's rows plus one
count per subquery key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..errors import ConcurrentModificationError, UpdateError
from .composite import CompositeView
from .view import Change, Prepared, combined_stats, tell


class SemiJoinView(CompositeView):
    """A view filtered by a (correlated) subquery condition (View API)."""

    made_of = "a subquery condition"

    def __init__(self, mode: str, left: Any, right: Any, nkeys: int, columns: list[str],
                 distinct: bool = False, sql: str = "", text: str = ""):
        self.sql = sql
        self.mode = mode
        self.text = text
        self.branches = [left, right]
        self.columns = list(columns)
        self._nvis = len(left.columns) - nkeys
        self._nkeys = nkeys
        self._distinct = distinct
        self._right: dict[tuple, int] = {}  # key -> number of subquery rows with it (no NULL keys)
        self._right_total = 0
        self._right_nulls = 0
        self._left: dict[tuple, dict[tuple, int]] = {}  # key -> {left row: multiplicity}
        self._counts: dict[tuple, int] = {}  # visible output row -> multiplicity
        self._total = 0
        self._version = 0
        self._subscribers: list[Callable[[Change], Any]] = []

    # -- introspection ------------------------------------------------------------------


    @property
    def query_class(self) -> str:
        return self.branches[0].query_class

    def explain(self) -> str:
        lines = [f"view columns: {', '.join(self.columns)}",
                 f"{self.mode.upper()} (subquery) filter: {self.text}" if self.text else self.mode.upper(),
                 f"per key the count of subquery rows ({len(self._right)} keys) and the outer rows by key "
                 f"({sum(len(v) for v in self._left.values())} rows): O(1) per changed outer row; a key whose "
                 "count crosses zero emits its outer rows" + ("; a NULL entering or the last row leaving the "
                                                               "subquery re-checks every outer row"
                                                               if self.mode == "not in" else ""),
                 "outer rows:"]
        lines.extend("    " + line for line in self.branches[0].explain().splitlines())
        lines.append("subquery:")
        lines.extend("    " + line for line in self.branches[1].explain().splitlines())
        return "\n".join(lines)

    def stats(self) -> dict[str, int]:
        return combined_stats(self.branches, len(self._right) + sum(len(v) for v in self._left.values())
                              + len(self._counts))


    def __repr__(self) -> str:
        return f"<ivm_layer.SemiJoinView {self.mode} columns={self.columns} rows={len(self)}>"

    # -- reading ------------------------------------------------------------------------
    def rows(self) -> Iterator[tuple[tuple, int]]:
        v0 = self._version
        for row, k in self._counts.items():
            yield (row, 1) if self._distinct else (row, k)
            if self._version != v0:
                raise ConcurrentModificationError(
                    "the view was updated while this enumeration was open; take list(view.rows()) first")

    def __len__(self) -> int:
        return len(self._counts) if self._distinct else self._total

    # -- writing ------------------------------------------------------------------------
    def prepare(self, batch: Mapping) -> Prepared:
        """Phase one: split the batch between the outer and the subquery view and prepare both
        (raises, changes nothing). Cost: the two views' own ``prepare``."""
        parts = self.split_batch(batch)
        steps = self.prepare_each(self.branches, parts)
        return Prepared(self, self._version, steps)

    def _ok(self, key: tuple, right: dict[tuple, int], total: int, nulls: int) -> bool:
        mode = self.mode
        if mode == "not in":
            return total == 0 or (None not in key and right.get(key, 0) == 0 and nulls == 0)
        found = None not in key and right.get(key, 0) > 0
        return found if mode in ("exists", "in") else not found

    def commit(self, prepared: Prepared, want_change: bool = False, notify: bool = True) -> Change | None:
        """Phase two: commit both views, then combine their changes (cannot fail). Cost: the two
        commits, O(1) per changed outer row, and per subquery key whose match flips the outer
        rows of that key (``NOT IN``: every key when the subquery becomes (non-)empty or gains or
        loses its NULLs)."""
        if prepared.view is not self or prepared.version != self._version:
            raise UpdateError("this prepared batch is stale: the view changed since prepare(); prepare it again")
        self._version += 1
        lp, rp = prepared.steps
        left_change = (self.branches[0].commit(lp, want_change=True) if lp is not None else None) or ()
        right_change = (self.branches[1].commit(rp, want_change=True) if rp is not None else None) or ()
        nvis = self._nvis
        out: dict[tuple, int] = {}
        right, total, nulls = self._right, self._right_total, self._right_nulls
        # (new left − old left) × old status
        for row, k in left_change:
            key = row[nvis:]
            if self._ok(key, right, total, nulls):
                vis = row[:nvis]
                out[vis] = out.get(vis, 0) + k
            rows = self._left.get(key)
            if rows is None:
                rows = self._left[key] = {}
            m = rows.get(row, 0) + k
            if m:
                rows[row] = m
            else:
                del rows[row]
                if not rows:
                    del self._left[key]
        # new left × (new status − old status)
        if right_change:
            old_total, old_nulls = total, nulls
            touched: dict[tuple, bool] = {}
            for key, k in right_change:
                key = tuple(key[:self._nkeys])
                self._right_total += k
                if None in key:
                    self._right_nulls += k
                    continue
                if key not in touched:
                    touched[key] = self._ok(key, right, old_total, old_nulls)
                n = right.get(key, 0) + k
                if n:
                    right[key] = n
                else:
                    del right[key]
            total, nulls = self._right_total, self._right_nulls
            if self.mode == "not in" and ((old_total == 0) != (total == 0) or (old_nulls == 0) != (nulls == 0)):
                for key in list(self._left):  # untouched keys still hold their old count
                    before = touched[key] if key in touched else self._ok(key, right, old_total, old_nulls)
                    self._flip(key, before, out)
            else:
                for key, before in touched.items():
                    self._flip(key, before, out)
        return self._emit(out, want_change, notify)

    def _flip(self, key: tuple, before: bool, out: dict[tuple, int]) -> None:
        after = self._ok(key, self._right, self._right_total, self._right_nulls)
        if before == after:
            return
        sign = 1 if after else -1
        nvis = self._nvis
        for row, m in self._left.get(key, {}).items():
            vis = row[:nvis]
            out[vis] = out.get(vis, 0) + sign * m

    def _emit(self, out: dict[tuple, int], want_change: bool, notify: bool) -> Change | None:
        counts = self._counts
        result: Change = []
        for row, k in out.items():
            if not k:
                continue
            before = counts.get(row, 0)
            after = before + k
            if after:
                counts[row] = after
            else:
                del counts[row]
            self._total += k
            if not self._distinct:
                result.append((row, k))
            elif before == 0 and after > 0:
                result.append((row, 1))
            elif before > 0 and after == 0:
                result.append((row, -1))
        if notify and result and self._subscribers:
            tell(self._subscribers, result)
        return result if want_change else None
