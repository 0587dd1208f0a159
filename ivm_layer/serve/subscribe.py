"""``SUBSCRIBE v``: a view's changes streamed to clients, resumable from a progress position.

The :class:`Hub` registers one session subscriber per subscribed view (``session.subscribe``)
and keeps, per view, a bounded log of the consolidated changes of the last commits, each
with its **progress**: a monotone position — the server's commit sequence on DuckDB (an epoch
stored in the database, times 2**32, plus a counter: values of a restarted server are larger
than any value it gave before), the commit LSN on PostgreSQL. A :class:`Subscriber` gets
first the view's contents (diff +1 each, unless ``SNAPSHOT = false``) at the progress of the
moment it subscribed, then every later change in commit order. ``RESUME FROM p`` replays the
logged changes after ``p`` instead of a snapshot, so a client that reconnects loses and
duplicates nothing, as long as the log still reaches back to ``p`` (else the error says so).

Writers never wait for a subscriber: a commit appends its change to each subscriber's queue
(O(change)); a subscriber whose queue holds more than ``max_backlog`` rows is dropped with
an error naming the last progress it was sent. Cost per commit: O(change) per subscribed
view, plus the filter of a parameterized subscription (O(change) comparisons).
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable, Iterator

from .results import FLUSH
from .sqlstate import ServeError

log = logging.getLogger("ivm_layer.serve")


class ViewLog:
    """The last changes of one view: ``(progress, change)`` pairs, at most ``max_rows`` rows."""

    def __init__(self, floor: int, max_rows: int):
        self.entries: collections.deque = collections.deque()
        self.rows = 0
        self.max_rows = max_rows
        self.floor = floor          # every change after this progress is in the log

    def add(self, progress: int, change: list) -> None:
        self.entries.append((progress, change))
        self.rows += len(change)
        while self.rows > self.max_rows and len(self.entries) > 1:
            p, old = self.entries.popleft()
            self.rows -= len(old)
            self.floor = p

    def after(self, progress: int) -> list[tuple[int, list]]:
        if progress < self.floor:
            raise ServeError("55000", f"cannot resume from ivm_progress {progress}: the server keeps changes "
                                      f"after {self.floor} only (the last {self.max_rows} rows of changes)",
                             hint="SUBSCRIBE again with a snapshot (without RESUME FROM)")
        return [(p, c) for p, c in self.entries if p > progress]


class Subscriber:
    """One client's subscription: a queue of ``(progress, change)`` the commits fill."""

    def __init__(self, view: str, max_backlog: int, keep: Callable[[tuple], tuple | None] | None = None):
        self.view = view
        self.max_backlog = max_backlog
        self.keep = keep                    # row → output row, or None to leave it out
        self.queue: collections.deque = collections.deque()
        self.backlog = 0
        self.cond = threading.Condition()
        self.dropped: ServeError | None = None
        self.sent_progress: int | None = None
        self.closed = False

    def offer(self, progress: int, change: list) -> None:
        """Called by the committing thread: never blocks."""
        if self.keep is not None:
            change = [(out, k) for out, k in ((self.keep(r), k) for r, k in change) if out is not None]
        if not change or self.dropped is not None:
            return
        with self.cond:
            self.queue.append((progress, change))
            self.backlog += len(change)
            if self.backlog > self.max_backlog:
                self.dropped = ServeError(
                    "53400", f"SUBSCRIBE to {self.view!r} dropped: the client fell {self.backlog} rows of changes "
                             f"behind (the limit is {self.max_backlog})",
                    hint=f"read faster, or reconnect with SUBSCRIBE {self.view} WITH (RESUME FROM "
                         f"{self.sent_progress if self.sent_progress is not None else '<last ivm_progress read>'})")
                self.queue.clear()
                self.backlog = 0
                log.warning("%s", self.dropped)   # once, whichever way the client learns of it
            self.cond.notify_all()

    def take(self, timeout: float) -> tuple[int, list] | None:
        with self.cond:
            if not self.queue and self.dropped is None:
                self.cond.wait(timeout)
            if self.dropped is not None:
                raise self.dropped
            if not self.queue:
                return None
            item = self.queue.popleft()
            self.backlog -= len(item[1])
            return item


