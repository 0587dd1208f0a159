"""Window functions and Top-N over a view's change stream (:class:`WindowView`).

One :class:`WindowView` computes the window functions that share one ``OVER (PARTITION BY …
ORDER BY …)``: ``ROW_NUMBER``, ``RANK``, ``DENSE_RANK``, ``LAG`` / ``LEAD``, and ``SUM``,
``COUNT``, ``AVG``, ``MIN``, ``MAX`` over the frames ``ROWS`` / ``RANGE`` ``UNBOUNDED PRECEDING``
(up to the current row) or the whole partition. Per partition it keeps the input rows in an
:class:`~ivm_layer.engine.orderstat.OrderStatList` ordered by the ORDER BY values (ties broken by
the rest of the row: SQL leaves that order unspecified, so ``ROW_NUMBER``, ``ROWS`` frames and
``LAG``/``LEAD`` among rows that tie may differ from another database's arbitrary choice), with
prefix sums of the aggregates' arguments and prefix minima/maxima.

An update applies the changed rows to their partitions (O(log n) each), then walks each touched
partition from the first changed position, computing every row's old and new values side by
side, and stops as soon as the two agree from there on (same running state, past the last
change) or, for a Top-N filter (``rn <= k``), once both are past position k. The view's change
is the rows whose values differ: O(log n + changed rows + k) per update. Where a change shifts
every later row's value (``ROW_NUMBER`` or a running ``SUM`` after an insert near the start,
any change under a whole-partition aggregate) that many rows change, by definition. Nothing per
output row is stored: :meth:`rows` walks the partitions (constant delay per row).
"""

from __future__ import annotations

from contextlib import nullcontext
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal, localcontext
from typing import Any

from sortedcontainers import SortedList

from ..errors import ConcurrentModificationError, UpdateError
from ..query import RANKING, WindowSpec
from .composite import CompositeView
from .exact import EXACT
from .orderstat import OrderStatList
from .values import SqlNaN
from .view import Change, Prepared, combined_stats, tell
from .windowwalk import Walker, diff_walk

# -- sort keys ---------------------------------------------------------------------------------
class _Desc:
    """A value that sorts in descending order (non-numeric ORDER BY … DESC)."""

    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v

    def __lt__(self, o: "_Desc") -> bool:
        return o.v < self.v

    def __gt__(self, o: "_Desc") -> bool:
        return o.v > self.v

    def __eq__(self, o: object) -> bool:
        return isinstance(o, _Desc) and self.v == o.v

    def __le__(self, o: "_Desc") -> bool:
        return o.v <= self.v

    def __ge__(self, o: "_Desc") -> bool:
        return o.v >= self.v

    def __hash__(self) -> int:
        return hash(self.v)


def _order_encoder(desc: bool, nulls_first: bool) -> Callable[[Any], tuple]:
    null = (0,) if nulls_first else (2,)
    if not desc:
        def asc(v: Any) -> tuple:
            if v is None:
                return null
            if isinstance(v, SqlNaN):
                return (1, 1, 0)
            return (1, 0, v)
        return asc

    def dsc(v: Any) -> tuple:
        if v is None:
            return null
        if isinstance(v, SqlNaN):
            return (1, 0, 0)
        if isinstance(v, (int, float, Decimal)):
            return (1, 1, -v)
        return (1, 1, _Desc(v))
    return dsc


def _row_key(row: tuple) -> tuple:
    return tuple((0,) if v is None else (1, v) for v in row)


class _Top:
    """Greater than every key (the end of a partition)."""

    def __gt__(self, o: Any) -> bool:
        return True

    def __lt__(self, o: Any) -> bool:
        return False


_END = (_Top(),)


class _Part:
    __slots__ = ("ol", "peers", "peer_counts")

    def __init__(self, nfields: int, extremes: tuple[bool, ...], dense: bool) -> None:
        self.ol = OrderStatList(nfields, extremes)
        self.peers = SortedList() if dense else None
        self.peer_counts: dict = {}


