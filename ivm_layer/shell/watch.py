"""``\\watch``: psql's (``SELECT … \\watch 2`` runs the query buffer, or the last query,
every 2 seconds until Ctrl-C) and the view's own (``\\watch v`` prints the changes of
incremental view ``v`` as they are applied, until Ctrl-C).

A view watch subscribes to the view and calls ``session.poll()`` in a loop (every ``interval`` seconds; a
PostgreSQL session waits on its replication stream for up to that long). Each change prints
as ``+ row`` / ``- row``. ``poll`` runs in a worker thread (see
:func:`interrupt.call_interruptibly`), so Ctrl-C ends the loop between two polls, never inside
one. Over a plain client of ``ivm serve`` it reads ``COPY (SUBSCRIBE v …) TO STDOUT``
instead (:meth:`ClientSession.watch_view`).

On DuckDB the shell holds the database file's lock, so no other process can write to it:
only writes of this process reach the views, and the watch says so, pointing at
``ivm serve`` for other writers.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from ..errors import ShellError
from .interrupt import call_interruptibly
from .metaargs import plain_name
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
        runner.flush()

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


def command(runner: ShellContext, args: list[str]) -> None:
    """``\\watch [SECONDS]`` after a query, or ``\\watch VIEW [SECONDS]``."""
    interval, count, rest = None, None, []
    for a in args:
        low = a.lower()
        if low.startswith(("i=", "interval=")):
            interval = _seconds(a.split("=", 1)[1])
        elif low.startswith(("c=", "count=")):
            count = _count(a.split("=", 1)[1])
        elif _is_number(a) and interval is None:
            interval = _seconds(a)
        else:
            rest.append(a)
    if len(rest) > 1:
        raise ShellError("usage: \\watch [SECONDS] after a query, or \\watch VIEW [SECONDS]")
    if rest:
        _note_duckdb(runner)
        name = plain_name(rest[0])[0]
        if hasattr(runner.session, "watch_view"):
            runner.session.watch_view(runner, name)
        else:
            watch(runner, name, 0.2 if interval is None else max(interval, 0.01))
        return
    query = runner.scanner_take() or runner.last_query
    if not query:
        raise ShellError("\\watch cannot be used with an empty query")
    _note_duckdb(runner)
    watch_query(runner, query, 2.0 if interval is None else interval, count)


def watch_query(runner: ShellContext, query: str, interval: float, count: int | None = None) -> int:
    """psql's ``\\watch``: run ``query`` every ``interval`` seconds, each result under a title
    with the time, until Ctrl-C (or ``count`` runs); returns how many ran."""
    runs = 0
    try:
        while count is None or runs < count:
            if runs:
                runner.flush()
                time.sleep(interval)
            title = f"{time.strftime('%c')} (every {interval:g}s)\n\n"
            runner.write(title)
            try:
                runner.run_query(query)
            except runner.db_errors as e:
                if getattr(e, "ivm_interrupted", False):
                    break
                raise
            runs += 1
    except KeyboardInterrupt:
        pass
    return runs


def _note_duckdb(runner: ShellContext) -> None:
    session = runner.session
    if session.dialect != "duckdb":
        return
    url = str(getattr(session, "url", "") or "")
    if url in ("", "duckdb://", ":memory:", "duckdb:///:memory:"):
        text = ("this in-memory DuckDB database belongs to this shell alone: only changes made "
                "here can show (none while \\watch waits)")
    else:
        path = url.removeprefix("duckdb:///").removeprefix("duckdb://")
        text = (f"this shell holds the lock on {path}: no other process can write to it, so only "
                "changes made by this shell can show. To watch the writes of other clients, serve "
                f"the file (ivm serve {path}) and connect to it (ivm shell "
                "postgresql://127.0.0.1:5433/…)")
    runner.notices.emit("NOTICE", text)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ShellError(f"\\watch: interval {text!r} is not a number of seconds") from None
    if not 0 <= value <= 3600:
        raise ShellError("\\watch: the interval must be between 0 and 3600 seconds")
    return value


def _count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise ShellError(f"\\watch: count {text!r} is not a positive whole number")
    return int(text)
