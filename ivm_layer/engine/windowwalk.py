"""The walk behind :class:`~ivm_layer.engine.window.WindowView`: window values side by side.

After a batch's rows are applied to a partition's order-statistic list, :func:`diff_walk`
computes the partition's change. It starts at the first row of the peer group of the first
changed row (moved back over LEAD's offset; at the partition's start when a whole-partition
aggregate changed), with the running state there read from the list's prefix sums and prefix
extremes (O(log n)), and walks the rows from there twice in lockstep — as they were (the
batch's rows removed, the deleted ones merged back) and as they are — one :class:`Walker` per
side. It emits a row's old and new values where they differ and stops as soon as both sides
are past the last change with equal running state and nothing pending, or both are past a
Top-N bound: O(rows whose values change + k + the LEAD offset).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from ..query import WindowFunc
from .exact import numeric_avg


def _start(view, part, first: tuple, whole_changed: bool) -> tuple:
    """The sentinel key where the walk starts: the first row of the peer group of the first
    change, moved back over LEAD's offset; the partition's start when a whole-partition
    aggregate changed."""
    if whole_changed:
        return ()
    start = (first[0],)
    if view.leads:
        need, at = view.leads, None
        for key, c in part.ol.iter_before(start):
            need -= c
            at = key
            if need <= 0:
                break
        if at is not None:
            start = (at[0],)
    return start

def diff_walk(view, part, changes: dict, old_whole, new_whole, out: dict) -> None:
    """Add to ``out`` the change of one partition's rows after ``changes`` (already applied to
    ``part``): both sides walked from the first changed position until they agree again."""
    ol = part.ol
    whole_changed = old_whole != new_whole
    start = _start(view, part, min(changes), whole_changed)
    last = max(changes)
    prefix = ol.before(start) if start else [0] * view.nfields
    exts = [ol.extreme_before(start, t) for t in range(len(view.extremes))] if start else \
        [None] * len(view.extremes)
    dense = part.peers.bisect_left(start[0]) if (view.dense and start) else 0
    hist: list[tuple] = []
    if view.lags:
        for key, c in ol.iter_before(start) if start else ():
            hist.extend([key[2]] * min(c, view.lags - len(hist)))
            if len(hist) >= view.lags:
                break
        hist.reverse()
    walkers = (Walker(view, prefix, exts, dense, hist, old_whole),
               Walker(view, prefix, exts, dense, hist, new_whole))
    waiting: tuple[dict, dict] = ({}, {})
    counts: dict[tuple, tuple[int, int]] = {}
    gone = sorted(k for k in changes if not ol.count(k))
    stream = merge_gone(ol.iter_from(start) if start else ol.iter_from(()), gone)
    group: list = []
    group_okey = None
    done = False
    if all(w.beyond() for w in walkers):
        return
    for key, c_new in stream:
        if group and key[0] != group_okey:
            done = _step(view, walkers, group, counts, waiting, out, key_past=group[-1][0] >= last)
            group = []
            if done:
                break
        group_okey = key[0]
        c_old = c_new - changes.get(key, 0)
        counts[key] = (c_old, c_new)
        group.append((key, c_old, c_new))
    if not done:
        if group:
            _step(view, walkers, group, counts, waiting, out, key_past=True)
        for side, w in enumerate(walkers):
            w.finish()
            _match(view, side, w, counts, waiting, out)
    for side in (0, 1):  # records whose counterpart never came (cannot happen once matched)
        for row in waiting[side].values():
            if row is not None:
                out[row] = out.get(row, 0) + (-1 if side == 0 else 1)



def _step(view, walkers, group, counts, waiting, out, key_past: bool) -> bool:
    for side, w in enumerate(walkers):
        w.group([(key, c_new if side else c_old) for key, c_old, c_new in group])
        _match(view, side, w, counts, waiting, out)
    wo, wn = walkers
    if waiting[0] or waiting[1]:
        return False
    if wo.pending_state() != wn.pending_state():
        return False
    if wo.beyond() and wn.beyond():
        return True
    return key_past and wo.state() == wn.state()

def _match(view, side: int, w: "Walker", counts, waiting, out: dict) -> None:
    other = 1 - side
    mine, theirs = waiting[side], waiting[other]
    for ident, vals in w.done:
        row = view.output_row(ident[0][2], vals)
        if ident in theirs:
            orow = theirs.pop(ident)
            old, new = (row, orow) if side == 0 else (orow, row)
            if old != new:
                if old is not None:
                    out[old] = out.get(old, 0) - 1
                if new is not None:
                    out[new] = out.get(new, 0) + 1
        elif ident[1] < counts[ident[0]][other]:
            mine[ident] = row  # its counterpart comes later
        elif row is not None:
            out[row] = out.get(row, 0) + (-1 if side == 0 else 1)
    w.done.clear()


def merge_gone(present: Iterator[tuple[tuple, int]], gone: list[tuple]) -> Iterator[tuple[tuple, int]]:
    """The structure's keys from the start, with the keys the batch removed merged in (count 0)."""
    i = 0
    for key, c in present:
        while i < len(gone) and gone[i] < key:
            yield gone[i], 0
            i += 1
        yield key, c
    while i < len(gone):
        yield gone[i], 0
        i += 1