# -- the view ----------------------------------------------------------------------------------
class WindowView(CompositeView):
    """The input view's rows, each followed by the values of one OVER clause's window functions
    (see the module docstring). ``output``: positions of the output row (a reordering / subset
    that keeps every input column, applied lazily), or None for input row + values."""

    made_of = "window functions"

    def __init__(self, inner: Any, spec: WindowSpec, names: list[str], dialect: str = "duckdb",
                 output: list[int] | None = None, labels: list[str] | None = None, sql: str = ""):
        """``names``: one name per position of the full row (the input's columns, then one per
        function); ``output`` picks the view's columns from it."""
        self.sql = sql
        self.inner = inner
        self.spec = spec
        self.dialect = dialect
        if len(names) != len(inner.columns) + len(spec.funcs):
            raise ValueError("a window level names every input column and every function")
        full = list(names)
        self._output = output
        self.positions = {v: i for i, v in enumerate(full)} if output is None else None
        self.columns = list(labels) if labels is not None else \
            [full[i] for i in output] if output is not None else full
        self._enc = [(p, _order_encoder(d, nf)) for p, d, nf in spec.order]
        # additive fields: 0 = multiplicity; per aggregate argument a: (sum, non-NULL count)
        self.sumf: dict[int, tuple[int, int]] = {}
        self.extf: dict[tuple[int, bool], int] = {}
        for f in spec.funcs:
            if f.func in ("sum", "avg", "count") and f.arg is not None and f.arg not in self.sumf:
                self.sumf[f.arg] = (1 + 2 * len(self.sumf), 2 + 2 * len(self.sumf))
            if f.func in ("min", "max") and (f.arg, f.func == "min") not in self.extf:
                self.extf[(f.arg, f.func == "min")] = len(self.extf)
        self.nfields = 1 + 2 * len(self.sumf)
        self.extremes = tuple(lowest for (_a, lowest) in self.extf)
        self.ext_args = [a for (a, _l) in self.extf]
        self.dense = any(f.func == "dense_rank" for f in spec.funcs)
        self.lags = max([f.offset for f in spec.funcs if f.func == "lag"], default=0)
        self.leads = max([f.offset for f in spec.funcs if f.func == "lead"], default=0)
        self.whole = any(f.frame == "partition" and f.func not in RANKING + ("lag", "lead") for f in spec.funcs)
        # what the walk's running state must compare to know that old and new values agree
        cap_f = spec.funcs[spec.cap[0]].func if spec.cap is not None else None
        self.uses_n = any(f.func in ("row_number", "rank") for f in spec.funcs) or cap_f in ("row_number", "rank")
        running = [f for f in spec.funcs if f.func in ("sum", "count", "avg", "min", "max") and f.frame != "partition"]
        self.uses_sums = any(f.func != "min" and f.func != "max" for f in running)
        self.uses_exts = any(f.func in ("min", "max") for f in running)
        self._parts: dict[tuple, _Part] = {}
        self._total = 0
        self._version = 0
        self._subscribers: list[Callable[[Change], Any]] = []

    # -- introspection ------------------------------------------------------------------
    @property
    def branches(self) -> list:
        return [self.inner]

    @property
    def query_class(self) -> str:
        return self.inner.query_class

    def cost_text(self) -> str:
        spec = self.spec
        shifting = [f.text or f.func for f in spec.funcs
                    if f.func in ("row_number", "rank") or (f.func in ("sum", "count", "avg") and f.frame != "partition")]
        whole = [f.text or f.func for f in spec.funcs if f.frame == "partition" and f.func not in RANKING + ("lag", "lead")]
        parts = [f"per partition an order-statistic list of its rows ({sum(p.ol.total for p in self._parts.values())} "
                 f"rows in {len(self._parts)} partitions); an update costs O(log n) per changed row plus the "
                 "rows whose window values change (the walk from the first changed position stops where old and "
                 "new values agree again)"]
        if spec.cap is not None:
            f = spec.funcs[spec.cap[0]]
            hi = spec.cap[2]
            parts.append(f"Top-N: only rows with {f.text or f.func} in [{spec.cap[1]}, "
                         f"{'∞' if hi == float('inf') else int(hi)}] are in the view; a change past that "
                         "position costs O(log n) and changes nothing; one inside it changes the rows "
                         "entering and leaving the top (and those whose rank shifts)")
        if shifting and spec.cap is None:
            parts.append(f"{', '.join(shifting)}: a row inserted or deleted at position p changes the value of "
                         "every later row of its partition (the view's change is that large by definition; "
                         "rows() enumerates lazily, nothing per row is stored)")
        if whole:
            parts.append(f"{', '.join(whole)} (whole partition): any change of a partition changes every row of it")
        if any(f.func in ("lag", "lead") for f in spec.funcs):
            parts.append("LAG/LEAD: a change touches the rows within the offset of it")
        return "; ".join(parts)

    def explain(self) -> str:
        lines = [f"view columns: {', '.join(self.columns)}",
                 f"window {self.spec.text}: " + ", ".join(f.text or f.func for f in self.spec.funcs),
                 self.cost_text(), "input:"]
        lines.extend("    " + line for line in self.inner.explain().splitlines())
        return "\n".join(lines)

    def stats(self) -> dict[str, int]:
        return combined_stats([self.inner], sum(len(p.ol) for p in self._parts.values()))

    def __repr__(self) -> str:
        return f"<ivm_layer.WindowView columns={self.columns} rows={len(self)}>"

    def __len__(self) -> int:
        return self._total

    # -- keys and fields ----------------------------------------------------------------
    def _key(self, row: tuple) -> tuple:
        okey = tuple(enc(row[p]) for p, enc in self._enc)
        return (okey, _row_key(row), row)

    def _deltas(self, row: tuple, d: int) -> tuple:
        out = [d]
        for a in self.sumf:
            x = row[a]
            out += [0, 0] if x is None else [x * d, d]
        return tuple(out)

    # -- writing ------------------------------------------------------------------------
    def prepare(self, batch: Mapping) -> Prepared:
        """Phase one: the inner view's prepare (raises, changes nothing). Cost: the inner view's."""
        parts = self.split_batch(batch)
        return Prepared(self, self._version, self.inner.prepare(parts))

    def commit(self, prepared: Prepared, want_change: bool = False, notify: bool = True) -> Change | None:
        """Phase two (cannot fail): commit the inner view, then walk each touched partition.
        Cost: the inner view's commit plus O(log n + rows whose window values change) per
        changed partition (a Top-N bound stops the walk at k); ``notify=False`` leaves the
        subscribers to the caller."""
        if prepared.view is not self or prepared.version != self._version:
            raise UpdateError("this prepared batch is stale: the view changed since prepare(); prepare it again")
        self._version += 1
        change = self.inner.commit(prepared.steps, want_change=True) or ()
        out: dict[tuple, int] = {}
        with localcontext(EXACT) if self.sumf else _NO_CONTEXT:  # exact DECIMAL sums
            by_part: dict[tuple, dict] = {}
            part_of = self.spec.partition
            for row, k in change:
                pk = tuple(row[p] for p in part_of)
                group = by_part.setdefault(pk, {})
                key = self._key(row)
                group[key] = group.get(key, 0) + k
            for pk, changes in by_part.items():
                changes = {key: d for key, d in changes.items() if d}
                if changes:
                    self._update(pk, changes, out)
        result = [(row, k) for row, k in out.items() if k]
        self._total += sum(k for _, k in result)
        if notify and result and self._subscribers:
            tell(self._subscribers, result)
        return result if want_change else None

    def _update(self, pk: tuple, changes: dict, out: dict) -> None:
        part = self._parts.get(pk)
        if part is None:
            part = self._parts[pk] = _Part(self.nfields, self.extremes, self.dense)
        ol = part.ol
        old_whole = self._whole_values(part) if self.whole else None
        for key, d in changes.items():
            ol.add(key, self._deltas(key[2], d), tuple(key[2][a] for a in self.ext_args))
            if part.peers is not None:
                okey = key[0]
                n = part.peer_counts.get(okey, 0) + d
                if n:
                    if okey not in part.peer_counts:
                        part.peers.add(okey)
                    part.peer_counts[okey] = n
                else:
                    del part.peer_counts[okey]
                    part.peers.remove(okey)
        new_whole = self._whole_values(part) if self.whole else None
        diff_walk(self, part, changes, old_whole, new_whole, out)
        if not ol.total:
            del self._parts[pk]

    def _whole_values(self, part: _Part) -> tuple:
        ol = part.ol
        return (tuple(ol.totals), tuple(ol.extreme_before(_END, t) for t in range(len(self.extremes))))

    def output_row(self, row: tuple, vals: list) -> tuple | None:
        """The view's row for an input row and its window values; None when a Top-N bound drops it."""
        cap = self.spec.cap
        if cap is not None:
            v = vals[cap[0]]
            if v < cap[1] or v > cap[2]:
                return None
        full = row + tuple(vals)
        if self._output is not None:
            return tuple(full[i] for i in self._output)
        return full

    # -- reading ------------------------------------------------------------------------
    def rows(self) -> Iterator[tuple[tuple, int]]:
        v0 = self._version
        for part in list(self._parts.values()):
            for item in self._part_rows(part):
                yield item
                if self._version != v0:
                    raise ConcurrentModificationError(
                        "the view was updated while this enumeration was open; take list(view.rows()) first")

    def _part_rows(self, part: _Part) -> Iterator[tuple[tuple, int]]:
        with localcontext(EXACT) if self.sumf else _NO_CONTEXT:
            whole = self._whole_values(part) if self.whole else None
            w = Walker(self, [0] * self.nfields, [None] * len(self.extremes), 0, [], whole)
            prev, n = None, 0
            group: list = []
            for key, c in part.ol.iter_from(()):
                if group and key[0] != group[0][0][0]:
                    w.group(group)
                    group = []
                    for ident, vals in w.done:
                        row = self.output_row(ident[0][2], vals)
                        if row is None:
                            continue
                        if row == prev:
                            n += 1
                            continue
                        if prev is not None:
                            yield prev, n
                        prev, n = row, 1
                    w.done.clear()
                    if w.beyond() and not w.pending:
                        break
                group.append((key, c))
            else:
                if group:
                    w.group(group)
                w.finish()
            for ident, vals in w.done:
                row = self.output_row(ident[0][2], vals)
                if row is None:
                    continue
                if row == prev:
                    n += 1
                    continue
                if prev is not None:
                    yield prev, n
                prev, n = row, 1
            if prev is not None:
                yield prev, n


_NO_CONTEXT = nullcontext()
