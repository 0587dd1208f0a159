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
list of weights per chunk; prefix sums across chunks come from one C-level sum of the chunk
totals while there are at most 128 chunks (32–64k values), from a Fenwick tree over them beyond.
Inside a chunk whose weights are all 1 a prefix sum is a position; the common one-sided sums
(``below``/``upto``/``above``/``atleast``) and a one-chunk group take one bisect. Multiplicities in a T-reduct of a positive database are positive, so a value whose
bucket becomes empty is removed and every value in the structure has a non-empty bucket:
iterating a range never visits a dead entry (this is what keeps enumeration delay constant).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import chain, islice
from typing import Any, Iterable, Iterator

_LOAD = 256
_FEN_MIN = 128  # chunks from which a Fenwick tree over their totals is kept


class HashGroup(dict):
    """Tuples sharing one hash key: the group *is* the dict tuple -> multiplicity (one object
    per group, not a wrapper around a dict); ``total`` is their sum."""

    __slots__ = ("total", "nonunit")

    def __init__(self) -> None:
        self.total = 0
        self.nonunit = 0  # tuples whose multiplicity is not 1 (batch enumeration: 0 = all ones)

    def add(self, t: tuple, d: int) -> Any:
        """Add ``d`` to the multiplicity of ``t``; returns the group's new total."""
        before = self.get(t, 0)
        v = before + d
        if v:
            self[t] = v
        else:
            del self[t]
        if before != 1 and before != 0:
            self.nonunit -= 1
        if v != 1 and v != 0:
            self.nonunit += 1
        total = self.total = self.total + d
        return total

    @classmethod
    def from_items(cls, items: Any) -> "HashGroup":
        """A group holding ``items`` ({tuple: multiplicity}, no zeros)."""
        g = cls.__new__(cls)
        dict.update(g, items)
        vals = list(g.values())
        g.total = sum(vals)
        g.nonunit = len(vals) - vals.count(1)
        return g

    @classmethod
    def from_ones(cls, tuples: Any) -> "HashGroup":
        """A group holding each of ``tuples`` (distinct) once."""
        g = cls.fromkeys(tuples, 1)
        g.total = len(g)
        g.nonunit = 0
        return g

    @classmethod
    def of(cls, t: tuple, d: int) -> "HashGroup":
        """A group holding ``t`` with multiplicity ``d`` (one call where ``HashGroup()`` and
        ``add`` are two)."""
        g = cls.__new__(cls)
        g[t] = d
        g.total = d
        g.nonunit = 0 if d == 1 else 1
        return g

    def __reduce__(self):
        return (_hash_group, (dict(self), self.total, self.nonunit))


def _hash_group(items: dict, total: Any, nonunit: int) -> HashGroup:
    g = HashGroup.__new__(HashGroup)
    dict.update(g, items)
    g.total = total
    g.nonunit = nonunit
    return g


