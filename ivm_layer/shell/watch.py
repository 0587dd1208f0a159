"""``\\watch view``: print a view's changes as they are applied, until Ctrl-C.

Subscribes to the view and calls ``session.poll()`` in a loop (every ``interval`` seconds; a
PostgreSQL session waits on its replication stream for up to that long). Each change prints
as ``+ row`` / ``- row``. ``poll`` runs in a worker thread (see
:func:`interrupt.call_interruptibly`), so Ctrl-C ends the loop between two polls, never inside
one.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from .interrupt import call_interruptibly
from .render import render_change

if TYPE_CHECKING:
    from .context import ShellContext


def watch(runner: ShellContext, name: str, interval: float = 0.2,
          stop: threading.Event | None = None) -> int:
    """Stream the changes of view ``name`` to the runner's output until Ctrl-C, or until
    ``stop`` is set (then the changes committed so far are printed first); returns how many
    change lines were printed."""
    session = runner.session
    info = session.info(name)[0]
    columns = list(info.columns)
    display = runner.display
    pending: list[tuple[tuple, int]] = []
    lock = threading.Lock()

    def on_change(change: list[tuple[tuple, int]]) -> None:
        with lock:
            pending.extend(change)

    stopping = threading.Event() if stop is None else stop
    printed = 0

    def flush() -> None:
        nonlocal printed
        with lock:
            batch, pending[:] = list(pending), []
        if batch:
            runner.write("".join(render_change(columns, row, k, display) for row, k in batch))
            printed += len(batch)

    unsubscribe = session.subscribe(info.name, on_change)
    try:
        if display.format == "aligned" and not display.quiet:
            runner.write(f"Watching {info.name} ({', '.join(columns)}): + inserted, - deleted; "
                         "Ctrl-C to stop.\n")
        while not stopping.is_set():
            t0 = time.monotonic()
            _, interrupted = call_interruptibly(lambda: session.poll(timeout=interval), stopping.set)
            flush()
            if interrupted:
                break
            rest = interval - (time.monotonic() - t0)
            if rest > 0:
                stopping.wait(rest)
        else:  # stopped by the caller (not Ctrl-C): what was committed until then is printed too
            call_interruptibly(lambda: session.poll(timeout=0.0), lambda: None)
            flush()
    except KeyboardInterrupt:
        pass
    finally:
        unsubscribe()
    if display.format == "aligned" and not display.quiet:
        runner.write(f"Stopped watching {info.name} ({printed} change{'' if printed == 1 else 's'}).\n")
    return printed
