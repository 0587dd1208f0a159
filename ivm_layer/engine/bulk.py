"""Bulk paths: a large batch of inserts read, extracted and built into the indexes in passes
over the whole batch instead of row by row (the initial load, ``INSERT … SELECT``, ``COPY``, a
snapshot, recovery).

A table's share of a batch with only positive multiplicities is read and extracted per column
from :data:`COLUMNS_MIN` rows, and built into the indexes in bulk from :data:`BULK_MIN`:

* reading (:func:`read_rows`): the ``(row, k)`` pairs transposed once; types, lengths and
  multiplicities checked per column (``set(map(type, …))``); NaNs found per float column
  (``map(isnan, …)``); rows consolidated by ``Counter`` — C loops, not Python ones;
* leaf tuples (:func:`leaf_delta`): the rows themselves, or one ``itemgetter`` over each; NULLs
  in join/compared columns and value kinds checked per column; a filter applied with ``filter``;
* indexes (:func:`apply_index`): the delta grouped by key in one pass; a new hash group is
  ``dict.fromkeys``/``dict`` of its tuples, a new ordered group is built from its tuples sorted
  once (:meth:`OrderedGroup.from_items`); an existing hash group takes tuples it does not hold,
  once each, in one ``dict.update``; any other existing group takes its tuples one by one;
* steps up (:func:`propagate`): a projection consolidates per parent tuple; a guard step on an
  equality key multiplies by the sibling group's total once per distinct tuple; the first
  step of another kind hands the (by then consolidated) delta to the generated per-tuple code.

While a batch of :data:`BULK_MIN` rows or more is read and built (:class:`CollectorPaused`),
Python's cyclic garbage collector is paused: the batch allocates millions of tuples, dicts and
groups that no cycle links, and each generation-2 pass the allocations would trigger walks every
object the view already holds (1.5–2× of a 1M-row load, measured). It runs again after, with one
collection of the young generations (the batch's objects) charged to the batch itself.

Anything else (a delete in the batch, a row the checks do not pass at C speed, ring payloads)
takes the general path: the same result at its row-by-row cost. Cost: O(n) C-level work plus
one Python step per row for grouping, per distinct key for group creation.
"""

from __future__ import annotations

import decimal
import gc
import math
from collections import Counter
from collections.abc import Callable
from itertools import chain, compress
from operator import itemgetter
from typing import Any

from .groups import HashGroup
from .index import group_from_items, group_of
from .predicates import key_fn
from .values import canonical_row

BULK_MIN = 2048  # delta tuples of one leaf from which the indexes are built in bulk
COLUMNS_MIN = 32  # rows of one table in one batch from which it is read and extracted per column


class CollectorPaused:
    """``with CollectorPaused(rows):`` pauses Python's cyclic garbage collector for a batch of
    at least :data:`BULK_MIN` rows (see the module docstring) when it is running; it is turned
    back on at the end, also when the body raises. Nested pauses leave it to the outermost."""

    __slots__ = ("on",)

    def __init__(self, rows: int) -> None:
        self.on = rows >= BULK_MIN and gc.isenabled()

    def __enter__(self) -> None:
        if self.on:
            gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.on:
            gc.enable()
            # the young generations now hold the whole batch's objects: collect them here, as
            # part of the batch, not inside whatever statement allocates next (measured: a
            # 20,000-update stream after a 600k-row apply paid 0.2-0.5 s of deferred young
            # collections without this; the apply's gain from pausing stays ≥ the cost)
            gc.collect(1)


def batch_size(batch: Any) -> int:
    """Rows in a batch ``{table: changes}`` whose changes have a length (0 for iterators)."""
    try:
        return sum(len(c) for c in batch.values() if hasattr(c, "__len__"))
    except (AttributeError, TypeError):
        return 0


def read_rows(items: list, arity: int) -> dict | None:
    """``{row: k}`` of a table's ``(row, k)`` pairs when every pair is well formed, every k a
    positive int and every row a hashable tuple of ``arity`` values (NaNs made canonical);
    None otherwise (the general reader then checks row by row and says what is wrong)."""
    try:
        rows, ks = zip(*items)
    except (TypeError, ValueError):
        return None
    if set(map(type, rows)) != {tuple} or set(map(len, rows)) != {arity}:
        return None
    if set(map(type, ks)) != {int} or min(ks) < 1:
        return None
    if arity:
        types = set(map(type, chain.from_iterable(rows)))
        if float in types or decimal.Decimal in types:
            rows = _canonical(rows, arity, types)
    try:
        if max(ks) == 1:
            return Counter(rows)
        out: dict = {}
        get = out.get
        for r, k in zip(rows, ks):
            out[r] = get(r, 0) + k
        return out
    except TypeError:  # an unhashable value: the general reader names the row
        return None