class SortedChunks:
    """Tuples of one hash key ordered by a sort value: the chunked storage, its maintenance and
    prefix sums (:class:`OrderedGroup` adds the range reads and the builders)."""

    __slots__ = ("sort_pos", "buckets", "total", "nonunit", "_chunks", "_bchunks", "_weights", "_maxes",
                 "_csum", "_fen", "_flat", "_multi")

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
        self._fen: list[int] | None = None  # Fenwick tree over the chunk totals (many chunks only)
        # per chunk, its sort values whose weight is not 1: while none, a prefix sum inside
        # the chunk is a position (no slice is summed)
        self._multi: list[int] = []

    def __len__(self) -> int:
        return len(self.buckets)

    def add(self, t: tuple, d: int) -> Any:
        """Add ``d`` to the multiplicity of ``t``; returns the group's new total. One flat method
        (no helper calls on the common paths: an existing value's weight, a new value in a
        chunk that does not split); the Fenwick tree is kept only while there are two or more
        chunks (a prefix inside the first chunk never reads it)."""
        value = t[self.sort_pos]
        buckets = self.buckets
        bucket = buckets.get(value)
        total = self.total = self.total + d
        if bucket is None:  # a new sort value
            bucket = buckets[value] = {t: d}
            if d != 1:
                self.nonunit += 1
            maxes = self._maxes
            if len(maxes) == 1:  # one chunk (up to 2·B values): no chunk search, no Fenwick tree
                chunk = self._chunks[0]
                if value > maxes[0]:
                    maxes[0] = value
                    pos = len(chunk)
                else:
                    pos = bisect_left(chunk, value)
                chunk.insert(pos, value)
                self._bchunks[0].insert(pos, bucket)
                self._weights[0].insert(pos, d)
                self._flat[0] = None
                self._csum[0] = total
                if d != 1:
                    self._multi[0] += 1
                if len(chunk) > 2 * _LOAD:
                    self._split(0)
                return total
            if not maxes:
                self._chunks.append([value])
                self._bchunks.append([bucket])
                self._flat.append(None)
                self._weights.append([d])
                self._multi.append(0 if d == 1 else 1)
                maxes.append(value)
                self._csum.append(d)
                self._fen = None
                return total
            ci = bisect_left(maxes, value)
            if ci == len(maxes):
                ci -= 1
                maxes[ci] = value
            chunk = self._chunks[ci]
            pos = bisect_left(chunk, value)
            chunk.insert(pos, value)
            self._bchunks[ci].insert(pos, bucket)
            self._weights[ci].insert(pos, d)
            self._flat[ci] = None
            self._csum[ci] += d
            if d != 1:
                self._multi[ci] += 1
            if len(chunk) > 2 * _LOAD:
                self._split(ci)
            elif len(maxes) > _FEN_MIN:
                fen = self._fen
                i = ci + 1
                n = len(fen)
                while i < n:
                    fen[i] += d
                    i += i & -i
            return total
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
        maxes = self._maxes
        ci = bisect_left(maxes, value)
        chunk = self._chunks[ci]
        pos = bisect_left(chunk, value)
        weights = self._weights[ci]
        w0 = weights[pos]
        self._flat[ci] = None
        if bucket:
            w1 = weights[pos] = w0 + d
            if w0 != 1:
                self._multi[ci] -= 1
            if w1 != 1:
                self._multi[ci] += 1
            self._csum[ci] += d
        else:  # the value is gone
            del buckets[value]
            del chunk[pos], self._bchunks[ci][pos], weights[pos]
            if w0 != 1:
                self._multi[ci] -= 1
            self._csum[ci] += d  # = -w0: the value's weight drops to 0
            if not chunk:
                del self._chunks[ci], self._bchunks[ci], self._weights[ci], maxes[ci], self._csum[ci]
                del self._flat[ci], self._multi[ci]
                self._rebuild_fenwick()
                return total
            if pos == len(chunk):
                maxes[ci] = chunk[-1]
        if len(maxes) > _FEN_MIN:
            fen = self._fen
            i = ci + 1
            n = len(fen)
            while i < n:
                fen[i] += d
                i += i & -i
        return total

    def _split(self, ci: int) -> None:
        """Split chunk ``ci`` (over 2·B values) in two halves and rebuild the Fenwick tree."""
        chunk = self._chunks[ci]
        half = len(chunk) >> 1
        wl = self._weights[ci]
        bl = self._bchunks[ci]
        self._chunks[ci:ci + 1] = [chunk[:half], chunk[half:]]
        self._bchunks[ci:ci + 1] = [bl[:half], bl[half:]]
        self._flat[ci:ci + 1] = [None, None]
        self._weights[ci:ci + 1] = [wl[:half], wl[half:]]
        self._maxes[ci:ci + 1] = [chunk[half - 1], chunk[-1]]
        self._csum[ci:ci + 1] = [sum(wl[:half]), sum(wl[half:])]
        self._multi[ci:ci + 1] = [sum(1 for w in wl[:half] if w != 1), sum(1 for w in wl[half:] if w != 1)]
        self._rebuild_fenwick()

    def _rebuild_fenwick(self) -> None:
        """The Fenwick tree over the chunk totals; kept only beyond ``_FEN_MIN`` chunks (below,
        a prefix over whole chunks is one C-level sum of their totals)."""
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

    def _prefix(self, value, inclusive: bool) -> int:
        """Sum of the weights of sort values < value (or <= value when inclusive)."""
        maxes = self._maxes
        ci = bisect_right(maxes, value) if inclusive else bisect_left(maxes, value)
        if ci == len(maxes):
            return self.total
        chunk = self._chunks[ci]
        pos = bisect_right(chunk, value) if inclusive else bisect_left(chunk, value)
        s = pos if not self._multi[ci] else self._part(ci, pos)
        if ci:
            if len(maxes) <= _FEN_MIN:  # few chunks: their totals summed at C speed
                return s + sum(islice(self._csum, ci))
            fen = self._fen
            while ci:
                s += fen[ci]
                ci &= ci - 1
        return s

    def _part(self, ci: int, pos: int) -> Any:
        """Sum of the weights of chunk ``ci``'s first ``pos`` values: the position itself
        while every weight there is 1, else the shorter of the two slices summed."""
        if not self._multi[ci]:
            return pos
        ws = self._weights[ci]
        if pos <= len(ws) >> 1:
            return sum(ws[:pos])
        return self._csum[ci] - sum(ws[pos:])

    # the one-sided sums of the generated update code, each one flat function (module end)
    below: Any
    upto: Any
    above: Any
    atleast: Any


