"""The one road from captured changes to the views: :class:`ViewSet`.

Every driver — the DuckDB session (per statement), the PostgreSQL session (per batch of a
view's stream), the daemon (per Spark batch) and ``ivm serve`` — hands what it captured, one
:class:`~.changes.Changes`, to :meth:`ViewSet.apply`, which

1. **prepares** every view reading a changed table (``View.prepare``: validation and the
   leaf deltas; a bad batch raises here and every view is as it was). A view that treats a
   changed table as *static* (paper 003) is **rebuilt** instead: compiled again
   (``member.recompile()``) and loaded from its own base rows plus the batch (static tables
   first), aside — O(the view's base rows), the old view untouched;
2. **commits** all of them (cannot fail): prepared views commit, rebuilt ones replace the old
   object. It returns each view's change, ``{member: [(row, Δk)]}``, for the members that
   want it (a table to write, a served copy, sinks: ``member.wants_change``) or that anyone
   subscribed to; the views' own subscribers are *not* called yet;
3. **logs**: the undo log (``undo``, a list the driver keeps for its transaction;
   :meth:`ViewSet.undo` reverses it, newest first — ``ROLLBACK``) and the checkpoint log
   (``position``: the batch's place in its source, appended to :attr:`ViewSet.checkpoint`,
   whose owner decides when it is made durable);
4. **notifies after the driver's own commit** (:meth:`ViewSet.notify`; :meth:`ViewSet.discard`
   after a rollback): the member's session-level callbacks and the engine view's own
   ``view.subscribe`` callbacks go the same way, with each view's change consolidated over
   everything applied since the last notification; an exception a callback raises becomes a
   :class:`~ivm_layer.errors.SubscriberWarning` and stops nothing — the change is committed in
   the database and in the views alike.

A *member* is a driver's per-view state (:class:`Member`): the engine view, the static
tables, the session-level subscribers, whether the driver wants the view's change, how to
compile the view again. The driver keeps the members (``members``, shared by reference) and
its own catalog; :meth:`ViewSet.apply` skips a stopped member (``error`` set).

Cost: O(changes) here plus each view's own update (its ``explain()``); nothing is
proportional to rows that did not change, except a rebuild (O(the view's rows): the price of
a write to a static table).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from ..engine.protocol import Change, View
from ..errors import SubscriberWarning, UpdateError
from .changes import Changes

log = logging.getLogger("ivm_layer.maintain")


class Member(Protocol):
    """What the ViewSet needs of a driver's per-view state."""

    view: Any                     # the engine view (replaced by a rebuild)
    error: BaseException | None   # a stopped view: skipped
    subscribers: list             # session-level callbacks ``cb(change)``
    rebuilds: int                 # rebuilds after writes to its static tables

    @property
    def name(self) -> str: ...

    @property
    def static(self) -> set[str]: ...

    @property
    def wants_change(self) -> bool:
        """The driver needs the view's change (a table to write, a served copy, sinks)."""

    def recompile(self) -> View:
        """The member's definition compiled again: an empty view (for a rebuild)."""


class Rebuilt:
    """An undo-log entry of a rebuild: the view object (and count) a rollback puts back."""

    __slots__ = ("rebuilds", "view")

    def __init__(self, view: Any, rebuilds: int):
        self.view, self.rebuilds = view, rebuilds


class Outcome(dict):
    """What :meth:`ViewSet.apply` returns: ``{member: change}`` (members whose change was
    wanted and is not empty), and ``rebuilt``: the members rebuilt from scratch."""

    __slots__ = ("rebuilt",)

    def __init__(self) -> None:
        super().__init__()
        self.rebuilt: list = []


class Prepared:
    """Phase one of :meth:`ViewSet.apply` for one batch (see :meth:`ViewSet.prepare`)."""

    __slots__ = ("changes", "prepared", "rebuilt")

    def __init__(self, changes: Changes, prepared: list, rebuilt: list):
        self.changes = changes
        self.prepared = prepared      # [(member, view, the view's prepared batch)]
        self.rebuilt = rebuilt        # [(member, new view)]