def _canonical(rows: tuple, arity: int, types: set) -> Any:
    """``rows`` with NaNs replaced by the engine's one NaN (only rows holding one are copied)."""
    if types <= {int, float, bool, str, type(None), bytes}:
        nan = None
        for i in range(arity):
            col = list(map(itemgetter(i), rows))
            ctypes = set(map(type, col))
            if float not in ctypes:
                continue
            if ctypes <= {float, int, bool}:
                flags = list(map(math.isnan, col))
            else:
                flags = [type(x) is float and math.isnan(x) for x in col]
            if any(flags):
                nan = flags if nan is None else list(map(max, nan, flags))
        if nan is None:
            return rows
        rows = list(rows)
        for j in compress(range(len(rows)), nan):
            rows[j] = canonical_row(rows[j])
        return rows
    return list(map(canonical_row, rows))


def leaf_delta(ex: Any, changes: dict, pending: dict) -> dict | None:
    """The leaf delta of extractor ``ex`` for consolidated ``changes`` (what
    :func:`~ivm_layer.engine.batches.leaf_deltas` computes), column by column; raises the same
    UpdateError a row-by-row check would; None where a column needs the row-by-row path."""
    if ex.eqs:
        return None
    rows = list(changes)
    n = len(rows)
    pos = ex.positions
    if pos == list(range(ex.arity)):
        tuples = rows
    elif len(pos) == 1:
        tuples = list(zip(map(itemgetter(pos[0]), rows)))
    elif pos:
        tuples = list(map(itemgetter(*pos), rows))
    else:
        tuples = [()] * n
    ks = list(changes.values())
    keep = None  # which rows contribute (NULL in a strict column: none)
    for i in ex.strict:
        col = list(map(itemgetter(i), tuples))
        if None in col:
            flags = [x is not None for x in col]
            keep = flags if keep is None else list(map(min, keep, flags))
    if keep is not None:
        tuples = list(compress(tuples, keep))
        ks = list(compress(ks, keep))
    kinds = ex.kinds
    for i, v, c in ex.ordered:
        col = map(itemgetter(i), tuples)
        types = set(map(type, col)) - {type(None)}
        if v not in ex.temporal and types == {int}:
            want = kinds.get(c) or pending.get(c)
            if want is None:
                pending[c] = "number"
                continue
            if want == "number":
                continue
        for t in tuples:  # mixed or non-integer values: the per-row check (it raises)
            ex.check_kinds(t, pending)
        break
    f = ex.filter
    if f is not None:
        try:
            flags = list(map(f, tuples))
        except TypeError:
            return None  # the row-by-row path raises with the row named
        tuples = list(compress(tuples, flags))
        ks = list(compress(ks, flags))
    if tuples is rows and max(ks, default=1) == 1:
        return changes if type(changes) is dict else dict(changes)
    if ks and max(ks) == 1 and min(ks) == 1:
        return dict(Counter(tuples))
    out: dict = {}
    get = out.get
    for t, k in zip(tuples, ks):
        out[t] = get(t, 0) + k
    return out


def apply_index(idx: Any, delta: dict) -> None:
    """Add ``delta`` ({owner tuple: d}, no zeros) to index ``idx`` (see the module docstring)."""
    groups = idx.groups
    keyf = idx.key
    content = idx.content
    owners = list(delta)
    ds = list(delta.values())
    cs = owners if content is None else list(map(content, owners))
    if idx.content_filter is not None:
        flags = list(map(idx.content_filter, cs))
        owners = list(compress(owners, flags))
        cs = list(compress(cs, flags))
        ds = list(compress(ds, flags))
    keys = list(map(keyf, owners))
    sp = idx.sort_pos
    distinct = content is None  # the owners are a dict's keys: distinct; projections may repeat
    ones = min(ds, default=1) == 1 and max(ds, default=1) == 1
    for k, kcs, kds in _grouped(keys, cs, ds):
        g = groups.get(k)
        if g is None:
            if len(kcs) == 1:
                groups[k] = group_of(sp, kcs[0], kds[0])
                continue
            if sp is None and distinct and ones:
                groups[k] = HashGroup.from_ones(kcs)
                continue
            items = dict.fromkeys(kcs, 1) if distinct and ones else _items(kcs, kds, distinct)
            g = group_from_items(sp, items)
            if g.total or len(g):
                groups[k] = g
            continue
        if sp is None and distinct and ones and g.keys().isdisjoint(kcs):
            dict.update(g, dict.fromkeys(kcs, 1))   # new tuples once each: C-level, no add()
            g.total += len(kcs)
            continue
        add = g.add
        for c, d in zip(kcs, kds):
            add(c, d)
        if not g.total and not len(g):
            del groups[k]


