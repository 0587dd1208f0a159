"""Heavy/light parameterized views (paper 004, Cor. 18): ``WITH (epsilon = ε)`` on a CQAP1 view.

The rows of the view's tables are partitioned by their value of the key K
(``planner/heavylight.py``): a K-value is heavy once its degree (rows carrying it, over all the
view's tables) reaches θ = M^ε, light again below θ/2, where M is fixed at the last rebuild
(N < M, rebuilt with M = 2N when N reaches M or falls below M/4). Three structures:

* ``heavy``: a CQAP0 :class:`~.lookup.ParamView` of ``Q(O∖K | I ∪ K)`` over the heavy rows;
* ``light``: an answer-map :class:`~.lookup.ParamView` of ``Q(O | I)`` over the light rows;
* the view itself (its T-representation over all rows) for ``rows()``, validation and sessions.

An update: O(1) bookkeeping, O(1) on the heavy part, O(θ) = O(N^ε) on the light part (the
answer change), plus moves (a K-value changing side moves its < 2θ rows: amortized O(1) per
update thanks to the θ/2 gap) and rebuilds (O(N^{1+ε}) after Ω(N) updates): O(N^ε) amortized.
A lookup: the light answers (O(1) delay), then one O(1) probe of ``heavy`` per heavy K-value
(≤ 2N/θ of them): O(N^{1−ε}) delay.
"""

from __future__ import annotations

from typing import Any, Iterator

from ..planner import Plan
from .lookup import ConstantColumnsView, ParamView
from .view import View

MIN_M = 16  # below this size the threshold does not shrink further (rebuilds stay amortized)


