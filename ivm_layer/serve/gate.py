"""The one lock around the engine's views: many readers or one writer, writers first.

Engine reads (``count(*)``, lookups, enumeration behind a DuckDB query) hold the gate
*shared*; a commit that changes views (a write through the session, a client's COMMIT,
``CREATE INCREMENTAL VIEW``) holds it *exclusive*. A writer that arrives stops new readers
from entering (no writer starves) and raises :attr:`Gate.writer_waiting`, which a reader that
is still streaming to a slow client watches: it then copies what it has left to send into a
spool (:mod:`.results`) and leaves, so a reader never holds a writer up for longer than it
takes to enumerate the rest of its result. Cost: one ``threading.Condition`` round per
acquire/release.
"""

from __future__ import annotations

import contextlib
import threading
import time


class GateTimeout(Exception):
    """The gate was not acquired within the statement's time limit."""


class Gate:
    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0
        self._writer: int | None = None   # thread id of the exclusive holder
        self._depth = 0                   # re-entrant exclusive holds
        self._waiting_writers = 0
        self.writer_waiting = threading.Event()

    # -- shared ------------------------------------------------------------------------------
    def try_shared(self) -> bool:
        """Take a shared hold without waiting (the event loop's fast path)."""
        with self._cond:
            if self._writer is None and not self._waiting_writers:
                self._readers += 1
                return True
            if self._writer == threading.get_ident():
                self._readers += 1
                return True
            return False

    def acquire_shared(self, timeout: float | None = None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        me = threading.get_ident()
        with self._cond:
            while not (self._writer is None and not self._waiting_writers) and self._writer != me:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise GateTimeout("timed out waiting for a writer to finish")
                self._cond.wait(left)
            self._readers += 1

    def release_shared(self) -> None:
        with self._cond:
            self._readers -= 1
            if self._readers == 0:
                self._cond.notify_all()

    @contextlib.contextmanager
    def shared(self, timeout: float | None = None):
        self.acquire_shared(timeout)
        try:
            yield
        finally:
            self.release_shared()

    # -- exclusive ---------------------------------------------------------------------------
    def acquire_exclusive(self, timeout: float | None = None) -> None:
        me = threading.get_ident()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            if self._writer == me:
                self._depth += 1
                return
            self._waiting_writers += 1
            self.writer_waiting.set()
            try:
                while self._writer is not None or self._readers:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise GateTimeout("timed out waiting for readers and writers to finish")
                    self._cond.wait(left)
            finally:
                self._waiting_writers -= 1
                if not self._waiting_writers:
                    self.writer_waiting.clear()
            self._writer = me
            self._depth = 1

    def release_exclusive(self) -> None:
        with self._cond:
            self._depth -= 1
            if self._depth == 0:
                self._writer = None
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self, timeout: float | None = None):
        self.acquire_exclusive(timeout)
        try:
            yield
        finally:
            self.release_exclusive()

    def held_exclusive(self) -> bool:
        return self._writer == threading.get_ident()
