"""Weights on one sorted axis of values, with range sums: :class:`WeightOrder`.

What the keyed chain's ``V(y) = ρ_S(y) · B(y)`` needs (engine/keyedchain.py): only the total
weight per sort value and sums over ranges of values — no tuples, no buckets, nothing to
enumerate. Values sit in sorted chunks of at most 2·B (B = 256) with a parallel list of
weights; a prefix sum is one bisect, one C-level sum of part of a chunk and either one C-level
sum of the chunk totals (up to 128 chunks) or a Fenwick tree over them. ``add`` is O(log n) plus
O(B) C-level list work; a value whose weight reaches 0 is dropped.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import islice
from typing import Any

_LOAD = 256
_FEN_MIN = 128


class WeightOrder:
    """value -> weight on one order, with ``below``/``upto``/``above``/``atleast``/``range_sum``."""

    __slots__ = ("_values", "_weights", "_maxes", "_csum", "_fen", "total")

    def __init__(self) -> None:
        self._values: list[list] = []
        self._weights: list[list] = []
        self._maxes: list = []
        self._csum: list = []
        self._fen: list | None = None
        self.total: Any = 0

    def __len__(self) -> int:
        return sum(map(len, self._values))

    def add(self, value: Any, d: Any) -> None:
        """Add ``d`` to the weight of ``value``."""
        if not d:
            return
        self.total += d
        maxes = self._maxes
        if not maxes:
            self._values.append([value])
            self._weights.append([d])
            maxes.append(value)
            self._csum.append(d)
            return
        ci = bisect_left(maxes, value)
        if ci == len(maxes):
            ci -= 1
            maxes[ci] = value
        vals = self._values[ci]
        ws = self._weights[ci]
        pos = bisect_left(vals, value)
        self._csum[ci] += d
        if pos < len(vals) and vals[pos] == value:
            w = ws[pos] + d
            if w:
                ws[pos] = w
            else:  # the value's weight is gone: drop it
                del vals[pos], ws[pos]
                if not vals:
                    del self._values[ci], self._weights[ci], maxes[ci], self._csum[ci]
                    self._rebuild()
                    return
                if pos == len(vals):
                    maxes[ci] = vals[-1]
        else:
            vals.insert(pos, value)
            ws.insert(pos, d)
            if len(vals) > 2 * _LOAD:
                half = len(vals) >> 1
                self._values[ci:ci + 1] = [vals[:half], vals[half:]]
                self._weights[ci:ci + 1] = [ws[:half], ws[half:]]
                maxes[ci:ci + 1] = [vals[half - 1], vals[-1]]
                self._csum[ci:ci + 1] = [sum(ws[:half]), sum(ws[half:])]
                self._rebuild()
                return
        fen = self._fen
        if fen is not None:
            i = ci + 1
            n = len(fen)
            while i < n:
                fen[i] += d
                i += i & -i

    def _rebuild(self) -> None:
        csum = self._csum
        n = len(csum)
        if n <= _FEN_MIN:
            self._fen = None
            return
        fen = [0] * (n + 1)
        for i in range(1, n + 1):
            fen[i] += csum[i - 1]
            j = i + (i & -i)
            if j <= n:
                fen[j] += fen[i]
        self._fen = fen

    def _prefix(self, x: Any, inclusive: bool) -> Any:
        """Sum of the weights of values < x (<= x when inclusive)."""
        maxes = self._maxes
        ci = bisect_right(maxes, x) if inclusive else bisect_left(maxes, x)
        if ci == len(maxes):
            return self.total
        vals = self._values[ci]
        pos = bisect_right(vals, x) if inclusive else bisect_left(vals, x)
        ws = self._weights[ci]
        s = sum(islice(ws, pos)) if pos <= len(ws) >> 1 else self._csum[ci] - sum(islice(ws, pos, None))
        if ci:
            fen = self._fen
            if fen is None:
                return s + sum(islice(self._csum, ci))
            while ci:
                s += fen[ci]
                ci &= ci - 1
        return s

    def below(self, x: Any) -> Any:
        return self._prefix(x, False)

    def upto(self, x: Any) -> Any:
        return self._prefix(x, True)

    def above(self, x: Any) -> Any:
        return self.total - self._prefix(x, True)

    def atleast(self, x: Any) -> Any:
        return self.total - self._prefix(x, False)

    def range_sum(self, lo: Any, lo_incl: bool, hi: Any, hi_incl: bool) -> Any:
        """Sum of the weights of values in the range (None = unbounded)."""
        upper = self.total if hi is None else self._prefix(hi, hi_incl)
        if lo is None:
            return upper
        if hi is not None and (lo > hi or (lo == hi and not (lo_incl and hi_incl))):
            return 0
        return upper - self._prefix(lo, not lo_incl)
