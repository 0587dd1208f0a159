"""Running a statement so that Ctrl-C cancels it cleanly, at no cost per statement.

The statement runs on the main thread. While it runs, SIGINT only records that it came (the
Python-level handler raises nothing, so no ``KeyboardInterrupt`` lands in the middle of the
session's bookkeeping), and a helper thread, woken by the signal through
:func:`signal.set_wakeup_fd` even while the main thread is inside DuckDB or libpq, sends the
database a cancel request (DuckDB ``interrupt()``, libpq cancel). The statement then fails
with the database's "interrupted" error and the session and its views stay consistent.

Per statement this costs two ``sigaction`` calls and two wake-up fd swaps (microseconds), not
a thread start: a pasted block or a ``-f`` script of thousands of statements pays nothing for
being cancellable.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import TypeVar

from .redact import mask

T = TypeVar("T")


def cancel_statement(session) -> None:
    """Ask the database to stop the statement running on the session's connection."""
    conn = session.connection
    if session.dialect == "duckdb":
        conn.interrupt()
        return
    cancel = getattr(conn, "cancel_safe", None) or conn.cancel
    cancel()


class _Canceller:
    """The helper thread and the pipe the signal wakes it through."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.write_fd, False)
        self.on_interrupt: Callable[[], None] | None = None
        self.pressed = False          # SIGINT came (set by the Python-level handler)
        self.sent = False             # the helper sent the cancel request
        threading.Thread(target=self._loop, name="ivm-shell-cancel", daemon=True).start()

    def _loop(self) -> None:
        while True:
            try:
                data = os.read(self.read_fd, 64)
            except OSError:
                return
            if not data:
                return
            if signal.SIGINT not in data:
                continue
            callback = self.on_interrupt
            if callback is None:
                continue
            self.sent = True
            try:
                callback()
            except Exception as e:  # noqa: BLE001 - the statement keeps running; say so
                sys.stderr.write(f"could not send the cancel request: {mask(str(e))}\n")

    def record(self, signum, frame) -> None:
        self.pressed = True


_canceller: _Canceller | None = None


def call_interruptibly(fn: Callable[[], T], on_interrupt: Callable[[], None]) -> tuple[T, bool]:
    """Run ``fn`` (on this thread); on Ctrl-C call ``on_interrupt`` from the helper thread and
    keep waiting for ``fn``. Returns ``(fn's result, whether Ctrl-C was pressed)``; ``fn``'s
    exception is re-raised with ``ivm_interrupted`` set. Off the main thread (where signals
    cannot be handled) ``fn`` just runs."""
    global _canceller
    if threading.current_thread() is not threading.main_thread():
        return fn(), False
    if _canceller is None:
        _canceller = _Canceller()
    c = _canceller
    c.pressed = c.sent = False
    old_fd = signal.set_wakeup_fd(c.write_fd, warn_on_full_buffer=False)
    old_handler = signal.signal(signal.SIGINT, c.record)
    c.on_interrupt = on_interrupt
    try:
        result = fn()
    except BaseException as e:
        try:
            e.ivm_interrupted = c.pressed or c.sent  # type: ignore[attr-defined]
        except AttributeError:  # an exception type without a __dict__
            pass
        raise
    finally:
        c.on_interrupt = None
        signal.signal(signal.SIGINT, old_handler)
        signal.set_wakeup_fd(old_fd)
    return result, c.pressed or c.sent
