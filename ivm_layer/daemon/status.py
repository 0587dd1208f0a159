"""The status file of a running daemon: ``<checkpoint>/status.json``, rewritten after every batch.

``ivm daemon --status --checkpoint DIR`` prints it, and says whether the process that wrote
it is still alive.
"""

from __future__ import annotations

import json
import os
import threading
import time

from .state import write_atomic


def status_path(checkpoint: str) -> str:
    return os.path.join(checkpoint, "status.json")


class StatusFile:
    """Accumulates per-batch figures and rewrites the status file atomically (from the
    query's thread and the sink thread: one writer at a time)."""

    def __init__(self, checkpoint: str, name: str, master: str, shards: int):
        self.path = status_path(checkpoint)
        self._lock = threading.RLock()
        self.data = {"daemon": name, "pid": os.getpid(), "master": master, "shard_count": shards,
                     "shards": [], "state": "starting", "started_at": time.time(), "batches": 0,
                     "rows_in_total": 0, "changes_in": 0, "changes_out_total": 0, "last_batch": None,
                     "sinks_committed_batch": None, "spark_committed_batch": None, "progress": None}
        #: called with each batch's fields once its sinks hold it (the metrics' histograms)
        self.observers: list = []
        self.write()

    def batch(self, **fields) -> None:
        """Record one batch: ``rows_in``, ``changes_out``, ``lsn``/``lsn_text``, ``seconds``
        (from its start until its sinks held it), ``query_seconds`` (its time in the query,
        which gives ``changes_per_s``), ``seconds_behind`` (now − last commit time in the
        batch)."""
        with self._lock:
            self._batch(fields)

    def _batch(self, fields: dict) -> None:
        d = self.data
        if d["state"] not in ("failed", "stopped"):
            d["state"] = "running"
        secs = fields.get("seconds") or 0.0
        fields.setdefault("changes_per_s", round(fields.get("rows_in", 0) / secs) if secs > 0 else None)
        d["batches"] += 1
        d["rows_in_total"] += fields.get("rows_in", 0)
        d["changes_in"] += fields.get("changes_in", fields.get("rows_in", 0))
        d["changes_out_total"] += fields.get("changes_out", 0)
        d["last_batch"] = dict(fields, at=time.time())
        if fields.get("batch_id") is not None:
            d["sinks_committed_batch"] = fields["batch_id"]
        self.write()
        for observe in self.observers:
            observe(fields)

    def init_shards(self, n: int) -> None:
        """``--shards N``: one entry per shard (``routed_rows`` since this process started,
        ``state_rows`` as of the last batch the shard ran, ``shipped_bytes`` in total)."""
        with self._lock:
            self.data["shards"] = [{"shard": i, "routed_rows": 0, "state_rows": 0, "shipped_bytes": 0}
                                   for i in range(n)]

    def shard_batch(self, per_shard: dict) -> None:
        """One batch's figures per shard that ran: ``{shard: {routed_rows, state_rows, shipped_bytes}}``
        (written with the next :meth:`batch`)."""
        with self._lock:
            for entry in self.data["shards"]:
                got = per_shard.get(entry["shard"])
                if got:
                    entry["routed_rows"] += got["routed_rows"] or 0
                    entry["shipped_bytes"] += got["shipped_bytes"] or 0
                    if got.get("state_rows") is not None:
                        entry["state_rows"] = got["state_rows"]

    def progress(self, progress: dict) -> None:
        """Spark's progress report of a batch it committed (:mod:`.listener`)."""
        with self._lock:
            self.data["progress"] = progress
            if progress.get("batchId") is not None:
                self.data["spark_committed_batch"] = progress["batchId"]
            self.write()

    def snapshot(self) -> dict:
        """A copy of the figures (the metrics endpoint reads them at scrape time)."""
        with self._lock:
            return dict(self.data)

    def set(self, **fields) -> None:
        with self._lock:
            self.data.update(fields)
            if fields.get("state") in ("stopped", "failed"):
                self.data["stopped_at"] = time.time()
            self.write()

    def write(self) -> None:
        with self._lock:
            self.data["updated_at"] = time.time()
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            write_atomic(self.path, json.dumps(self.data, indent=1, default=str).encode())


def read_status(checkpoint: str) -> dict | None:
    try:
        with open(status_path(checkpoint)) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def format_status(st: dict) -> str:
    """A human-readable summary of a status dict."""
    alive = _alive(int(st.get("pid", 0))) if st.get("pid") else False
    state = st.get("state", "?")
    started = st.get("started_at", time.time())
    if state in ("running", "starting") and alive:
        ran = f"up {time.time() - started:.0f} s"
    else:
        if state in ("running", "starting"):
            state = "stopped (the process is gone: crashed or killed)"
        end = st.get("stopped_at") or st.get("updated_at") or started
        ran = f"ran {end - started:.0f} s, stopped {time.time() - end:.0f} s ago"
    lines = [f"daemon {st.get('daemon')}  pid {st.get('pid')}  {state}",
             f"master {st.get('master')}  shards {st.get('shard_count', st.get('shards'))}  {ran}",
             (f"batches {st.get('batches')}  rows in {st.get('rows_in_total')}  "
              f"view changes out {st.get('changes_out_total')}")]
    if st.get("ui_url") or st.get("metrics_url"):
        lines.append("  ".join(x for x in (f"Spark UI {st['ui_url']}" if st.get("ui_url") else "",
                                            f"metrics {st['metrics_url']}" if st.get("metrics_url") else "") if x))
    b = st.get("last_batch")
    if b:
        lines.append(f"last batch {b.get('batch_id')}: {b.get('rows_in')} rows in, {b.get('changes_out')} "
                     f"view changes out, LSN {b.get('lsn_text')}, "
                     f"{b.get('seconds_behind')} s behind, {b.get('seconds'):.3f} s "
                     f"({b.get('changes_per_s')} changes/s), "
                     f"{time.time() - b.get('at', time.time()):.0f} s ago")
    p = st.get("progress")
    if p:
        d = p.get("durationMs") or {}
        lines.append(f"Spark: batch {p.get('batchId')} committed, {p.get('numInputRows')} input rows, "
                     f"{d.get('triggerExecution')} ms (addBatch {d.get('addBatch')} ms), "
                     f"{p.get('processedRowsPerSecond')} rows/s")
    if st.get("sinks_committed_batch") is not None or st.get("spark_committed_batch") is not None:
        lines.append(f"committed: sinks hold batch {st.get('sinks_committed_batch')} (ivm_daemon_batches), "
                     f"Spark's commit log batch {st.get('spark_committed_batch')} "
                     f"(sink_commit {st.get('sink_commit', 'pipelined')})")
    for view, r in (st.get("routing") or {}).items():
        lines.append(f"routing of {view}: " + "; ".join(r.get("tables", [])))
    if st.get("shards") and isinstance(st["shards"], list):
        lines.append("shards: " + ", ".join(f"{x['shard']}: {x['routed_rows']} routed, {x['state_rows']} held"
                                            for x in st["shards"]))
    if st.get("error"):
        lines.append(f"error: {st['error']}")
    return "\n".join(lines)
