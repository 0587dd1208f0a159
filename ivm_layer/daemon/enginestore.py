"""The daemon engine's checkpoint as whole objects on any filesystem (:mod:`.statefs`): the
single-shard engine's base rows as of a batch, plus one object per applied batch.

Files under ``<checkpoint>/engine/``::

    views.json                  the view definitions the state belongs to
    snap-<N>                    base rows covering every batch id < N (20 digits)
    logs-<N>/log-<B>            the consolidated changes of batch id B ≥ N (20 digits)

The contents are the sessions' checkpoint format (:mod:`ivm_layer.maintain.checkpoint`,
version 3: a header line, then columnar typed-JSON chunks; a log object is one line
``{"lsn": B, "source_lsn": L, "columns": {…}}``; nothing is ever unpickled). Every object is
written once under a new name in one atomic write (:meth:`.statefs.StateFS.write`: a single
PUT on an object store), so there is no append, rename or pointer to update: recovery lists
``engine/``, loads the newest ``snap-N`` and replays ``logs-N/`` in order; older snapshots
and their log directories are deleted only after a snapshot is written (a crash in between
leaves extra objects that are ignored), a directory at a time (one batched request on an
object store rather than one per batch). ``log-B`` is written before batch B's view changes
reach a sink, so a batch is applied exactly once whatever Spark replays. Per batch: one
write of O(changed rows); every ``snapshot_every`` batches one write of O(base rows) plus a
list and the deletes.

A checkpoint of the previous layout (``state.snap`` + appended ``state.log``, local only) is
converted once, exactly (its snapshot and each logged batch become objects), then removed.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Mapping
from typing import Any

from ..maintain import checkpoint as ckpt
from .statefs import StateFS

DIGITS = 20


def _name(prefix: str, n: int) -> str:
    return f"{prefix}{n:0{DIGITS}d}"


def _gen(n: int) -> str:
    return _name("logs-", n)


def _ids(names: Iterable[str], prefix: str) -> list[int]:
    return sorted(int(n[len(prefix):]) for n in names
                  if n.startswith(prefix) and len(n) == len(prefix) + DIGITS and n[len(prefix):].isdigit())


class BatchStore:
    """The engine's checkpoint in ``fs`` (the same interface as
    :class:`~ivm_layer.maintain.checkpoint.CheckpointStore` as the :class:`ViewSet` and
    :class:`.state.EngineState` use it). :attr:`position`: the last batch id written or
    loaded (-1: none); :attr:`source_lsn`: the source's end LSN of that batch (None before
    the first change batch); set :attr:`next_source_lsn` before a batch is appended."""

    def __init__(self, fs: StateFS):
        self.fs = fs
        self.dir = fs.label
        self.position: int | None = None
        self.source_lsn: int | None = None
        self.next_source_lsn: int | None = None
        self.log_entries = 0
        self.log_bytes = 0
        self.snapshot_bytes = 0
        self.snapshot_rows = 0
        self.gen: int | None = None     # the newest snapshot's N: logs go to logs-<N>/

    # -- reading ------------------------------------------------------------------------------
    def names(self) -> list[str]:
        return self.fs.list()

    def has_snapshot(self) -> bool:
        return bool(_ids(self.names(), "snap-"))

    def read_position(self) -> tuple[int, int | None]:
        """``(last batch id, its source LSN)`` without loading rows: the newest snapshot's
        header and the newest log's first bytes (-1, None for a fresh store)."""
        snaps = _ids(self.names(), "snap-")
        if not snaps:
            return -1, None
        pos, lsn = self._snap_header(snaps[-1])
        later = [b for b in _ids(self.fs.list(_gen(snaps[-1])), "log-") if b >= snaps[-1]]
        if later:
            entry = self._log_entry(later[-1], snaps[-1])
            pos, lsn = int(entry["lsn"]), entry.get("source_lsn", lsn)
        return pos, lsn

    def _snap_header(self, n: int) -> tuple[int, int | None]:
        data = self.fs.read_head(_name("snap-", n))
        if data is not None and b"\n" not in data:
            data = self.fs.read(_name("snap-", n))      # a header longer than the ranged read
        if data is None:
            raise ckpt.CheckpointError(f"{self.dir}/{_name('snap-', n)} vanished while being read")
        try:
            header = json.loads(data[:data.index(b"\n")] if b"\n" in data else data)
            return int(header["lsn"]), header.get("source_lsn")
        except (ValueError, KeyError, TypeError) as e:
            raise ckpt.CheckpointError(f"{self.dir}/{_name('snap-', n)} is malformed: {e}") from None

    def _log_entry(self, b: int, gen: int) -> dict:
        data = self.fs.read(f"{_gen(gen)}/{_name('log-', b)}")
        try:
            entry = json.loads(data)
            if int(entry["lsn"]) != b:
                raise ValueError(f"it records batch {entry['lsn']}")
            return entry
        except (ValueError, KeyError, TypeError) as e:
            raise ckpt.CheckpointError(f"{self.dir}/{_name('log-', b)} is malformed: {e}") from None

    def load(self, hold_after: int | None = None) -> ckpt.Checkpoint | None:
        """The newest snapshot with the logs after it replayed (None without a snapshot);
        with ``hold_after``, the batches after that id are returned in ``held`` instead."""
        snaps = _ids(self.names(), "snap-")
        if not snaps:
            return None
        n = snaps[-1]
        logs = _ids(self.fs.list(_gen(n)), "log-")
        data = self.fs.read(_name("snap-", n)) or b""
        lines = data.decode("utf-8").split("\n")
        try:
            header = json.loads(lines[0])
            if not isinstance(header, dict) or header.get("version") not in ckpt.READABLE_VERSIONS:
                raise ckpt.CheckpointError("unknown format")
            names_ = [str(t) for t in header["tables"]]
            tables, rows = ckpt.read_snapshot_lines([x for x in lines[1:] if x], names_)
        except (ValueError, KeyError, TypeError, ckpt.CheckpointError) as e:
            raise ckpt.CheckpointError(f"{self.dir}/{_name('snap-', n)} is malformed: {e}") from None
        self.snapshot_rows, self.snapshot_bytes = rows, len(data)
        pos, src = int(header["lsn"]), header.get("source_lsn")
        held: list = []
        self.log_entries = 0
        for b in (b for b in logs if b >= n):
            if b != pos + 1:
                raise ckpt.CheckpointError(f"{self.dir}: the log of batch {pos + 1} is missing "
                                           f"(next is {b}); the checkpoint is damaged")
            entry = self._log_entry(b, n)
            try:
                changes = {t: ckpt.decode_columns(c) for t, c in entry["columns"].items()}
            except (KeyError, TypeError, AttributeError, ckpt.CheckpointError) as e:
                raise ckpt.CheckpointError(f"{self.dir}/{_name('log-', b)} is malformed: {e}") from None
            if hold_after is not None and b > hold_after:
                held.append((b, changes))
            else:
                for t, items in changes.items():
                    cur = tables.setdefault(t, {})
                    for r, k in items:
                        v = cur.get(r, 0) + k
                        if v:
                            cur[r] = v
                        else:
                            cur.pop(r, None)
            pos, src = b, entry.get("source_lsn", src)
            self.log_entries += 1
        cp = ckpt.Checkpoint(header, tables, pos)
        cp.held = held
        self.position, self.source_lsn, self.gen = pos, src, n
        return cp

    # -- writing ------------------------------------------------------------------------------
    def append(self, batch_id: int, changes: Mapping[str, Any]) -> None:
        """Write batch ``batch_id``'s consolidated changes ``{table: [(row, Δk)] or {row: Δk}}``
        (durable when this returns). O(changed rows)."""
        items = {t: list(rows.items() if isinstance(rows, Mapping) else rows) for t, rows in changes.items()}
        src = self.next_source_lsn if self.next_source_lsn is not None else self.source_lsn
        entry = {"lsn": batch_id, "source_lsn": src,
                 "columns": {t: ckpt.encode_columns(rows) for t, rows in items.items() if rows}}
        data = json.dumps(entry).encode()
        if self.gen is None:
            snaps = _ids(self.names(), "snap-")
            self.gen = snaps[-1] if snaps else 0
        self.fs.write(f"{_gen(self.gen)}/{_name('log-', batch_id)}", data)
        self.log_bytes += len(data)
        self.log_entries += 1
        self.position, self.source_lsn, self.next_source_lsn = batch_id, src, None

    def sync_log(self) -> int:
        return 0       # every append is durable when it returns

    def write_snapshot(self, meta: dict, tables: Mapping[str, Any], batch_id: int,
                       columnar: bool | None = None) -> None:
        """The base rows as of ``batch_id`` as ``snap-<batch_id + 1>``; then the older
        snapshots and the logs it covers are deleted."""
        tables = {t: rows.items() if isinstance(rows, Mapping) else rows for t, rows in tables.items()}
        names = sorted(tables)
        header = dict(meta, version=ckpt.COLUMNAR_VERSION, snapshot=secrets.token_hex(8), lsn=batch_id,
                      source_lsn=self.source_lsn, tables=names)
        parts = [json.dumps(header) + "\n"]
        n = 0
        for line, rows in ckpt.snapshot_lines(names, tables, columnar=True):
            parts.append(line)
            n += rows
        data = "".join(parts).encode()
        cover = batch_id + 1
        self.fs.write(_name("snap-", cover), data)
        self.snapshot_bytes, self.snapshot_rows = len(data), n
        for s in _ids(self.names(), "snap-"):
            if s < cover:
                self.fs.delete(_name("snap-", s))
                self.fs.delete_dir(_gen(s))
        self.position, self.log_entries, self.gen = batch_id, 0, cover

    def close(self) -> None:
        pass

    # -- the previous layout ------------------------------------------------------------------
    def convert_legacy(self, legacy_dir: str) -> bool:
        """Turn a local ``state.snap``/``state.log`` checkpoint (the previous layout) into
        objects, exactly; True if there was one."""
        import os
        from pathlib import Path

        if not os.path.exists(os.path.join(legacy_dir, "state.snap")):
            return False
        old = ckpt.CheckpointStore(Path(legacy_dir), "state", columnar=True)
        with open(os.path.join(legacy_dir, "state.snap"), encoding="utf-8") as f:
            header = json.loads(f.readline())
        cp = old.load(hold_after=int(header["lsn"]))
        old.close()
        self.source_lsn = None
        self.write_snapshot({"batch": int(header["lsn"])}, cp.tables, int(header["lsn"]))
        for b, changes in cp.held:
            self.append(b, changes)
        for p in (old.snap_path, old.log_path):
            p.unlink(missing_ok=True)
        return True
