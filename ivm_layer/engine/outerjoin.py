"""One node of a join tree with outer joins: ``left [INNER|LEFT|RIGHT|FULL] JOIN right ON keys``
(:class:`JoinView`).

Both inputs are views (base-table views, inner-join views, or further :class:`JoinView` nodes);
the node reads their change streams. It keeps each input's rows grouped by the join key
(``key → {row: multiplicity}``; a row whose key has a NULL or fails its side's ON condition
never matches and is kept only when its side is preserved). An output row is a left row
followed by a right row, or one of them padded with NULLs.

Cost per changed input row: O(1) to find its group, plus one output change per partner row it
gains or loses; when a key's group on one side becomes empty or non-empty, the other side's
rows of that key flip between matched and padded (exactly the view's change). Changes of the
two inputs in one batch (a self-join) are applied one side after the other, each against the
other side's current state, so the output change is exact. Memory: both inputs' rows (the
join's output itself is not stored; :meth:`rows` enumerates it from the groups).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..errors import ConcurrentModificationError, UpdateError
from .composite import CompositeView
from .view import Change, Prepared, combined_stats, tell

Key = Callable[[tuple], "tuple | None"]


class JoinView(CompositeView):
    """``left <kind> JOIN right`` on equality keys, maintained from the inputs' changes."""

    made_of = "an outer join"

    def __init__(self, kind: str, left: Any, right: Any, keys: tuple[Key, Key],
                 residual: Callable[[tuple], bool] | None, names: list[str], text: str = ""):
        if kind not in ("inner", "left", "right", "full"):
            raise ValueError(f"join kind {kind!r}")
        self.sql = ""
        self.kind = kind
        self.text = text
        self.branches = [left, right]
        self.columns = list(names)
        self.positions = {v: i for i, v in enumerate(names)}
        self._key = keys
        self._residual = residual  # inner joins only: a condition on the joined row
        self._keep = (kind in ("left", "full"), kind in ("right", "full"))
        self._width = (len(left.columns), len(right.columns))
        self._pad = ((None,) * self._width[0], (None,) * self._width[1])
        self._idx: tuple[dict, dict] = ({}, {})  # key -> {row: multiplicity}
        self._loose: tuple[dict, dict] = ({}, {})  # never-matching rows of a preserved side
        self._total = 0
        self._version = 0
        self._subscribers: list[Callable[[Change], Any]] = []

    # -- introspection ------------------------------------------------------------------
    @property
    def query_class(self) -> str:
        return "join tree"

    def explain(self) -> str:
        kind = "INNER" if self.kind == "inner" else self.kind.upper() + " OUTER"
        stored = [sum(len(g) for g in idx.values()) + len(loose) for idx, loose in zip(self._idx, self._loose)]
        lines = [f"{kind} JOIN{' ON ' + self.text if self.text else ''}: both inputs kept by join key "
                 f"({stored[0]} + {stored[1]} rows); per changed input row O(1) plus one output change per "
                 "partner row; a key whose side becomes empty or non-empty flips the other side's rows "
                 "between matched and NULL-padded"
                 + ("; a condition between the sides is checked on each joined row" if self._residual else ""),
                 "left input:"]
        lines.extend("    " + line for line in self.branches[0].explain().splitlines())
        lines.append("right input:")
        lines.extend("    " + line for line in self.branches[1].explain().splitlines())
        return "\n".join(lines)

    def stats(self) -> dict[str, int]:
        own = sum(sum(len(g) for g in idx.values()) + len(loose) for idx, loose in zip(self._idx, self._loose))
        return combined_stats(self.branches, own)

    def __repr__(self) -> str:
        return f"<ivm_layer.JoinView {self.kind} columns={self.columns} rows={len(self)}>"

    # -- reading ------------------------------------------------------------------------
    def rows(self) -> Iterator[tuple[tuple, int]]:
        v0 = self._version
        for row, k in self._enumerate():
            yield row, k
            if self._version != v0:
                raise ConcurrentModificationError(
                    "the view was updated while this enumeration was open; take list(view.rows()) first")

    def _enumerate(self) -> Iterator[tuple[tuple, int]]:
        left, right = self._idx
        pad_l, pad_r = self._pad
        res = self._residual
        for key, lg in left.items():
            rg = right.get(key)
            if rg:
                for lrow, m in lg.items():
                    for rrow, n in rg.items():
                        row = lrow + rrow
                        if res is None or res(row):
                            yield row, m * n
            elif self._keep[0]:
                for lrow, m in lg.items():
                    yield lrow + pad_r, m
        if self._keep[1]:
            for key, rg in right.items():
                if key not in left:
                    for rrow, n in rg.items():
                        yield pad_l + rrow, n
        for lrow, m in self._loose[0].items():
            yield lrow + pad_r, m
        for rrow, n in self._loose[1].items():
            yield pad_l + rrow, n

    def __len__(self) -> int:
        return self._total

    # -- writing ------------------------------------------------------------------------
    def prepare(self, batch: Mapping) -> Prepared:
        """Phase one: split the batch between the inputs and prepare both (raises, changes nothing).
        Cost: O(batch) plus the inputs' prepares."""
        parts = self.split_batch(batch)
        return Prepared(self, self._version, self.prepare_each(self.branches, parts))

    def commit(self, prepared: Prepared, want_change: bool = False, notify: bool = True) -> Change | None:
        """Phase two (cannot fail): commit the inputs, then apply the left change and the right
        change in turn. Cost: the inputs' commits plus O(1) + one output change per partner
        row of each changed input row; ``notify=False`` leaves the subscribers to the caller."""
        if prepared.view is not self or prepared.version != self._version:
            raise UpdateError("this prepared batch is stale: the view changed since prepare(); prepare it again")
        self._version += 1
        out: dict[tuple, int] = {}
        for side, p in enumerate(prepared.steps):
            if p is None:
                continue
            change = self.branches[side].commit(p, want_change=True)
            if change:
                self._side(side, change, out)
        result = [(row, k) for row, k in out.items() if k]
        self._total += sum(k for _, k in result)
        if notify and result and self._subscribers:
            tell(self._subscribers, result)
        return result if want_change else None

    def _side(self, s: int, change: Change, out: dict[tuple, int]) -> None:
        o = 1 - s
        key_of = self._key[s]
        mine, other = self._idx[s], self._idx[o]
        keep_mine, keep_other = self._keep[s], self._keep[o]
        loose = self._loose[s]
        res = self._residual
        pad_mine, pad_other = self._pad[s], self._pad[o]
        get = out.get
        for row, k in change:
            key = key_of(row)
            if key is None:  # never matches: padded when this side is preserved, else gone
                if keep_mine:
                    _add(loose, row, k)
                    padded = row + pad_other if s == 0 else pad_other + row
                    out[padded] = get(padded, 0) + k
                continue
            group = other.get(key)
            if group:
                for orow, m in group.items():
                    joined = row + orow if s == 0 else orow + row
                    if res is None or res(joined):
                        out[joined] = get(joined, 0) + k * m
            elif keep_mine:
                padded = row + pad_other if s == 0 else pad_other + row
                out[padded] = get(padded, 0) + k
            own = mine.get(key)
            was_empty = not own
            if own is None:
                own = mine[key] = {}
            _add(own, row, k)
            if not own:
                del mine[key]
            if keep_other and group and was_empty != (not own):
                sign = -1 if was_empty else 1  # the other side's rows of this key stop / start being padded
                for orow, m in group.items():
                    padded = pad_mine + orow if s == 0 else orow + pad_mine
                    out[padded] = get(padded, 0) + sign * m


def _add(gmr: dict[tuple, int], row: tuple, k: int) -> None:
    v = gmr.get(row, 0) + k
    if v:
        gmr[row] = v
    else:
        del gmr[row]


def key_function(keys: list[Callable[[tuple], Any]], cond: Callable[[tuple], bool] | None) -> Key:
    """The join key of a row (a tuple of the key expressions' values), or None when the row can
    never match: a key value is NULL, or the row fails its side's ON condition."""
    if not keys and cond is None:
        return lambda row: ()
    if len(keys) == 1 and cond is None:
        f = keys[0]

        def one(row: tuple) -> tuple | None:
            v = f(row)
            return None if v is None else (v,)
        return one

    def key(row: tuple) -> tuple | None:
        if cond is not None and cond(row) is not True:
            return None
        out = tuple(f(row) for f in keys)
        return None if None in out else out
    return key
