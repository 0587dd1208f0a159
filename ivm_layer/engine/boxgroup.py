"""Groups ordered on several variables at once: the multi-level index of an edge that carries
several inequalities (paper 000 §5, "lexicographic order" with several inequalities per edge).

One inequality per edge orders a group on one variable (:class:`~.groups.OrderedGroup`). With
inequalities on k ≥ 2 variables of the indexed side (``R.a < S.d AND R.b < S.e``) the admitted
tuples form a k-dimensional box, and one order leaves admitted and rejected tuples interleaved:
walking it costs O(n) per probe. A :class:`BoxGroup` keeps the tuples in k-level range trees
(000's multi-level index; a range tree in the sense of Bentley), so that

===============================  ==================================================================
operation                        cost (n = tuples in the group, k = variables of the box)
===============================  ==================================================================
``add`` (a multiplicity change)   O(log^k n) amortized (logarithmic method, below)
``box_sum(bounds)``               O(log^(k+1) n): a range sum over the box (update propagation)
``box_items(bounds)``             O(log^(k+1) n) to start and between two reported tuples, plus
                                  the superseded entries inside the box (see below)
``from_items``                    O(n log^k n) (k sorts per level of the tree)
===============================  ==================================================================

Structure: the current multiplicities live in a dict (``live``); every change is an *entry*
``(tuple, Δ, id)`` — weights are summed, so a delete is an entry with a negative Δ. Entries go to
a buffer of :data:`BUF` entries scanned linearly, then into static range trees of 2^i·BUF entries
(Bentley–Saxe's logarithmic method: two trees of one size merge into one of the next, so an entry
is rebuilt O(log n) times). A static tree is sorted on the first variable; each node of a binary
tree over that order holds the static tree of the remaining variables over its span; the last
variable is a sorted array with prefix sums. A box is the O(log n) canonical nodes of the first
variable's range, recursively. Reporting yields a tuple at its *home* entry (the one that made it
live), with its current multiplicity, so every live tuple is reported once; the entries of dead or
changed tuples it passes are bounded by a global rebuild (from ``live``) whenever entries exceed
twice the live tuples, which costs O(n log^k n) after Ω(n) changes: O(log^k n) amortized.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import accumulate
from typing import Any, Iterator

BUF = 16  # entries kept unsorted (scanned linearly) before they form a static tree
LEAF = 2  # spans of the first variable's tree at or below this are scanned, not sub-indexed

Bounds = list  # per variable: (lo, lo_inclusive, hi, hi_inclusive), None = unbounded


def inside(t: tuple, dims: tuple, bounds: Bounds) -> bool:
    """Whether tuple ``t``'s values at positions ``dims`` lie inside ``bounds``."""
    for p, (lo, li, hi, hii) in zip(dims, bounds):
        v = t[p]
        if lo is not None and (v < lo or (v == lo and not li)):
            return False
        if hi is not None and (v > hi or (v == hi and not hii)):
            return False
    return True


def _span(keys: list, b: tuple) -> tuple[int, int]:
    lo, li, hi, hii = b
    i = 0 if lo is None else (bisect_left(keys, lo) if li else bisect_right(keys, lo))
    j = len(keys) if hi is None else (bisect_right(keys, hi) if hii else bisect_left(keys, hi))
    return i, j


class _Static:
    """A static range tree over entries ``(tuple, weight, id)`` on the variables at ``dims``."""

    __slots__ = ("dims", "keys", "ents", "pre", "size", "sub")

    def __init__(self, ents: list, dims: tuple):
        d0 = dims[0]
        ents = sorted(ents, key=lambda e: e[0][d0])
        self.dims = dims
        self.keys = [e[0][d0] for e in ents]
        self.ents = ents
        self.pre = None
        self.sub = None
        if len(dims) == 1:
            self.pre = [0, *accumulate(e[1] for e in ents)]
            return
        m = len(ents)
        size = 1
        while size < m:
            size <<= 1
        self.size = size
        sub: list = [None] * (2 * size)
        rest = dims[1:]
        h = LEAF.bit_length()  # spans of 2^h > LEAF values get a sub-tree
        while (1 << h) < 2 * size:
            span = 1 << h
            first = (2 * size) >> (h + 1)  # nodes at height h: first .. 2·first - 1
            for v in range(first, 2 * first):
                lo = (v - first) * span
                if lo >= m:
                    break
                if len(rest) == 1:  # the last variable: (sorted values, prefix sums, entries)
                    part = sorted(ents[lo:lo + span], key=lambda e: e[0][rest[0]])
                    sub[v] = ([e[0][rest[0]] for e in part], [0, *accumulate(e[1] for e in part)], part)
                else:
                    sub[v] = _Static(ents[lo:lo + span], rest)
            h += 1
        self.sub = sub

    def _nodes(self, i: int, j: int) -> Iterator[tuple[int, int, int]]:
        """The canonical nodes of positions [i, j): ``(node, start, end)``."""
        size = self.size
        lo, hi = i + size, j + size
        h = 0
        while lo < hi:
            if lo & 1:
                yield lo, (lo << h) - size, ((lo + 1) << h) - size
                lo += 1
            if hi & 1:
                hi -= 1
                yield hi, (hi << h) - size, ((hi + 1) << h) - size
            lo >>= 1
            hi >>= 1
            h += 1

    def sum(self, bounds: Bounds) -> Any:
        i, j = _span(self.keys, bounds[0])
        if i >= j:
            return 0
        if self.pre is not None:
            return self.pre[j] - self.pre[i]
        rest = bounds[1:]
        dims = self.dims[1:]
        sub = self.sub
        ents = self.ents
        s = 0
        if len(rest) == 1:
            lo, li, hi, hii = rest[0]
        for v, a, b in self._nodes(i, j):
            st = sub[v]
            if type(st) is tuple:
                keys, pre, _ = st
                x = 0 if lo is None else (bisect_left(keys, lo) if li else bisect_right(keys, lo))
                y = len(keys) if hi is None else (bisect_right(keys, hi) if hii else bisect_left(keys, hi))
                if x < y:
                    s += pre[y] - pre[x]
            elif st is not None:
                s += st.sum(rest)
            else:
                for e in ents[a:min(b, j)]:
                    if inside(e[0], dims, rest):
                        s += e[1]
        return s

    def entries(self, bounds: Bounds) -> Iterator[tuple]:
        i, j = _span(self.keys, bounds[0])
        if i >= j:
            return
        if self.pre is not None:
            yield from self.ents[i:j]
            return
        rest = bounds[1:]
        dims = self.dims[1:]
        sub = self.sub
        ents = self.ents
        for v, a, b in self._nodes(i, j):
            st = sub[v]
            if type(st) is tuple:
                keys, _, part = st
                x, y = _span(keys, rest[0])
                if x < y:
                    yield from part[x:y]
            elif st is not None:
                yield from st.entries(rest)
            else:
                for e in ents[a:min(b, j)]:
                    if inside(e[0], dims, rest):
                        yield e