class Walker:
    """The window values of one side (old or new) of a partition, copy by copy from a start."""

    __slots__ = ("view", "n", "d", "sums", "exts", "hist", "whole", "pending", "done")

    def __init__(self, view, prefix: list, exts: list, dense: int, hist: list, whole) -> None:
        self.view = view
        self.n = prefix[0]
        self.sums = list(prefix)
        self.exts = list(exts)
        self.d = dense
        self.hist = deque(hist, maxlen=view.lags or None) if view.lags else None
        self.whole = whole
        self.pending: deque = deque()  # copies waiting for LEAD values: [ident, vals, missing]
        self.done: list = []

    def state(self) -> tuple:
        """What decides the values of the rows still to come (only what the functions read)."""
        v = self.view
        return (self.n if v.uses_n else None, self.d if v.dense else None,
                tuple(self.sums) if v.uses_sums else None,
                tuple(self.exts) if v.uses_exts else None,
                tuple(self.hist) if self.hist is not None else None, self.whole)

    def pending_state(self) -> list:
        return [(p[0], tuple(p[1])) for p in self.pending]

    def beyond(self) -> bool:
        """Past the Top-N filter: no later row of this side can be in the view."""
        cap = self.view.spec.cap
        if cap is None:
            return False
        f = self.view.spec.funcs[cap[0]]
        return (self.d if f.func == "dense_rank" else self.n) >= cap[2]

    def group(self, elems: list[tuple[tuple, int]]) -> None:
        """One peer group (rows equal on ORDER BY): ``(key, copies)`` in order."""
        view = self.view
        funcs = view.spec.funcs
        total = sum(c for _, c in elems)
        if not total:
            return
        rank = self.n + 1
        dense = self.d + 1
        # the RANGE frame's values: everything up to the end of this peer group
        gsums = list(self.sums)
        gexts = list(self.exts)
        for key, c in elems:
            if not c:
                continue
            row = key[2]
            gsums[0] += c
            for a, (fs, fn) in view.sumf.items():
                x = row[a]
                if x is not None:
                    gsums[fs] = gsums[fs] + x * c
                    gsums[fn] += c
            for t, a in enumerate(view.ext_args):
                x = row[a]
                if x is not None:
                    gexts[t] = _ext(gexts[t], x, view.extremes[t])
        hist = self.hist
        for key, c in elems:
            row = key[2]
            for i in range(c):
                self.n += 1
                self.sums[0] += 1
                for a, (fs, fn) in view.sumf.items():
                    x = row[a]
                    if x is not None:
                        self.sums[fs] = self.sums[fs] + x
                        self.sums[fn] += 1
                for t, a in enumerate(view.ext_args):
                    x = row[a]
                    if x is not None:
                        self.exts[t] = _ext(self.exts[t], x, view.extremes[t])
                vals: list = []
                missing = 0
                for f in funcs:
                    fn = f.func
                    if fn == "row_number":
                        vals.append(self.n)
                    elif fn == "rank":
                        vals.append(rank)
                    elif fn == "dense_rank":
                        vals.append(dense)
                    elif fn == "lag":
                        if f.offset == 0:
                            vals.append(row[f.arg])
                        elif len(hist) >= f.offset:
                            vals.append(hist[-f.offset][f.arg])
                        else:
                            vals.append(f.default)
                    elif fn == "lead":
                        if f.offset == 0:
                            vals.append(row[f.arg])
                        else:
                            vals.append(_LEAD)
                            missing += 1
                    else:
                        vals.append(self._aggregate(f, gsums, gexts))
                entry = [(key, i), vals, missing]
                if hist is not None:
                    hist.append(row)
                if view.leads:
                    self._feed_leads(row)
                    self.pending.append(entry)
                    self._release()
                else:
                    self.done.append((entry[0], vals))
        self.d += 1

    def _aggregate(self, f: WindowFunc, gsums: list, gexts: list) -> Any:
        view = self.view
        if f.frame == "partition":
            sums, exts = self.whole[0], self.whole[1]
        elif f.frame == "range":
            sums, exts = gsums, gexts
        else:
            sums, exts = self.sums, self.exts
        fn = f.func
        if fn in ("min", "max"):
            v = exts[view.extf[(f.arg, fn == "min")]]
            return v
        if f.arg is None:  # COUNT(*)
            return sums[0]
        s, n = sums[view.sumf[f.arg][0]], sums[view.sumf[f.arg][1]]
        if fn == "count":
            return n
        if fn == "sum":
            return s if n else None
        return _avg(s, n, view.dialect)

    def _feed_leads(self, row: tuple) -> None:
        """The copy just read supplies LEAD(x, k) to the copy k positions before it."""
        funcs = self.view.spec.funcs
        pending = self.pending
        m = len(pending)
        for j, f in enumerate(funcs):
            if f.func != "lead" or f.offset == 0:
                continue
            back = f.offset  # this copy is the pending one ``offset`` back (after it is appended: +1)
            if m - back >= 0 and back <= m:
                entry = pending[m - back]
                if entry[1][j] is _LEAD:
                    entry[1][j] = row[f.arg]
                    entry[2] -= 1

    def _release(self) -> None:
        pending = self.pending
        while pending and pending[0][2] == 0:
            entry = pending.popleft()
            self.done.append((entry[0], entry[1]))

    def finish(self) -> None:
        """The end of the partition: LEADs past it take their default."""
        funcs = self.view.spec.funcs
        for entry in self.pending:
            for j, f in enumerate(funcs):
                if entry[1][j] is _LEAD:
                    entry[1][j] = f.default
            entry[2] = 0
        self._release()


_LEAD = object()  # a LEAD value not known yet


def _ext(a: Any, b: Any, lowest: bool) -> Any:
    if a is None:
        return b
    return (b if b < a else a) if lowest else (b if b > a else a)


def _avg(total: Any, n: int, dialect: str) -> Any:
    """AVG as the database returns it: DOUBLE in DuckDB; in PostgreSQL a numeric for integer and
    numeric input (its numeric division), a double for floats."""
    if not n:
        return None
    if dialect == "postgres" and isinstance(total, (int, Decimal)) and not isinstance(total, bool):
        return numeric_avg(Decimal(total), n)
    if isinstance(total, int):
        return total / n
    return float(total) / n
