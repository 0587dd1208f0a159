"""``<checkpoint>/sinks-committed.json``: the last batch the daemon's sinks hold, and its LSN.

Written atomically (:func:`.state.write_atomic`, an fsync'd rename: a crash leaves the old
file or the new one) once every sink holds a batch — with ``sink_commit = "spark"`` before the
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
import os
import time

NAME = "sinks-committed.json"


def marker_path(checkpoint: str) -> str:
    return os.path.join(checkpoint, NAME)


def write_marker(checkpoint: str, batch_id: int, lsn: int | None) -> None:
    """Record that the sinks hold ``batch_id`` (whose last transaction ends at ``lsn``)."""
    from .state import write_atomic

    data = {"batch_id": batch_id, "lsn": lsn, "at": time.time()}
    write_atomic(marker_path(checkpoint), json.dumps(data).encode())


def read_marker(path: str | None) -> dict | None:
    """The marker file's ``{"batch_id", "lsn", "at"}``, or None (no batch reached the sinks yet)."""
    if not path:
        return None
    try:
        with open(path) as f:
            data = json.load(f)
    except (FileNotFoundError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("batch_id"), int) else None
