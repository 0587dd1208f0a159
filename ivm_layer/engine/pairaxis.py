"""Pair counts over one merged order: the index behind a derived chain of two inequality joins.

Three weighted streams X, Y, Z live on one sorted axis of keys. A key holds a weight per
stream. For any prefix of the axis the structure returns the fold

    (X, Y, Z, XY, YZ)   — the stream totals, and the weighted pairs x before y, y before z

in O(B + log K): keys sit in sorted chunks of at most 2·B (B = 48: the C-level slice sums of an
update cost O(B), the tree O(log K); 48 makes a Q7 update 19% fewer instructions than 128) with their per-chunk
fold, and a segment tree over the chunks folds whole chunks (the fold is associative:
``XY = XY_l + XY_r + X_l · Y_r``). The part of the last chunk is folded with C-level slice
sums. Adding a weight costs O(B) C-level work plus O(log K) tree steps; a chunk split or
removal rebuilds the tree (O(K), once per ~B changes). The suffix fold follows from the
total and the prefix (the fold is invertible on its counts).
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import accumulate, islice
from operator import mul

CHUNK = 48

Fold = tuple  # (X, Y, Z, XY, YZ)
ZERO: Fold = (0, 0, 0, 0, 0)


def _merge(a: Fold, b: Fold) -> Fold:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3] + a[0] * b[1], a[4] + b[4] + a[1] * b[2])


def _fold_lists(wx: list, wy: list, wz: list) -> Fold:
    return (sum(wx), sum(wy), sum(wz), sum(map(mul, wy, accumulate(wx, initial=0))),
            sum(map(mul, wz, accumulate(wy, initial=0))))


def suffix(total: Fold, pre: Fold) -> Fold:
    """The fold of the keys after a prefix, from the total and the prefix's fold."""
    x, y, z = total[0] - pre[0], total[1] - pre[1], total[2] - pre[2]
    return (x, y, z, total[3] - pre[3] - pre[0] * y, total[4] - pre[4] - pre[1] * z)