class ViewSet:
    """The views of one driver, updated together (see the module docstring)."""

    def __init__(self, members: Mapping[str, Any] | None = None, checkpoint: Any = None):
        #: name → member; the driver's own dict (shared, not copied)
        self.members: Mapping[str, Any] = members if members is not None else {}
        #: where ``apply(…, position=…)`` appends the batch (``append(position, changes)``),
        #: e.g. a :class:`~.checkpoint.CheckpointStore`; None: no checkpoint log
        self.checkpoint = checkpoint
        #: member → (view, {row: Δk}) not yet told to the subscribers
        self.pending: dict[Any, tuple[Any, dict[tuple, int]]] = {}

    # -- the road ----------------------------------------------------------------------------
    def apply(self, changes: Changes, *, undo: list | None = None, position: Any = None,
              only: Iterable[Any] | None = None, quiet: bool = False) -> Outcome:
        """Prepare every view reading ``changes`` (all, or the members in ``only``), then
        commit them all (or raise with nothing changed); return their changes. ``undo``: the
        driver's undo log for this transaction; ``position``: record the batch in the
        checkpoint log at that position; ``quiet``: a batch the subscribers and the driver
        were told about before (a replay): no change is computed or queued."""
        outcome = self.commit(self.prepare(changes, only), undo, quiet)
        if position is not None:
            self.log(position, changes)
        return outcome

    def prepare(self, changes: Changes, only: Iterable[Any] | None = None) -> Prepared:
        """Phase one: every reading view prepared, static-table readers rebuilt aside. Raises
        (``UpdateError`` …) with every view as it was."""
        prepared: list = []
        rebuilt: list = []
        if not changes:
            return Prepared(changes, prepared, rebuilt)
        for m in (self.members.values() if only is None else only):
            if m.error is not None:
                continue
            view = m.view
            batch = changes.batch(view.tables)
            if not batch:
                continue
            if m.static and not m.static.isdisjoint(batch):
                rebuilt.append((m, self.rebuild(m, changes)))
            else:
                prepared.append((m, view, view.prepare(batch)))
        return Prepared(changes, prepared, rebuilt)

    def commit(self, p: Prepared, undo: list | None = None, quiet: bool = False) -> Outcome:
        """Phase two (cannot fail): rebuilt views replace the old, prepared ones commit; every
        step goes into ``undo``; changes are returned and queued for :meth:`notify`."""
        out = Outcome()
        for m, view in p.rebuilt:
            old = m.view
            counted = any(old.base_rows(t) for t in old.tables)   # a first load is no rebuild
            if undo is not None:
                undo.append((m, Rebuilt(old, m.rebuilds)))
            m.view = view
            if counted:
                m.rebuilds += 1
                log.info("incremental view %s rebuilt: a static table changed (rebuild %d)", m.name, m.rebuilds)
            out.rebuilt.append(m)
            if not quiet and (m.wants_change or m.subscribers or old.subscribers):
                self._record(out, m, old, _difference(old, view))
        for m, view, prepared in p.prepared:
            told = bool(m.subscribers) or bool(view.subscribers)
            want = not quiet and (m.wants_change or told)
            change = view.commit(prepared, want_change=want, notify=False)
            if undo is not None:
                undo.append((m, view, p.changes.only(view.tables)))
            if want and change:
                self._record(out, m, view, change)
        return out

    def _record(self, out: Outcome, m: Any, view: Any, change: Change) -> None:
        if not change:
            return
        out[m] = change
        if m.subscribers or view.subscribers:
            got = self.pending.get(m)
            if got is None:
                got = self.pending[m] = (view, {})
            acc = got[1]
            for row, k in change:
                acc[row] = acc.get(row, 0) + k

    def rebuild(self, m: Any, changes: Changes) -> Any:
        """``m``'s view compiled again and loaded from its current base rows plus ``changes``
        (static tables first), O(its rows); the current view is left as it is. A delete of a
        row the view does not hold raises :class:`UpdateError`."""
        current = m.view
        view = m.recompile()
        tables: dict[str, dict[tuple, int]] = {}
        for t in view.tables:
            rows = changes.applied_to(current.base_rows(t), t)
            bad = next((r for r, k in rows.items() if k < 0), None)
            if bad is not None:
                raise UpdateError(f"cannot delete {bad!r} from {t!r}: it is not present; no change was applied")
            tables[t] = rows
        load_view(view, tables, m.static)
        return view

    # -- after the driver's commit or rollback ------------------------------------------------
    def notify(self) -> None:
        """Tell the subscribers (the engine view's, then the member's) each view's change since
        the last call, consolidated; an exception becomes a :class:`SubscriberWarning`."""
        pending, self.pending = self.pending, {}
        for m, (view, acc) in pending.items():
            change = [(r, k) for r, k in acc.items() if k]
            if not change:
                continue
            for cb in (*view.subscribers, *m.subscribers):
                try:
                    cb(list(change))
                except Exception as e:  # noqa: BLE001 - a subscriber's bug must not undo or stop anything
                    warnings.warn(SubscriberWarning(
                        f"a subscriber of view {m.name!r} raised {type(e).__name__}: {e} "
                        "(the change is committed and applied to the view)"), stacklevel=3)

    def discard(self) -> None:
        """Forget the changes not yet told (the driver rolled them back)."""
        self.pending.clear()

    @staticmethod
    def undo(undo: list) -> None:
        """Reverse an undo log, newest first: batches applied negated (to the view object they
        were applied to), rebuilt views put back; the log is emptied. Cannot fail: each step
        reverses one that succeeded."""
        for entry in reversed(undo):
            m = entry[0]
            if isinstance(entry[1], Rebuilt):
                m.view, m.rebuilds = entry[1].view, entry[1].rebuilds
                continue
            _, view, changes = entry
            view.commit(view.prepare(changes.negated().batch()), notify=False)
        undo.clear()

    def log(self, position: Any, changes: Mapping[str, Any] | None = None) -> None:
        """Append ``changes`` (none: a position the source passed with nothing for these views)
        to the checkpoint log at ``position``."""
        if self.checkpoint is not None:
            self.checkpoint.append(position, changes.batch() if isinstance(changes, Changes) else (changes or {}))


def load_view(view: Any, tables: Mapping[str, Mapping[tuple, int] | Iterable[tuple[tuple, int]]],
              static: Iterable[str] = ()) -> None:
    """Load rows into a new ``view`` (no subscriber has seen it): ``{table: {row: k}}`` or
    ``{table: [(row, k)]}``, static tables first (so no load counts as a write to a static
    table), one batch each. O(rows) plus the view's bulk update cost."""
    static = set(static)
    for first in (True, False):
        part = {t: (rows.items() if isinstance(rows, Mapping) else rows)
                for t, rows in tables.items() if rows and (t in static) == first}
        if part:
            view.apply(part)


def _difference(old: Any, new: Any) -> Change:
    """The change from ``old``'s rows to ``new``'s, O(both)."""
    before = dict(old.rows())
    after = dict(new.rows())
    change = [(r, k - before.get(r, 0)) for r, k in after.items() if k != before.get(r, 0)]
    change += [(r, -k) for r, k in before.items() if r not in after]
    return change
