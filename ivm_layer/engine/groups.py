"""Index groups: the per-key buckets of the IEDyn indexes (paper 000 §5, after Def. 8).

A :class:`HashGroup` holds the tuples of one hash key with their multiplicities and a
running total (equality-only edges). An :class:`OrderedGroup` additionally orders them by
one *sort value* (the variable of the edge's inequality) and keeps prefix sums of the
multiplicities, so that

=====================================  ==============================================
operation                              cost (n = distinct sort values in the group)
=====================================  ==============================================
``add`` (insert/delete a multiplicity)  O(log n) amortized (+ O(B) list insert, B=256)
``range_sum(lo, hi)``                   O(log n) (Fenwick tree over chunk sums + one
                                        bisect and one C-level slice sum of ≤ 2B items)
``irange(lo, hi)``                      O(log n) to start, then O(1) per tuple
=====================================  ==============================================

Sort values are kept in sorted chunks (like ``sortedcontainers.SortedList``) with a parallel
list of weights per chunk; a Fenwick tree over the chunk totals gives prefix sums across
chunks. Multiplicities in a T-reduct of a positive database are positive, so a value whose
bucket becomes empty is removed and every value in the structure has a non-empty bucket:
iterating a range never visits a dead entry (this is what keeps enumeration delay constant).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import chain
from typing import Any, Iterable, Iterator

_LOAD = 256


class HashGroup:
    """Tuples sharing one hash key: ``items`` maps tuple -> multiplicity; ``total`` is their sum."""

    __slots__ = ("items", "total", "nonunit")

    def __init__(self) -> None:
        self.items: dict[tuple, int] = {}
        self.total = 0
        self.nonunit = 0  # tuples whose multiplicity is not 1 (batch enumeration: 0 = all ones)

    def add(self, t: tuple, d: int) -> None:
        items = self.items
        before = items.get(t, 0)
        v = before + d
        if v:
            items[t] = v
        else:
            del items[t]
        self.total += d
        if before != 1 and before != 0:
            self.nonunit -= 1
        if v != 1 and v != 0:
            self.nonunit += 1

    def __len__(self) -> int:
        return len(self.items)


class OrderedGroup:
    """Tuples of one hash key ordered by a sort value, with O(log n) range sums."""

    __slots__ = ("sort_pos", "buckets", "total", "nonunit", "_chunks", "_bchunks", "_weights", "_maxes",
                 "_csum", "_fen", "_flat")

    def __init__(self, sort_pos: int) -> None:
        self.sort_pos = sort_pos
        self.buckets: dict[Any, dict[tuple, int]] = {}
        self.total = 0
        self.nonunit = 0  # tuples whose multiplicity is not 1 (batch enumeration: 0 = all ones)
        self._chunks: list[list] = []
        self._bchunks: list[list] = []  # the buckets of _chunks' values, in the same layout
        # Per chunk, built on demand by batch enumeration and dropped by any change to the
        # chunk: (tuples, multiplicities, start of each value's run) flattened over its buckets.
        self._flat: list = []
        self._weights: list[list[int]] = []
        self._maxes: list = []
        self._csum: list[int] = []
        self._fen: list[int] = [0]

    def __len__(self) -> int:
        return len(self.buckets)

    # -- maintenance ------------------------------------------------------------------
    def add(self, t: tuple, d: int) -> None:
        value = t[self.sort_pos]
        bucket = self.buckets.get(value)
        self.total += d
        if bucket is None:
            bucket = self.buckets[value] = {t: d}
            if d != 1:
                self.nonunit += 1
            self._insert_value(value, d, bucket)
            return
        before = bucket.get(t, 0)
        v = before + d
        if v:
            bucket[t] = v
        else:
            del bucket[t]
        if before != 1 and before != 0:
            self.nonunit -= 1
        if v != 1 and v != 0:
            self.nonunit += 1
        if bucket:
            self._add_weight(value, d)
        else:
            del self.buckets[value]
            self._remove_value(value)

    def _locate(self, value) -> tuple[int, int]:
        ci = bisect_left(self._maxes, value)
        return ci, bisect_left(self._chunks[ci], value)

    def _add_weight(self, value, d: int) -> None:
        ci, pos = self._locate(value)
        self._flat[ci] = None
        self._weights[ci][pos] += d
        self._csum[ci] += d
        self._fen_add(ci, d)

    def _fen_add(self, ci: int, d: int) -> None:
        """Fenwick point update: chunk ``ci``'s total changed by ``d``."""
        fen = self._fen
        i = ci + 1
        n = len(fen)
        while i < n:
            fen[i] += d
            i += i & -i

    def _insert_value(self, value, w: int, bucket: dict) -> None:
        chunks = self._chunks
        if not chunks:
            chunks.append([value])
            self._bchunks.append([bucket])
            self._flat.append(None)
            self._weights.append([w])
            self._maxes.append(value)
            self._csum.append(w)
            self._rebuild_fenwick()
            return
        ci = bisect_left(self._maxes, value)
        if ci == len(chunks):
            ci -= 1
            self._maxes[ci] = value
        chunk = chunks[ci]
        pos = bisect_left(chunk, value)
        chunk.insert(pos, value)
        self._bchunks[ci].insert(pos, bucket)
        self._flat[ci] = None
        self._weights[ci].insert(pos, w)
        self._csum[ci] += w
        if len(chunk) > 2 * _LOAD:
            half = len(chunk) >> 1
            wl = self._weights[ci]
            bl = self._bchunks[ci]
            chunks[ci:ci + 1] = [chunk[:half], chunk[half:]]
            self._bchunks[ci:ci + 1] = [bl[:half], bl[half:]]
            self._flat[ci:ci + 1] = [None, None]
            self._weights[ci:ci + 1] = [wl[:half], wl[half:]]
            self._maxes[ci:ci + 1] = [chunk[half - 1], chunk[-1]]
            self._csum[ci:ci + 1] = [sum(wl[:half]), sum(wl[half:])]
            self._rebuild_fenwick()
        else:
            self._fen_add(ci, w)

    def _remove_value(self, value) -> None:
        ci, pos = self._locate(value)
        chunk = self._chunks[ci]
        w = self._weights[ci].pop(pos)
        del chunk[pos]
        del self._bchunks[ci][pos]
        self._flat[ci] = None
        self._csum[ci] -= w
        if not chunk:
            del self._chunks[ci], self._bchunks[ci], self._weights[ci], self._maxes[ci], self._csum[ci]
            del self._flat[ci]
            self._rebuild_fenwick()
            return
        if pos == len(chunk):
            self._maxes[ci] = chunk[-1]
        self._fen_add(ci, -w)

    def _rebuild_fenwick(self) -> None:
        csum = self._csum
        n = len(csum)
        fen = [0] * (n + 1)
        for i in range(1, n + 1):
            fen[i] += csum[i - 1]
            j = i + (i & -i)
            if j <= n:
                fen[j] += fen[i]
        self._fen = fen

    # -- queries ----------------------------------------------------------------------
    def min_tuple(self) -> tuple:
        """A tuple with the smallest sort value (the group is not empty)."""
        return next(iter(self.buckets[self._chunks[0][0]]))

    def max_tuple(self) -> tuple:
        """A tuple with the largest sort value (the group is not empty)."""
        return next(iter(self.buckets[self._chunks[-1][-1]]))

    def edge_in(self, lo, lo_incl: bool, hi, hi_incl: bool, last: bool = False) -> tuple | None:
        """A tuple with the smallest (``last``: largest) sort value in the range, or None."""
        span = self._span(lo, lo_incl, hi, hi_incl)
        if span is None:
            return None
        ci, pos, cj, end = span
        value = self._chunks[cj][end - 1] if last else self._chunks[ci][pos]
        return next(iter(self.buckets[value]))

    def _prefix(self, value, inclusive: bool) -> int:
        """Sum of the weights of sort values < value (or <= value when inclusive)."""
        maxes = self._maxes
        ci = bisect_right(maxes, value) if inclusive else bisect_left(maxes, value)
        if ci == len(maxes):
            return self.total
        chunk = self._chunks[ci]
        pos = bisect_right(chunk, value) if inclusive else bisect_left(chunk, value)
        s = sum(self._weights[ci][:pos]) if pos else 0
        fen = self._fen
        i = ci
        while i > 0:
            s += fen[i]
            i -= i & -i
        return s

    def range_sum(self, lo, lo_incl: bool, hi, hi_incl: bool) -> int:
        """Sum of multiplicities of tuples whose sort value lies in the range (None = unbounded)."""
        upper = self.total if hi is None else self._prefix(hi, hi_incl)
        if lo is None:
            return upper
        if hi is not None and (lo > hi or (lo == hi and not (lo_incl and hi_incl))):
            return 0  # an empty range (not clamped: ring payloads may sum to a negative value)
        return upper - self._prefix(lo, not lo_incl)

    def irange(self, lo, lo_incl: bool, hi, hi_incl: bool) -> Iterator[tuple[tuple, int]]:
        """Yield ``(tuple, multiplicity)`` for sort values in the range, ascending."""
        chunks = self._chunks
        if not chunks:
            return
        if lo is None:
            ci, pos = 0, 0
        else:
            maxes = self._maxes
            ci = bisect_left(maxes, lo) if lo_incl else bisect_right(maxes, lo)
            if ci == len(chunks):
                return
            c = chunks[ci]
            pos = bisect_left(c, lo) if lo_incl else bisect_right(c, lo)
        buckets = self.buckets
        nchunks = len(chunks)
        while ci < nchunks:
            chunk = chunks[ci]
            for j in range(pos, len(chunk)):
                v = chunk[j]
                if hi is not None and (v > hi or (v == hi and not hi_incl)):
                    return
                yield from buckets[v].items()
            ci += 1
            pos = 0

    def _span(self, lo, lo_incl: bool, hi, hi_incl: bool) -> tuple[int, int, int, int] | None:
        """Chunk and position of the first value in the range and of the end (exclusive)."""
        chunks = self._chunks
        if not chunks:
            return None
        maxes = self._maxes
        if lo is None:
            ci, pos = 0, 0
        else:
            ci = bisect_left(maxes, lo) if lo_incl else bisect_right(maxes, lo)
            if ci == len(chunks):
                return None
            c = chunks[ci]
            pos = bisect_left(c, lo) if lo_incl else bisect_right(c, lo)
        if hi is None:
            cj, end = len(chunks) - 1, len(chunks[-1])
        else:
            cj = bisect_right(maxes, hi) if hi_incl else bisect_left(maxes, hi)
            if cj == len(chunks):
                cj, end = len(chunks) - 1, len(chunks[-1])
            else:
                c = chunks[cj]
                end = bisect_right(c, hi) if hi_incl else bisect_left(c, hi)
        if cj < ci or (cj == ci and end <= pos):
            return None
        return ci, pos, cj, end

    def flat_in(self, lo, lo_incl: bool, hi, hi_incl: bool) -> tuple[Iterable[tuple], Iterable[Any]]:
        """The tuples in the range and, in the same order, their multiplicities: two iterables
        over per-chunk flat lists (batch enumeration; a changed chunk is re-flattened once)."""
        span = self._span(lo, lo_incl, hi, hi_incl)
        if span is None:
            return (), ()
        ci, pos, cj, end = span
        flat = self._flat
        ks, vs = [], []
        for c in range(ci, cj + 1):
            f = flat[c]
            if f is None:
                f = flat[c] = self._flatten(c)
            keys, vals, starts = f
            a = starts[pos] if c == ci else 0
            b = starts[end] if c == cj else len(keys)
            if a == 0 and b == len(keys):
                ks.append(keys)
                vs.append(vals)
            else:
                ks.append(keys[a:b])
                vs.append(vals[a:b])
        if len(ks) == 1:
            return ks[0], vs[0]
        return chain.from_iterable(ks), chain.from_iterable(vs)

    def _flatten(self, c: int) -> tuple[list, list, list]:
        keys: list = []
        vals: list = []
        starts = [0]
        for b in self._bchunks[c]:
            keys.extend(b)
            vals.extend(b.values())
            starts.append(len(keys))
        return keys, vals, starts

    def buckets_in(self, lo, lo_incl: bool, hi, hi_incl: bool) -> Iterable[dict[tuple, int]]:
        """The buckets (``{tuple: multiplicity}``) of the sort values in the range, ascending.

        Lazy per chunk (at most 2·B values are sliced at a time) and iterated at C speed:
        this is what enumeration loops over.
        """
        span = self._span(lo, lo_incl, hi, hi_incl)
        if span is None:
            return ()
        ci, pos, cj, end = span
        bchunks = self._bchunks
        if ci == cj:
            return bchunks[ci][pos:end]
        parts = [bchunks[ci][pos:]] + [bchunks[k] for k in range(ci + 1, cj)] + [bchunks[cj][:end]]
        return chain.from_iterable(parts)