class Hub:
    """Commit progress, per-view logs and subscribers of one server."""

    def __init__(self, log_rows: int = 100_000):
        self.log_rows = log_rows
        self.logs: dict[str, ViewLog] = {}
        self.subs: dict[str, list[Subscriber]] = {}
        self._unsub: dict[str, Callable[[], None]] = {}
        self._lock = threading.Lock()

    def watch(self, session, view: str, progress: Callable[[], int], identity: object,
              sink: Callable[[list], None] | None = None) -> None:
        """Start logging ``view``'s changes (once per view object: a view re-created under the
        same name starts a new log). Each change is published with ``progress()`` at once, or
        handed to ``sink`` for the caller to publish with a position known only later."""
        with self._lock:
            entry = self._unsub.get(view)
            if entry is not None and entry[1] == id(identity):
                return
            if entry is not None:
                entry[0]()
            self.logs[view] = ViewLog(progress(), self.log_rows)

            def on_change(change, view=view):
                if sink is not None:
                    sink(change)
                else:
                    self.publish(view, progress(), change)

            self._unsub[view] = (session.subscribe(view, on_change), id(identity))

    def forget(self, view: str) -> None:
        """The view was dropped: end its subscriptions."""
        with self._lock:
            entry = self._unsub.pop(view, None)
            self.logs.pop(view, None)
            subs = self.subs.pop(view, [])
        if entry is not None:
            entry[0]()
        for s in subs:
            s.dropped = ServeError("57P01", f"incremental view {view!r} was dropped; its subscriptions ended")
            with s.cond:
                s.cond.notify_all()

    def publish(self, view: str, progress: int, change: list) -> None:
        log = self.logs.get(view)
        if log is not None:
            log.add(progress, change)
        for s in list(self.subs.get(view, ())):
            s.offer(progress, change)

    def attach(self, sub: Subscriber) -> None:
        with self._lock:
            self.subs.setdefault(sub.view, []).append(sub)

    def detach(self, sub: Subscriber) -> None:
        sub.closed = True
        with self._lock:
            lst = self.subs.get(sub.view)
            if lst and sub in lst:
                lst.remove(sub)

    def replay(self, view: str, after: int) -> list[tuple[int, list]]:
        log = self.logs.get(view)
        if log is None:
            raise ServeError("55000", f"cannot resume view {view!r} from ivm_progress {after}: its changes are "
                                      "not logged on this server (it restarted, or no one subscribed before)",
                             hint="SUBSCRIBE again with a snapshot (without RESUME FROM)")
        return log.after(after)

    def subscriber_backlog(self) -> dict[str, int]:
        return {v: sum(s.backlog for s in subs) for v, subs in self.subs.items()}


def stream(sub: Subscriber, hub: Hub, first: list[tuple[int, object]], check: Callable[[], None],
           progress_rows: bool, width: int) -> Iterator[tuple]:
    """The rows of a subscription: ``first`` (snapshot or replay: ``(progress, [(row, k)…])``),
    then live changes, as ``(progress, diff, *row)``; with ``progress_rows`` a ``(progress,
    NULL, NULL…)`` row after each batch. :data:`.results.FLUSH` after each batch and while
    idle tells the sender to put out what it holds. Ends only when ``check()`` raises (the
    client cancelled) or the subscriber is dropped."""
    try:
        for p, change in first:
            for row, k in change:
                yield (p, k, *row)
            sub.sent_progress = p
            if progress_rows:
                yield (p, None) + (None,) * width
            yield FLUSH
        while True:
            check()
            item = sub.take(0.1)
            if item is None:
                yield FLUSH
                continue
            p, change = item
            for row, k in change:
                yield (p, k, *row)
            sub.sent_progress = p
            if progress_rows:
                yield (p, None) + (None,) * width
            yield FLUSH
    finally:
        hub.detach(sub)