class BoxGroup:
    """Tuples of one hash key indexed on the variables at positions ``dims`` (see the module
    docstring): the group of an index whose edge has inequalities on several variables."""

    __slots__ = ("dims", "live", "home", "total", "nonunit", "buf", "levels", "nent", "_next")

    def __init__(self, dims: tuple) -> None:
        self.dims = dims
        self.live: dict[tuple, Any] = {}
        self.home: dict[tuple, int] = {}
        self.total: Any = 0
        self.nonunit = 0
        self.buf: list = []
        self.levels: list = []
        self.nent = 0
        self._next = 0

    def __len__(self) -> int:
        return len(self.live)

    def items(self):
        return self.live.items()

    def keys(self):
        return self.live.keys()

    def values(self):
        return self.live.values()

    def add(self, t: tuple, d: Any) -> Any:
        """Add ``d`` to the multiplicity of ``t``; returns the group's new total."""
        live = self.live
        before = live.get(t, 0)
        v = before + d
        eid = self._next = self._next + 1
        if v:
            live[t] = v
            if not before:
                self.home[t] = eid
        else:
            del live[t]
            del self.home[t]
        if before != 1 and before != 0:
            self.nonunit -= 1
        if v != 1 and v != 0:
            self.nonunit += 1
        total = self.total = self.total + d
        buf = self.buf
        buf.append((t, d, eid))
        self.nent += 1
        if len(buf) >= BUF:
            if self.nent > 2 * len(live) + 2 * BUF:
                self._rebuild()
            else:
                self._flush()
        return total

    def _flush(self) -> None:
        carry = self.buf
        self.buf = []
        levels = self.levels
        i = 0
        while i < len(levels) and levels[i] is not None:
            carry = levels[i].ents + carry
            levels[i] = None
            i += 1
        if i == len(levels):
            levels.append(None)
        levels[i] = _Static(carry, self.dims)

    def _rebuild(self) -> None:
        """One static tree of the live tuples (their home entries): the superseded entries go."""
        home = self.home
        ents = [(t, w, home[t]) for t, w in self.live.items()]
        self.buf = []
        self.nent = len(ents)
        self.levels = []
        if not ents:
            return
        i = 0
        while (BUF << i) < len(ents):
            i += 1
        self.levels = [None] * i + [_Static(ents, self.dims)]

    @classmethod
    def from_items(cls, dims: tuple, items: dict) -> "BoxGroup":
        """A group holding ``items`` ({tuple: multiplicity}, no zeros), built at once."""
        g = cls(dims)
        g.live = dict(items)
        g.home = {t: i for i, t in enumerate(g.live, 1)}
        g._next = len(g.live)
        vals = list(g.live.values())
        g.total = sum(vals)
        g.nonunit = len(vals) - vals.count(1)
        g._rebuild()
        return g

    @classmethod
    def of(cls, dims: tuple, t: tuple, d: Any) -> "BoxGroup":
        g = cls(dims)
        g.add(t, d)
        return g

    def box_sum(self, bounds: Bounds) -> Any:
        """Σ multiplicities of the tuples inside ``bounds`` (one (lo, li, hi, hii) per variable)."""
        dims = self.dims
        s = 0
        for t, d, _ in self.buf:
            if inside(t, dims, bounds):
                s += d
        for st in self.levels:
            if st is not None:
                s += st.sum(bounds)
        return s

    def box_items(self, bounds: Bounds) -> Iterator[tuple[tuple, Any]]:
        """Yield ``(tuple, multiplicity)`` of every live tuple inside ``bounds``, once each."""
        home = self.home
        live = self.live
        dims = self.dims
        for t, _, eid in self.buf:
            if home.get(t) == eid and inside(t, dims, bounds):
                yield t, live[t]
        for st in self.levels:
            if st is not None:
                for t, _, eid in st.entries(bounds):
                    if home.get(t) == eid:
                        yield t, live[t]