def _grouped(keys: list, cs: list, ds: list) -> Any:
    """``(key, its contents, their deltas)`` per distinct key: with numpy, integer keys are
    grouped by one stable argsort (C); otherwise by one pass over a dict of positions."""
    np = _numpy()
    if np is not None and len(keys) >= BULK_MIN and set(map(type, keys)) == {int}:
        try:
            karr = np.fromiter(keys, dtype=np.int64, count=len(keys))
        except OverflowError:
            karr = None
        if karr is not None:
            order = np.argsort(karr, kind="stable")
            sk = karr[order]
            pick = itemgetter(*order.tolist())
            scs, sds = pick(cs), pick(ds)
            cuts = (np.flatnonzero(sk[1:] != sk[:-1]) + 1).tolist()
            starts = [0] + cuts
            ends = cuts + [len(keys)]
            return ((k, scs[a:b], sds[a:b]) for k, a, b in zip(sk[starts].tolist(), starts, ends))
    by: dict = {}
    get = by.get
    for i, k in enumerate(keys):
        lst = get(k)
        if lst is None:
            by[k] = [i]
        else:
            lst.append(i)
    return ((k, [cs[i] for i in ix], [ds[i] for i in ix]) for k, ix in by.items())


_NUMPY: list = []


def _numpy() -> Any:
    """numpy when installed (it speeds up grouping; nothing needs it)."""
    if not _NUMPY:
        try:
            import numpy
        except ImportError:
            numpy = None
        _NUMPY.append(numpy)
    return _NUMPY[0]


def _items(cs: Any, ds: Any, distinct: bool) -> dict:
    if distinct:
        return dict(zip(cs, ds))
    out: dict = {}
    get = out.get
    for c, d in zip(cs, ds):
        out[c] = get(c, 0) + d
    return {c: d for c, d in out.items() if d}


def propagate(trep: Any, atom: int, delta: dict, rest: Callable[[Any, dict, bool], None]) -> None:
    """Algorithm 2 for leaf ``atom``'s large delta: simple steps in bulk (see the module
    docstring), then ``rest(node, delta, own)`` — the generated per-tuple code from that node
    upwards (``own``: its own indexes too) — for the remainder of the path."""
    n = trep.leaves[atom]
    while True:
        if len(n.appliers) != len(n.indexes):  # a derived chain's axis feeds on this node
            rest(n, delta, True)
            return
        for idx in n.indexes:
            apply_index(idx, delta)
        p = n.parent
        if p is None:
            trep.count += delta.get((), 0)
            return
        step = n.step
        kind = step[0] if step is not None else None
        if p.derived is None and kind == "nonguard" and type(step[1].sort_pos) is tuple:
            delta = n.up(delta)  # a box fan-out: the delta boxed, one box sum per sibling tuple
            if not delta:
                return
            n = p
            continue
        if p.derived is not None or kind not in ("fused", "project", "guard"):
            rest(n, delta, False)
            return
        if kind == "fused":
            if step[1] is not None:
                f = step[1]
                delta = {t: d for t, d in delta.items() if f(t)}
        elif kind == "project":
            delta = _project(delta, n.up)
        else:
            _, sib_idx, key_vars, on, rest_preds = step
            if on or rest_preds:
                rest(n, delta, False)
                return
            if p.filter is None and p.form == key_vars:
                delta = _by_key(delta, key_fn(key_vars, n.pos), sib_idx.groups, len(key_vars) == 1)
            else:  # one total per tuple, consolidated per parent tuple
                delta = n.up(delta)
        if not delta:
            return
        n = p


def _by_key(delta: dict, key: Callable, sibling: dict, scalar: bool) -> dict:
    """A guard step whose parent is its equality key: Δp[k] = Σ Δ over k's tuples × the
    sibling group's total, one multiplication per distinct key."""
    ds = delta.values()
    if min(ds) == 1 and max(ds) == 1:
        sums: dict = Counter(map(key, delta))
    else:
        sums = {}
        get = sums.get
        for t, d in delta.items():
            k = key(t)
            sums[k] = get(k, 0) + d
    out = {}
    for k, s in sums.items():
        g = sibling.get(k)
        if g is not None and s:
            w = s * g.total
            if w:
                out[(k,) if scalar else k] = w
    return out


def _project(delta: dict, up: Callable[[dict], dict]) -> dict:
    out = up(delta)
    return {t: d for t, d in out.items() if d} if out else out
