"""The daemon's sinks written on a background thread, one batch at a time, in order.

A batch's view changes are written while Spark reads the next batch and the engine applies
it: the sink's server (a PostgreSQL ``COPY``) works on one core while the driver's Python
works on the other. Batch N+1 waits for batch N's sinks before it hands its own changes
over, so at most one batch is in flight and the sinks see the batches in order.

Exactly-once is kept by the checkpoint, not by this thread: a batch is in the engine's log
before its sinks are written, and at start-up the daemon applies the logged batches that a
sink does not hold yet one at a time and writes them again (``Sink.committed``;
``runner.DriverEngine``). A batch whose sink write fails fails the next batch (or the
daemon's stop), and the restart writes it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from ..engine.view import Change
from .sinks import Sink


class SinkWriter:
    """Writes batches to ``sinks`` on one background thread."""

    def __init__(self, sinks: list[Sink]):
        self.sinks = sinks
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def prepare(self, changes: Mapping[str, Change]) -> list:
        """Each sink's work on a batch that needs no connection (``Sink.prepare_batch``), done
        on the caller's thread while the batch in flight is written."""
        return [s.prepare_batch(changes) for s in self.sinks]

    def write(self, batch_id: int, changes: Mapping[str, Change], prepared: list | None = None) -> float:
        """Write one batch now (after the one in flight); returns the seconds it took."""
        self.wait()
        return self._write(batch_id, changes, prepared)

    def _write(self, batch_id: int, changes: Mapping[str, Change], prepared: list | None) -> float:
        t = time.monotonic()
        for i, s in enumerate(self.sinks):
            s.write(batch_id, changes, prepared[i] if prepared is not None else None)
        return time.monotonic() - t

    def submit(self, batch_id: int, changes: Mapping[str, Change], done: Callable[[float], None],
               failed: Callable[[BaseException], None] | None = None,
               prepared: list | None = None) -> float:
        """Start writing one batch on the background thread, once the batch in flight is
        written; ``done(seconds)`` is called there after every sink holds it, ``failed(error)``
        if a sink fails (the error is also raised by the next :meth:`wait`). Returns the
        seconds spent waiting for the batch in flight; raises its failure."""
        waited = self.wait()

        def run() -> None:
            try:
                secs = self._write(batch_id, changes, prepared)
                done(secs)
            except BaseException as e:  # noqa: BLE001 - handed to the next wait()
                self._error = e
                if failed is not None:
                    failed(e)

        self._thread = threading.Thread(target=run, name=f"ivm-sinks-{batch_id}", daemon=True)
        self._thread.start()
        return waited

    def wait(self) -> float:
        """Wait for the batch in flight; raises its failure. Returns the seconds waited."""
        t = time.monotonic()
        th, self._thread = self._thread, None
        if th is not None:
            th.join()
        err, self._error = self._error, None
        if err is not None:
            raise err
        return time.monotonic() - t