class HeavyLightView(ParamView):
    """A CQAP1 parameterized view with the heavy/light trade-off (module docstring)."""

    def __init__(self, plan: Plan, sql: str, params: list[str], columns: list[str], *,
                 hl: Any, heavy: ParamView, light: ParamView, hidden: int = 0, **kwargs: Any):
        super().__init__(plan, sql, params, columns, False, **kwargs)
        self._hidden = hidden  # key variables kept at the end of the base rows (a bound key)
        self._answers = None  # no answer map over all rows: the two parts answer lookups
        self.cqap0 = False
        self.epsilon = hl.epsilon
        self._hl = hl
        self._heavy = heavy
        self._light = light
        self._kpos = hl.key_positions
        self._index: dict[tuple, dict[str, dict[tuple, int]]] = {}  # K-value -> table -> {row: k}
        self._deg: dict[tuple, int] = {}  # K-value -> distinct rows carrying it
        self._hot: dict[tuple, None] = {}  # the heavy K-values (insertion-ordered set)
        self._n = len(self._eq)
        self._size = 0  # N: distinct rows of the view's tables
        self._m = MIN_M
        self._theta = float(self._m) ** self.epsilon
        self.rebuilds = 0
        self.moves = 0
        out = hl.column_vars
        self._build = [("h", hl.heavy_columns.index(v)) if v in hl.heavy_columns else ("k", hl.key.index(v))
                       for v in out]

    def __repr__(self) -> str:
        return (f"<ivm_layer.HeavyLightView ε={self.epsilon:g} params={self.params} columns={self.columns} "
                f"heavy={len(self._hot)} θ={self._theta:.3g}>")

    def explain(self) -> str:
        return super().explain() + (
            f"\nheavy/light now: N = {self._size}, M = {self._m}, θ = {self._theta:.4g}, "
            f"{len(self._hot)} heavy of {len(self._deg)} key values, {self.moves} moves, {self.rebuilds} rebuilds")

    def stats(self) -> dict[str, int]:
        s = dict(super().stats())
        s.update(heavy_keys=len(self._hot), key_values=len(self._deg), hl_moves=self.moves,
                 hl_rebuilds=self.rebuilds)
        return s

    # -- lookups -------------------------------------------------------------------------
    def lookup(self, *args: Any, **kwargs: Any) -> Iterator[tuple[tuple, int]]:
        """``(row over columns, multiplicity)`` for these inputs: the light answers, then the
        heavy part probed once per heavy key value (O(N^{1−ε}) delay)."""
        values = self._inputs(args, kwargs)
        if any(v is None for v in values):
            return iter(())
        if self._hl.boolean:
            return self._sum(values)
        return self._union(values)

    def _union(self, values: tuple) -> Iterator[tuple[tuple, int]]:
        v0 = self._trep.version
        yield from self._light.lookup(*values)
        heavy, build = self._heavy, self._build
        for k in self._hot:
            for hrow, m in heavy.lookup(*values, *k):
                yield tuple(hrow[i] if src == "h" else k[i] for src, i in build), m
                if self._trep.version != v0:
                    raise self._stale_error()
            if self._trep.version != v0:
                raise self._stale_error()

    def _sum(self, values: tuple) -> Iterator[tuple[tuple, int]]:
        v0 = self._trep.version
        total = sum(m for _, m in self._light.lookup(*values))
        heavy = self._heavy
        for k in self._hot:
            for _, m in heavy.lookup(*values, *k):
                total += m
        if self._trep.version != v0:
            raise self._stale_error()
        if total:
            yield (), total

    @staticmethod
    def _stale_error():
        from ..errors import ConcurrentModificationError
        return ConcurrentModificationError(
            "the view was updated while this lookup was open; take list(view.lookup(...)) first")

    # -- all input/output pairs --------------------------------------------------------------
    def rows(self) -> Iterator[tuple[tuple, int]]:
        """Every ``params + columns`` pair. With a bound key (Boolean lookups) the base rows carry
        the key too, so that updates stay O(1) there: here they are summed over it (O(rows))."""
        if not self._hidden:
            return super().rows()
        width = self._n + self._nout
        out: dict[tuple, int] = {}
        for row, m in super().rows():
            r = row[:width]
            out[r] = out.get(r, 0) + m
        return iter(list(out.items()))

    def __len__(self) -> int:
        if not self._hidden:
            return super().__len__()
        return sum(m for _, m in self.rows())

    # -- updates -------------------------------------------------------------------------
    def _single(self, table: str, row: Any, k: int) -> bool:
        return False  # every update goes through _commit, which routes it to the parts

    def _commit(self, steps: list, want_change: bool):
        change = View._commit(self, steps, want_change)
        for step in steps:
            self._route(step[0], step[1])
        return change

    def _route(self, table: str, changes: dict[tuple, int]) -> None:
        pos = self._kpos.get(table)
        if pos is None:
            return
        by_key: dict[tuple, list[tuple[tuple, int]]] = {}
        for row, k in changes.items():
            by_key.setdefault(tuple(row[p] for p in pos), []).append((row, k))
        newdeg: dict[tuple, int] = {}
        grow = 0
        for key, chs in by_key.items():
            rows = self._index.get(key, {}).get(table, {})
            d = self._deg.get(key, 0)
            for row, k in chs:
                old = rows.get(row, 0)
                d += (old == 0 and old + k != 0) - (old != 0 and old + k == 0)
            grow += d - self._deg.get(key, 0)
            newdeg[key] = d
        size = self._size + grow
        rebuild = size >= self._m or (size < self._m // 4 and self._m > MIN_M)
        if rebuild:
            self._m = max(MIN_M, 2 * size)
            self._theta = float(self._m) ** self.epsilon
            self.rebuilds += 1
        theta = self._theta
        hot = self._hot
        to_heavy: dict[str, dict[tuple, int]] = {}
        to_light: dict[str, dict[tuple, int]] = {}
        flips: list[tuple[tuple, bool]] = []

        def status(key: tuple, d: int) -> bool:
            if rebuild:
                return d >= theta and d > 0
            return (d >= theta and d > 0) if key not in hot else d >= theta / 2 and d > 0

        for key, chs in by_key.items():
            was = key in hot
            now = status(key, newdeg[key])
            if was == now:
                side = to_heavy if now else to_light
                dst = side.setdefault(table, {})
                for row, k in chs:
                    dst[row] = dst.get(row, 0) + k
            else:  # move the rows it had, then add the change on the new side
                self._move(key, to_heavy if was else to_light, to_light if was else to_heavy)
                dst = (to_heavy if now else to_light).setdefault(table, {})
                for row, k in chs:
                    dst[row] = dst.get(row, 0) + k
                flips.append((key, now))
        if rebuild:
            for key, d in self._deg.items():
                if key in by_key:
                    continue
                was = key in hot
                now = status(key, d)
                if was != now:
                    self._move(key, to_heavy if was else to_light, to_light if was else to_heavy)
                    flips.append((key, now))
        for key, now in flips:
            self.moves += 1
            if now:
                hot[key] = None
            else:
                hot.pop(key, None)
        for key, chs in by_key.items():  # the index and degrees after the change
            per = self._index.setdefault(key, {})
            rows = per.setdefault(table, {})
            for row, k in chs:
                m = rows.get(row, 0) + k
                if m:
                    rows[row] = m
                else:
                    del rows[row]
            if not rows:
                del per[table]
            if newdeg[key]:
                self._deg[key] = newdeg[key]
            else:
                self._deg.pop(key, None)
                self._index.pop(key, None)
                hot.pop(key, None)
        self._size = size
        for part, batch in ((self._light, to_light), (self._heavy, to_heavy)):
            batch = {t: [(r, k) for r, k in rows.items() if k] for t, rows in batch.items()}
            batch = {t: rows for t, rows in batch.items() if rows}
            if len(batch) == 1:
                (t, rows), = batch.items()
                if len(rows) == 1 and rows[0][1] in (1, -1):  # one row: the part's single-row path
                    (part.insert if rows[0][1] > 0 else part.delete)(t, rows[0][0])
                    continue
            if batch:
                part.apply(batch)

    def _move(self, key: tuple, leave: dict, enter: dict) -> None:
        """Take every row of ``key`` (as it was before this batch) out of one part and into the other."""
        for table, rows in self._index.get(key, {}).items():
            out, into = leave.setdefault(table, {}), enter.setdefault(table, {})
            for row, k in rows.items():
                out[row] = out.get(row, 0) - k
                into[row] = into.get(row, 0) + k


class HeavyLightConstantView(ConstantColumnsView, HeavyLightView):
    """A heavy/light view whose SELECT list holds constants (004's Boolean ``SELECT 1 AS hit``)."""
