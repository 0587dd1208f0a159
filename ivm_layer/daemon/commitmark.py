"""``<checkpoint>/sinks-committed.json``: the last batch the daemon's sinks hold, and its LSN.

Written atomically (:meth:`.statefs.StateFS.write`: an fsync'd rename on a local path, one
PUT on an object store: a crash leaves the old content or the new) once every sink holds a batch — with ``sink_commit = "spark"`` before the
``foreachBatch`` function returns, so before Spark writes the batch to its commit log; with
``"pipelined"`` by the sinks' thread, beside the next batch. Readers:

- the ``ivm-cdc`` source's change feed (in Spark's source process) confirms the slot up to its
  ``lsn`` (polled every 0.25 s while transactions are staged), besides what Spark confirms
  through the source's ``commit(end)`` (called when Spark plans the next batch). A batch whose
  marker is written but that Spark did not commit (a crash in between) is replayed by Spark
  over the same LSN range; the server does not send its transactions again, and nothing needs
  them: the engine (batch id) and the sinks (``ivm_daemon_batches``) hold it already;
- the source's snapshot batch: a replayed snapshot batch the sinks hold is not read again;
- ``--shards N``: whether the sinks start fresh (no marker: no batch ever reached them);
- ``ivm daemon --status`` (``sinks_committed``).

The daemon never reads Spark's checkpoint directory layout. O(1) per batch: one small file.
"""

from __future__ import annotations

import json
import time

from .statefs import StateFS, join, read_file

NAME = "sinks-committed.json"


def marker_path(checkpoint: str) -> str:
    """The marker's location (a path, or a URL when the checkpoint is one)."""
    return join(checkpoint, NAME)


def write_marker(checkpoint: str | StateFS, batch_id: int, lsn: int | None) -> None:
    """Record that the sinks hold ``batch_id`` (whose last transaction ends at ``lsn``)."""
    fs = checkpoint if isinstance(checkpoint, StateFS) else StateFS(checkpoint)
    data = {"batch_id": batch_id, "lsn": lsn, "at": time.time()}
    fs.write(NAME, json.dumps(data).encode())


def read_marker(path: str | None) -> dict | None:
    """The marker file's ``{"batch_id", "lsn", "at"}``, or None (no batch reached the sinks yet)."""
    if not path:
        return None
    try:
        raw = read_file(path)
        data = json.loads(raw) if raw is not None else None
    except ValueError:
        return None
    return data if isinstance(data, dict) and isinstance(data.get("batch_id"), int) else None


def committed_lsn(path: str | None) -> int | None:
    """The marker's ``lsn`` (what the change feed may confirm), None if absent or unreadable."""
    try:
        data = read_marker(path)
    except Exception:  # noqa: BLE001 - an unreachable store confirms nothing more, it is asked again
        return None
    lsn = data.get("lsn") if data else None
    return int(lsn) if isinstance(lsn, int) else None
