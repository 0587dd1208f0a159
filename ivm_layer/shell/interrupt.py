"""Running a statement so that Ctrl-C cancels it cleanly: the work runs in a worker thread
while the main thread waits, and a SIGINT sends the database a cancel request (DuckDB
``interrupt()``, libpq cancel) instead of raising in the middle of the session's bookkeeping."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

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


def call_interruptibly(fn: Callable[[], T], on_interrupt: Callable[[], None]) -> tuple[T, bool]:
    """Run ``fn`` in a worker thread; on Ctrl-C call ``on_interrupt`` and keep waiting for it.
    Returns ``(fn's result, whether Ctrl-C was pressed)``; ``fn``'s exception is re-raised.

    While ``fn`` runs, SIGINT only sets a flag (no ``KeyboardInterrupt`` can escape between
    starting the worker and waiting for it, which would leave the statement running behind
    the next prompt)."""
    box: dict[str, Any] = {}
    done = threading.Event()
    pressed = threading.Event()

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the main thread, re-raised there
            box["error"] = e
        finally:
            done.set()

    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, lambda signum, frame: pressed.set()) if main else None
    interrupted = False
    try:
        threading.Thread(target=target, name="ivm-shell-statement", daemon=True).start()
        while not done.wait(0.05):
            if pressed.is_set():
                pressed.clear()
                interrupted = True
                try:
                    on_interrupt()
                except Exception as e:  # noqa: BLE001 - the statement keeps running; say so
                    sys.stderr.write(f"could not send the cancel request: {mask(str(e))}\n")
        interrupted = interrupted or pressed.is_set()
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)
    if "error" in box:
        err = box["error"]
        try:
            err.ivm_interrupted = interrupted  # type: ignore[attr-defined]
        except AttributeError:  # an exception type without a __dict__
            pass
        raise err
    return box["value"], interrupted
