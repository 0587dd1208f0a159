"""An order-statistic multiset: the per-partition structure of window functions and Top-N.

:class:`OrderStatList` keeps distinct, totally ordered keys in sorted chunks (like
``sortedcontainers.SortedList``), each with a multiplicity and a few additive *fields* (field 0
is the multiplicity itself; the others are, say, the sum of a window aggregate's argument over
the key's copies), plus optional *extreme trackers* (one value per key, for running MIN/MAX).
Fenwick trees over the chunk totals give prefix sums across chunks, a segment tree over chunk
extremes gives prefix minima and maxima.

=======================================  =================================================
operation                                cost (n keys, B = chunk size 256)
=======================================  =================================================
``add(key, deltas)``                     O(log n) + O(B) list insert; a chunk split
                                         rebuilds the chunk indexes (O(n/B), every B/2
                                         inserts at most)
``before(key)``: prefix field sums       O(log n) (Fenwick) + one C-level slice sum
``extreme_before(key, t)``               O(log n) (segment tree) + one chunk slice
``iter_from(key)`` / ``iter_before(key)``  O(log n) to start, O(1) per key
``count(key)`` / ``kth(pos)``             O(1) (a dict) / O(log n)
=======================================  =================================================
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from typing import Any

_LOAD = 256
_NONE = object()  # "no value" in an extreme tracker (a key whose value is NULL, an empty chunk)


class _Fenwick:
    __slots__ = ("tree",)

    def __init__(self, values: list) -> None:
        tree = [0] + list(values)
        for i in range(1, len(tree)):
            j = i + (i & -i)
            if j < len(tree):
                tree[j] = tree[j] + tree[i]
        self.tree = tree

    def add(self, i: int, d: Any) -> None:
        tree = self.tree
        i += 1
        n = len(tree)
        while i < n:
            tree[i] = tree[i] + d
            i += i & -i

    def prefix(self, i: int) -> Any:
        """Sum of the first ``i`` entries."""
        tree = self.tree
        s = 0
        while i > 0:
            s = s + tree[i]
            i -= i & -i
        return s


def _better(a: Any, b: Any, lowest: bool) -> Any:
    if a is _NONE:
        return b
    if b is _NONE:
        return a
    return (b if b < a else a) if lowest else (b if b > a else a)


class _Extremes:
    """A segment tree of per-chunk extremes (min if ``lowest`` else max); ``_NONE`` = empty."""

    __slots__ = ("lowest", "size", "tree")

    def __init__(self, leaves: list, lowest: bool) -> None:
        self.lowest = lowest
        size = 1
        while size < max(1, len(leaves)):
            size *= 2
        self.size = size
        tree = [_NONE] * (2 * size)
        tree[size:size + len(leaves)] = leaves
        for i in range(size - 1, 0, -1):
            tree[i] = _better(tree[2 * i], tree[2 * i + 1], lowest)
        self.tree = tree

    def set(self, i: int, v: Any) -> None:
        tree, lowest = self.tree, self.lowest
        i += self.size
        tree[i] = v
        i //= 2
        while i:
            tree[i] = _better(tree[2 * i], tree[2 * i + 1], lowest)
            i //= 2

    def prefix(self, n: int) -> Any:
        """The extreme of the first ``n`` chunks."""
        out = _NONE
        lo, hi = self.size, self.size + n
        tree, lowest = self.tree, self.lowest
        while lo < hi:
            if lo & 1:
                out = _better(out, tree[lo], lowest)
                lo += 1
            if hi & 1:
                hi -= 1
                out = _better(out, tree[hi], lowest)
            lo //= 2
            hi //= 2
        return out


def _chunk_extreme(values: list, lowest: bool) -> Any:
    present = [v for v in values if v is not _NONE]
    if not present:
        return _NONE
    return min(present) if lowest else max(present)


class OrderStatList:
    """Sorted distinct keys, each with additive fields (field 0 = multiplicity) and values for
    ``extremes`` trackers (``True`` = minimum, ``False`` = maximum); see the module docstring."""

    __slots__ = ("nfields", "extremes", "counts", "totals", "_keys", "_fields", "_ext", "_maxes",
                 "_fen", "_seg")

    def __init__(self, nfields: int = 1, extremes: tuple[bool, ...] = ()) -> None:
        self.nfields = nfields
        self.extremes = extremes
        self.counts: dict[Any, int] = {}  # key -> multiplicity
        self.totals = [0] * nfields
        self._keys: list[list] = []
        self._fields: list[list[list]] = [[] for _ in range(nfields)]  # [field][chunk][i]
        self._ext: list[list[list]] = [[] for _ in extremes]  # [tracker][chunk][i]
        self._maxes: list = []
        self._fen: list[_Fenwick] = []
        self._seg: list[_Extremes] = []
        self._rebuild()

    def __len__(self) -> int:
        return len(self.counts)

    @property
    def total(self) -> int:
        return self.totals[0]

    def count(self, key: Any) -> int:
        return self.counts.get(key, 0)

    # -- updates --------------------------------------------------------------------------------
    def add(self, key: Any, deltas: tuple, values: tuple = ()) -> None:
        """Add ``deltas`` to ``key``'s fields (inserting it; removing it when its multiplicity
        becomes 0). ``values``: the key's value per extreme tracker (``_NONE``-able via None),
        used when the key is inserted."""
        counts = self.counts
        before = counts.get(key, 0)
        after = before + deltas[0]
        if after < 0:
            raise ValueError("negative multiplicity in an order-statistic list")
        totals = self.totals
        for j, d in enumerate(deltas):
            totals[j] = totals[j] + d
        if before and after:
            counts[key] = after
            ci = bisect_left(self._maxes, key)
            i = bisect_left(self._keys[ci], key)
            for j, d in enumerate(deltas):
                if d:
                    col = self._fields[j][ci]
                    col[i] = col[i] + d
                    self._fen[j].add(ci, d)
            return
        if after:
            counts[key] = after
            self._insert(key, deltas, values)
        else:
            del counts[key]
            self._remove(key, deltas)

    def _insert(self, key: Any, deltas: tuple, values: tuple) -> None:
        if not self._keys:
            self._keys.append([key])
            for j in range(self.nfields):
                self._fields[j].append([deltas[j]])
            for t in range(len(self.extremes)):
                self._ext[t].append([_NONE if values[t] is None else values[t]])
            self._maxes.append(key)
            self._rebuild()
            return
        ci = bisect_left(self._maxes, key)
        if ci == len(self._maxes):
            ci -= 1
            self._maxes[ci] = key
        keys = self._keys[ci]
        i = bisect_left(keys, key)
        keys.insert(i, key)
        for j in range(self.nfields):
            self._fields[j][ci].insert(i, deltas[j])
            self._fen[j].add(ci, deltas[j])
        for t, lowest in enumerate(self.extremes):
            v = _NONE if values[t] is None else values[t]
            self._ext[t][ci].insert(i, v)
            self._seg[t].set(ci, _better(self._seg[t].tree[self._seg[t].size + ci], v, lowest))
        if len(keys) > 2 * _LOAD:
            half = len(keys) // 2
            self._keys[ci:ci + 1] = [keys[:half], keys[half:]]
            for j in range(self.nfields):
                col = self._fields[j][ci]
                self._fields[j][ci:ci + 1] = [col[:half], col[half:]]
            for t in range(len(self.extremes)):
                col = self._ext[t][ci]
                self._ext[t][ci:ci + 1] = [col[:half], col[half:]]
            self._maxes[ci:ci + 1] = [keys[half - 1], keys[-1]]
            self._rebuild()

    def _remove(self, key: Any, deltas: tuple) -> None:
        ci = bisect_left(self._maxes, key)
        keys = self._keys[ci]
        i = bisect_left(keys, key)
        del keys[i]
        for j in range(self.nfields):
            del self._fields[j][ci][i]
            if deltas[j]:
                self._fen[j].add(ci, deltas[j])
        for t, lowest in enumerate(self.extremes):
            col = self._ext[t][ci]
            v = col.pop(i)
            if v is not _NONE and v == self._seg[t].tree[self._seg[t].size + ci]:
                self._seg[t].set(ci, _chunk_extreme(col, lowest))
        if not keys:
            del self._keys[ci]
            for j in range(self.nfields):
                del self._fields[j][ci]
            for t in range(len(self.extremes)):
                del self._ext[t][ci]
            del self._maxes[ci]
            self._rebuild()
        elif i == len(keys):
            self._maxes[ci] = keys[-1]

    def _rebuild(self) -> None:
        self._fen = [_Fenwick([sum(c) for c in self._fields[j]]) for j in range(self.nfields)]
        self._seg = [_Extremes([_chunk_extreme(c, lowest) for c in self._ext[t]], lowest)
                     for t, lowest in enumerate(self.extremes)]

    # -- queries --------------------------------------------------------------------------------
    def _at(self, key: Any) -> tuple[int, int]:
        """(chunk, index) of the first key >= ``key`` (chunk = number of chunks if none)."""
        ci = bisect_left(self._maxes, key)
        if ci == len(self._maxes):
            return ci, 0
        return ci, bisect_left(self._keys[ci], key)

    def before(self, key: Any) -> list:
        """Per field, the sum over the keys < ``key``."""
        ci, i = self._at(key)
        out = []
        for j in range(self.nfields):
            s = self._fen[j].prefix(ci)
            if i:
                s = s + sum(self._fields[j][ci][:i])
            out.append(s)
        return out

    def count_before(self, key: Any) -> int:
        ci, i = self._at(key)
        s = self._fen[0].prefix(ci)
        return s + sum(self._fields[0][ci][:i]) if i else s

    def extreme_before(self, key: Any, t: int) -> Any:
        """The tracker ``t`` extreme over the keys < ``key`` (None when there is none)."""
        ci, i = self._at(key)
        lowest = self.extremes[t]
        out = self._seg[t].prefix(ci)
        if i:
            out = _better(out, _chunk_extreme(self._ext[t][ci][:i], lowest), lowest)
        return None if out is _NONE else out

    def kth(self, pos: int) -> Any:
        """The key holding copy number ``pos`` (0-based, copies in key order); None past the end."""
        if pos < 0 or pos >= self.totals[0]:
            return None
        fen = self._fen[0]
        # binary lifting on the Fenwick tree: the last chunk whose prefix is <= pos
        tree = fen.tree
        ci, rest = 0, pos
        step = 1
        while step * 2 < len(tree):
            step *= 2
        while step:
            nxt = ci + step
            if nxt < len(tree) and tree[nxt] <= rest:
                ci = nxt
                rest -= tree[nxt]
            step //= 2
        for key, c in zip(self._keys[ci], self._fields[0][ci]):
            if rest < c:
                return key
            rest -= c
        return None

    def first(self) -> Any:
        return self._keys[0][0] if self._keys else None

    def iter_from(self, key: Any) -> Iterator[tuple[Any, int]]:
        """``(key, multiplicity)`` for the keys >= ``key``, ascending."""
        ci, i = self._at(key)
        keys, cnts = self._keys, self._fields[0]
        while ci < len(keys):
            chunk, cc = keys[ci], cnts[ci]
            while i < len(chunk):
                yield chunk[i], cc[i]
                i += 1
            ci += 1
            i = 0

    def iter_before(self, key: Any) -> Iterator[tuple[Any, int]]:
        """``(key, multiplicity)`` for the keys < ``key``, descending."""
        ci, i = self._at(key)
        keys, cnts = self._keys, self._fields[0]
        if ci == len(keys):
            ci, i = ci - 1, len(keys[ci - 1]) if keys else 0
        while ci >= 0:
            chunk, cc = keys[ci], cnts[ci]
            i -= 1
            while i >= 0:
                yield chunk[i], cc[i]
                i -= 1
            ci -= 1
            if ci >= 0:
                i = len(keys[ci])

    def last_le(self, key: Any) -> Any:
        """The largest key <= ``key`` (None if there is none)."""
        ci = bisect_right(self._maxes, key)
        if ci < len(self._maxes):
            chunk = self._keys[ci]
            i = bisect_right(chunk, key)
            if i:
                return chunk[i - 1]
        if ci:
            return self._keys[ci - 1][-1]
        return None