class OrderedGroup(SortedChunks):
    """Tuples of one hash key ordered by a sort value, with O(log n) range sums."""

    __slots__ = ()

    @classmethod
    def from_items(cls, sort_pos: int, items: dict) -> "OrderedGroup":
        """A group holding ``items`` ({tuple: multiplicity}, no zeros), built in one sort: the
        sort values in chunks of B (room to grow before a split), their weights, the Fenwick
        tree once."""
        g = cls.__new__(cls)
        g.sort_pos = sort_pos
        buckets: dict = {}
        get = buckets.get
        for t, d in items.items():
            v = t[sort_pos]
            b = get(v)
            if b is None:
                buckets[v] = {t: d}
            else:
                b[t] = d
        g.buckets = buckets
        vals = list(items.values())
        g.total = sum(vals)
        g.nonunit = len(vals) - vals.count(1)
        values = sorted(buckets)
        blist = list(map(buckets.__getitem__, values))
        if len(values) == len(vals):  # one tuple per value: the weights are the multiplicities
            weights = list(map(next, map(iter, map(dict.values, blist))))
        else:
            weights = [sum(b.values()) for b in blist]
        step = _LOAD
        g._chunks = [values[i:i + step] for i in range(0, len(values), step)]
        g._bchunks = [blist[i:i + step] for i in range(0, len(values), step)]
        g._weights = [weights[i:i + step] for i in range(0, len(values), step)]
        g._maxes = [c[-1] for c in g._chunks]
        g._csum = [sum(w) for w in g._weights]
        g._multi = [len(w) - w.count(1) for w in g._weights]
        g._flat = [None] * len(g._chunks)
        g._rebuild_fenwick()
        return g

    @classmethod
    def of(cls, sort_pos: int, t: tuple, d: int) -> "OrderedGroup":
        """A group holding ``t`` with multiplicity ``d`` (one call where ``OrderedGroup(p)`` and
        ``add`` are two)."""
        g = cls.__new__(cls)
        value = t[sort_pos]
        bucket = {t: d}
        g.sort_pos = sort_pos
        g.buckets = {value: bucket}
        g.total = d
        unit = d == 1
        g.nonunit = 0 if unit else 1
        g._chunks = [[value]]
        g._bchunks = [[bucket]]
        g._flat = [None]
        g._weights = [[d]]
        g._maxes = [value]
        g._csum = [d]
        g._fen = None
        g._multi = [0 if unit else 1]
        return g

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


def _one_sided(bis: Any, complement: bool, doc: str) -> Any:
    """A one-sided range sum of :class:`SortedChunks` as one flat function (no helper call:
    it runs once or more per update on most plans): ``bis`` (bisect_left: values < x,
    bisect_right: values <= x) finds the prefix; ``complement`` returns the rest instead."""

    def one_sided(self: SortedChunks, x: Any) -> Any:
        maxes = self._maxes
        n = len(maxes)
        if not n:
            return 0
        ci = bis(maxes, x)
        if ci == n:
            return 0 if complement else self.total
        pos = bis(self._chunks[ci], x)
        if self._multi[ci]:
            ws = self._weights[ci]
            s = sum(ws[:pos]) if pos <= len(ws) >> 1 else self._csum[ci] - sum(ws[pos:])
        else:
            s = pos
        if ci:
            if n <= _FEN_MIN:  # few chunks: their totals summed at C speed
                s += sum(islice(self._csum, ci))
            else:
                fen = self._fen
                while ci:
                    s += fen[ci]
                    ci &= ci - 1
        return self.total - s if complement else s

    one_sided.__doc__ = doc
    return one_sided


SortedChunks.below = _one_sided(bisect_left, False, "Sum of the weights of sort values < x.")
SortedChunks.upto = _one_sided(bisect_right, False, "Sum of the weights of sort values <= x.")
SortedChunks.above = _one_sided(bisect_right, True, "Sum of the weights of sort values > x.")
SortedChunks.atleast = _one_sided(bisect_left, True, "Sum of the weights of sort values >= x.")