class PairAxis:
    """Weighted keys of three streams (0 = X, 1 = Y, 2 = Z) on one order, with prefix folds."""

    __slots__ = ("_keys", "_leaf", "_maxes", "_size", "_tree", "_w")

    def __init__(self) -> None:
        self._keys: list[list] = []  # chunks of sorted keys
        self._w: list[tuple[list, list, list]] = []  # per chunk: the weights of X, Y, Z per key
        self._maxes: list = []
        self._leaf: list[Fold] = []  # per chunk fold
        self._tree: list[Fold] = [ZERO, ZERO]
        self._size = 1

    def total(self) -> Fold:
        return self._tree[1]

    def add(self, stream: int, key, d: int) -> None:
        """Add ``d`` to the weight of ``key`` in ``stream``."""
        if not d:
            return
        keys = self._keys
        if not keys:
            w = ([0], [0], [0])
            w[stream][0] = d
            keys.append([key])
            self._w.append(w)
            self._maxes.append(key)
            self._leaf.append(_fold_lists(*w))
            self._rebuild()
            return
        maxes = self._maxes
        ci = bisect_left(maxes, key)
        if ci == len(keys):
            ci -= 1
            maxes[ci] = key
        chunk = keys[ci]
        wx, wy, wz = w = self._w[ci]
        pos = bisect_left(chunk, key)
        if pos == len(chunk) or chunk[pos] != key:
            chunk.insert(pos, key)
            wx.insert(pos, 0)
            wy.insert(pos, 0)
            wz.insert(pos, 0)
        x, y, z, xy, yz = self._leaf[ci]
        if stream == 0:  # (sums over islices: no copy of the chunk's part)
            x += d
            xy += d * sum(islice(wy, pos + 1, None))
            wx[pos] += d
        elif stream == 1:
            y += d
            xy += d * sum(islice(wx, pos))
            yz += d * sum(islice(wz, pos + 1, None))
            wy[pos] += d
        else:
            z += d
            yz += d * sum(islice(wy, pos))
            wz[pos] += d
        self._leaf[ci] = (x, y, z, xy, yz)
        if not (wx[pos] or wy[pos] or wz[pos]):  # the key is gone
            del chunk[pos], wx[pos], wy[pos], wz[pos]
            if not chunk:
                del keys[ci], self._w[ci], maxes[ci], self._leaf[ci]
                self._rebuild()
                return
            if pos == len(chunk):
                maxes[ci] = chunk[-1]
        if len(chunk) > 2 * CHUNK:
            half = len(chunk) >> 1
            parts = [tuple(lst[:half] for lst in w), tuple(lst[half:] for lst in w)]
            keys[ci:ci + 1] = [chunk[:half], chunk[half:]]
            self._w[ci:ci + 1] = parts
            maxes[ci:ci + 1] = [chunk[half - 1], chunk[-1]]
            self._leaf[ci:ci + 1] = [_fold_lists(*parts[0]), _fold_lists(*parts[1])]
            self._rebuild()
            return
        self._set(ci)

    def _set(self, ci: int) -> None:
        tree = self._tree
        i = self._size + ci
        tree[i] = self._leaf[ci]
        i >>= 1
        while i:
            a, b = tree[2 * i], tree[2 * i + 1]
            tree[i] = (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3] + a[0] * b[1],
                       a[4] + b[4] + a[1] * b[2])
            i >>= 1

    def _rebuild(self) -> None:
        k = len(self._leaf)
        size = 1
        while size < k:
            size <<= 1
        tree = [ZERO] * (2 * size)
        tree[size:size + k] = self._leaf
        for i in range(size - 1, 0, -1):
            tree[i] = _merge(tree[2 * i], tree[2 * i + 1])
        self._tree, self._size = tree, size

    def prefix_pairs(self, key, first: int) -> tuple:
        """Three components of the fold of the keys strictly before ``key``: ``first`` = 0 gives
        ``(X, Y, XY)``, ``first`` = 1 gives ``(Y, Z, YZ)`` (what one pair count needs; cheaper
        than :meth:`prefix`: three sums, no tuple per merge)."""
        a, b, ab = first, first + 1, first + 3
        maxes = self._maxes
        ci = bisect_left(maxes, key)
        u = v = uv = 0
        if ci:
            tree = self._tree
            lo, hi = self._size, self._size + ci
            right = []
            while lo < hi:
                if lo & 1:
                    f = tree[lo]
                    uv += f[ab] + u * f[b]
                    u += f[a]
                    v += f[b]
                    lo += 1
                if hi & 1:
                    hi -= 1
                    right.append(tree[hi])
                lo >>= 1
                hi >>= 1
            for f in reversed(right):
                uv += f[ab] + u * f[b]
                u += f[a]
                v += f[b]
        if ci == len(maxes):
            return u, v, uv
        pos = bisect_left(self._keys[ci], key)
        if pos:
            w = self._w[ci]
            wa, wb = w[a], w[b]
            pu = sum(islice(wa, pos))
            pv = sum(islice(wb, pos))
            puv = sum(map(mul, islice(wb, pos), accumulate(wa, initial=0)))
            uv += puv + u * pv
            u += pu
            v += pv
        return u, v, uv

    def prefix(self, key) -> Fold:
        """The fold of the keys strictly before ``key``."""
        maxes = self._maxes
        ci = bisect_left(maxes, key)
        # whole chunks [0, ci): the tree's canonical cover, folded left to right
        acc = ZERO
        if ci:
            tree = self._tree
            lo, hi = self._size, self._size + ci
            right = []
            while lo < hi:
                if lo & 1:
                    acc = _merge(acc, tree[lo])
                    lo += 1
                if hi & 1:
                    hi -= 1
                    right.append(tree[hi])
                lo >>= 1
                hi >>= 1
            for f in reversed(right):
                acc = _merge(acc, f)
        if ci == len(maxes):
            return acc
        chunk = self._keys[ci]
        pos = bisect_left(chunk, key)
        if not pos:
            return acc
        wx, wy, wz = self._w[ci]
        return _merge(acc, _fold_lists(wx[:pos], wy[:pos], wz[:pos]))
