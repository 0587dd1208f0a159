"""``ivm-cdc-shards``: the ``ivm-cdc`` source whose input partitions ARE the shards.

With ``--shards N`` the changes of a batch are routed where they are planned (the reader's
process holds the decoded transactions; :class:`.routing.ViewRouter` per view), into one input
partition (task) per shard that has rows in the batch. A task is run by a Python worker that
applies one shard's rows to that shard's engines (one per view) and yields the views'
changes: no shuffle, no state store, no per-batch re-serialization of a shard. Each Python
worker keeps the engines it ran in memory (:func:`shard_engine`) between batches, and a task
claims the shard its worker holds (:func:`claim_shard`; Spark places tasks on any free
worker), so shards stay where they are.

Durability: every engine writes, per batch it applies, its consolidated delta to
``<checkpoint>/shards/<view>/<shard>/log-<end LSN>`` (:mod:`.statefs`: any filesystem; one
atomic write, a single PUT on an object store, before the batch's output
leaves the task) and every ``snapshot_every`` logs a snapshot ``snap-<LSN>``
(:meth:`.state.EngineState.dump`, typed JSON, no pickle). Batches are identified by Spark's
offsets ``(start LSN, end LSN]`` (recorded by Spark before a batch runs, so a replayed batch
has the same range and reads the same transactions). A worker brings its engine to the
batch's start: if its cached engine is at or before it, by applying the logs it missed (a
shard's batches may run on different workers); otherwise (no cache, a lost worker, a
restarted daemon) from the newest snapshot at or before the start plus the logs after it.
A batch a worker already applied (the batch is read again) yields the output it kept. The
checkpoint directory must be one path all executors see (as Spark's own checkpoint).
"""

from __future__ import annotations

import json
import os
import pickle
from collections.abc import Iterator

from pyspark.sql.datasource import InputPartition

from .source import CdcDataSource, CdcStreamReader

NAME = "ivm-cdc-shards"
#: per shard and batch: one row per view with its change (pickled as one list; ``delta`` = its
#: length) and one bookkeeping row (``view`` NULL, ``delta`` = the rows routed to the shard)
#: (its ``work``: seconds in the task, ``catchup``: of which bringing engines to the batch's start)
OUT_SCHEMA = ("key INT, view STRING, changes BINARY, delta BIGINT, lsn BIGINT, ts DOUBLE, work DOUBLE, "
              "catchup DOUBLE")


def shard_spec(defs, types: dict, shards: int, checkpoint: str, snapshot_every: int) -> str:
    """The JSON the source is given (option ``shardSpec``): what it needs to rebuild the routers."""
    from .statefs import is_url

    return json.dumps({"shards": shards, "checkpoint": checkpoint if is_url(checkpoint) else os.path.abspath(checkpoint),
                       "snapshot_every": snapshot_every, "types": types,
                       "views": [{"name": d.name, "sql": d.select_sql, "materialized": d.materialized,
                                  "tables": list(d.tables)} for d in defs]})


class ShardSnapshot(InputPartition):
    """The initial snapshot for one shard: every slice of every table, filtered to the shard."""

    def __init__(self, shard: int, end: int, slices: list):
        self.shard, self.end, self.slices = shard, end, slices


class ShardChanges(InputPartition):
    """Task ``index`` of a change batch planned as ``nonce``: ``parts[shard] = (items, rows)``
    for every shard with rows (``items[view] = [(lsn, seq, atom table, sign, row)]`` in stream
    order, ``rows`` = routed rows); the task applies the shard it claims (:func:`claim_shard`),
    so a worker keeps the shards it holds. ``lsn``/``ts``: the batch's last end LSN and
    commit time (epoch seconds)."""

    def __init__(self, index: int, nonce: str, start: int, end: int, parts: dict, lsn: int, ts: float | None):
        self.index, self.nonce, self.start, self.end, self.parts = index, nonce, start, end, parts
        self.lsn, self.ts = lsn, ts


class ShardedCdcDataSource(CdcDataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return OUT_SCHEMA

    def streamReader(self, schema) -> ShardedCdcStreamReader:
        return ShardedCdcStreamReader(dict(self.options))


class ShardedCdcStreamReader(CdcStreamReader):
    def __init__(self, options: dict):
        super().__init__(options)
        low = {k.lower(): v for k, v in options.items()}
        self.spec = json.loads(low["shardspec"])
        self._routers = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_routers"] = None   # compiled views: rebuilt where the reader is used
        return state

    def routers(self):
        if self._routers is None:
            from .routing import ViewRouter
            from .state import ViewDef

            self._routers = [ViewRouter(ViewDef(v["name"], v["sql"], v["materialized"], v["tables"]),
                                        self.spec["types"], self.spec["shards"]) for v in self.spec["views"]]
        return self._routers

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        s, e = int(start["lsn"]), int(end["lsn"])
        if s < 0:
            slices = super().partitions(start, end)
            return [ShardSnapshot(k, e, slices) for k in range(self.spec["shards"])] if slices else []
        if e <= s:
            return []
        from .statefs import StateFS

        # the claims of the batches before (all done: Spark plans a batch after the last one)
        fs = StateFS(self.spec["checkpoint"])
        if fs.local:
            fs.delete_dir("shards/claims")
        return self.route(s, e, self._ensure_feed(s).take(s, e))

    def route(self, s: int, e: int, txns) -> list[InputPartition]:
        """The batch's transactions as one task per shard that gets rows (each task carries
        every shard's rows and claims one shard when it runs)."""
        import uuid

        routers = self.routers()
        per: dict[int, dict[int, list]] = {}
        counts: dict[int, int] = {}
        last_lsn, ts = s, None
        for t in txns:
            last_lsn = max(last_lsn, t.end_lsn)
            ts = t.commit_time.timestamp() if t.commit_time is not None else ts
            ops = [(tb, None, 0) for tb in t.truncated]
            ops += [(tb, row, k) for tb, rows in t.changes.items() for row, k in rows]
            for seq, (tb, row, k) in enumerate(ops):
                for vi, r in enumerate(routers):
                    for shard, atab in r.route(tb, row):
                        per.setdefault(shard, {}).setdefault(vi, []).append((t.end_lsn, seq, atab, k, row))
                        counts[shard] = counts.get(shard, 0) + 1
        parts = {k: (per[k], counts[k]) for k in sorted(per)}
        nonce = uuid.uuid4().hex
        return [ShardChanges(i, nonce, s, e, parts, last_lsn, ts) for i in range(len(parts))]

    def read(self, partition: InputPartition) -> Iterator:
        import time

        import pyarrow as pa

        from .state import batch_changes, consolidate

        t_task = time.monotonic()
        catchup = 0.0
        routers = self.routers()
        k = getattr(partition, "shard", None)
        outs: list[tuple[str, list]] = []
        if isinstance(partition, ShardSnapshot):
            from ..io.postgres.snapshot import copy_slice

            picked: dict[int, list] = {}
            rows = 0
            for sl in partition.slices:
                for row in copy_slice(self.url, sl.snapshot, sl.table, sl.columns, sl.lo, sl.hi):
                    for vi, r in enumerate(routers):
                        for shard, atab in r.route(sl.table, row):
                            if shard == k:
                                picked.setdefault(vi, []).append((atab, row, 1))
                                rows += 1
            lsn = partition.slices[0].lsn if partition.slices else None
            for vi, r in enumerate(routers):
                eng = shard_engine(self.spec, vi, k, r)
                outs.append((r.defn.name, eng.load_snapshot(partition.end, consolidate(picked.get(vi, ())))))
            ts = None
        else:
            k = claim_shard(partition, self.spec)
            items_by_view, rows = partition.parts[k]
            lsn, ts = partition.lsn, partition.ts
            for vi, items in items_by_view.items():
                r = routers[vi]
                eng = shard_engine(self.spec, vi, k, r)
                outs.append((r.defn.name, eng.run(partition.start, partition.end,
                                                  lambda base, items=items: batch_changes(items, base))))
                catchup += eng.catchup_seconds
        res: dict[str, list] = {"key": [], "view": [], "changes": [], "delta": [], "lsn": [], "ts": [],
                                "work": [], "catchup": []}
        for view, change in [*outs, (None, None)]:
            if view is not None and not change:
                continue
            res["key"].append(k)
            res["view"].append(view)
            res["changes"].append(None if change is None else
                                  pickle.dumps(list(change), protocol=pickle.HIGHEST_PROTOCOL))
            res["delta"].append(rows if change is None else len(change))
            res["lsn"].append(lsn)
            res["ts"].append(ts)
            res["work"].append(time.monotonic() - t_task if change is None else None)
            res["catchup"].append(catchup if change is None else None)
        types = [pa.int32(), pa.string(), pa.binary(), pa.int64(), pa.int64(), pa.float64(), pa.float64(),
                 pa.float64()]
        yield pa.RecordBatch.from_arrays([pa.array(res[n], t) for n, t in zip(res, types)], names=list(res))


def claim_shard(p: ShardChanges, spec: dict) -> int:
    """The shard task ``p.index`` applies: the one an earlier attempt of the task claimed, else
    the first free one of: shards this worker holds at the batch's start, shards it holds
    older, the others (from the task's own index on). A claim is a file
    ``shards/claims/<nonce>-<shard>`` holding the task index, created exclusively
    (``O_EXCL``: no hard link). Where the checkpoint has no exclusive create (an object
    store), task ``i`` applies the ``i``-th shard with rows: as exact (a worker brings any
    engine to the batch's start from the shard's files), without the locality."""
    from .statefs import StateFS

    shards = sorted(p.parts)
    if len(shards) == 1:
        return shards[0]
    fs = StateFS(spec["checkpoint"])
    if not fs.local:
        return shards[p.index % len(shards)]
    directory = "shards/claims"
    prefix = f"{p.nonce}-"
    for name in fs.list(directory):
        if name.startswith(prefix) and name[len(prefix):].isdigit() and \
                fs.read(f"{directory}/{name}") == str(p.index).encode():
            return int(name[len(prefix):])

    def held(k: int) -> int:
        engines = [_CACHE.get((spec["checkpoint"], vi, k)) for vi in p.parts[k][0]]
        if engines and all(e is not None and e.state is not None and e.lsn == p.start for e in engines):
            return 0
        return 1 if any(e is not None and e.state is not None for e in engines) else 2

    order = sorted(shards, key=lambda k: (held(k), (shards.index(k) - p.index) % len(shards)))
    for k in order:
        if fs.create(f"{directory}/{prefix}{k}", str(p.index).encode()):
            return k
    from ..errors import IVMError

    raise IVMError(f"task {p.index} of the batch ending at LSN {p.end:X} found every shard claimed")


def discard_after(checkpoint: str, views: list[str], shards: int, lsn: int) -> None:
    """Drop the shards' logs and snapshots of batches ending after ``lsn`` (batches no sink
    holds, before Spark's checkpoint is rebuilt from ``lsn``: :mod:`.epoch`)."""
    from .statefs import StateFS

    fs = StateFS(checkpoint)
    for view in views:
        for k in range(shards):
            d = f"shards/{view}/{k}"
            for name in fs.list(d):
                for prefix in ("snap-", "log-"):
                    if name.startswith(prefix) and name[len(prefix):].isdigit() and int(name[len(prefix):]) > lsn:
                        fs.delete(f"{d}/{name}")


# -- the shard engines (in the Python workers) ----------------------------------------------
_CACHE: dict[tuple, ShardEngine] = {}   # per Python worker: (checkpoint, view, shard) → engine


def shard_engine(spec: dict, vi: int, shard: int, router) -> ShardEngine:
    """This Python worker's engine of ``(view, shard)`` (created empty: :meth:`ShardEngine.at`
    brings it to a batch's start)."""
    key = (spec["checkpoint"], vi, shard)
    eng = _CACHE.get(key)
    if eng is None:
        from .statefs import StateFS

        fs = StateFS(spec["checkpoint"]).sub(f"shards/{router.defn.name}/{shard}")
        eng = _CACHE[key] = ShardEngine(fs, router, int(spec["snapshot_every"]))
    return eng


class ShardEngine:
    """One view's engine for one shard, its files and the output of the last batch it ran."""

    def __init__(self, fs, router, snapshot_every: int):
        self.fs, self.router, self.snapshot_every = fs, router, snapshot_every
        self.dir = fs.label
        self.state = None
        self.lsn: int | None = None          # the end LSN of the last batch in ``state``
        self.last: tuple | None = None       # (start, end, output) of the last batch run here
        self.catchup_seconds = 0.0           # of the last run: bringing the engine to its start

    def _fresh(self):
        from .state import EngineState

        return EngineState([self.router.defn], self.router.atom_schema)

    def _files(self, prefix: str) -> list[int]:
        return sorted(int(n[len(prefix):]) for n in self.fs.list() if n.startswith(prefix) and n[len(prefix):].isdigit())

    def _path(self, prefix: str, lsn: int) -> str:
        return f"{prefix}{lsn:020d}"

    def _read(self, prefix: str, lsn: int) -> bytes:
        data = self.fs.read(self._path(prefix, lsn))
        if data is None:
            from ..errors import IVMError

            raise IVMError(f"the shard state {self.dir}/{self._path(prefix, lsn)} vanished while being read")
        return data

    def at(self, lsn: int) -> None:
        """Bring the engine to the state after the batch ending at ``lsn``."""
        from .state import decode_changes

        snaps = self._files("snap-")
        # a cached engine older than the oldest snapshot kept may miss pruned logs
        if self.state is None or self.lsn is None or self.lsn > lsn or not snaps or self.lsn < snaps[0]:
            snaps = [s for s in snaps if s <= lsn]
            if not snaps:
                from ..errors import IVMError

                why = ("is missing (a checkpoint of an older version, whose shards kept their state in "
                       "Spark's state store?)") if not self.fs.exists() else \
                    f"has no snapshot at or before LSN {lsn:X} (the checkpoint is damaged)"
                raise IVMError(f"the shard state {self.dir} {why}: start with a new --checkpoint")
            self.state = self._fresh()
            self.state.load(self._read("snap-", snaps[-1]))
            self.lsn = snaps[-1]
        for end in self._files("log-"):
            if self.lsn < end <= lsn:
                self.state.apply(decode_changes(self._read("log-", end)))
                self.lsn = end

    def run(self, start: int, end: int, make_changes) -> list:
        """Apply the batch ``(start, end]`` (its changes: ``make_changes(base rows)``), log it,
        snapshot now and then; the view's change."""
        import time

        from .state import encode_changes

        self.catchup_seconds = 0.0
        if self.lsn == end and self.last is not None and self.last[:2] == (start, end):
            return self.last[2]   # the same batch read again
        t0 = time.monotonic()
        self.at(start)
        self.catchup_seconds = time.monotonic() - t0
        changes = make_changes(self.state.base)
        self.last = None
        try:
            out = self.state.apply(changes).get(self.router.defn.name, [])
        except BaseException:
            self.state = None    # rebuilt from the files by the next batch
            raise
        self.fs.write(self._path("log-", end), encode_changes(changes))
        self.lsn = end
        self.last = (start, end, out)
        snaps = self._files("snap-")
        if sum(1 for x in self._files("log-") if x > snaps[-1]) >= self.snapshot_every:
            self._snapshot(end)
        return out

    def load_snapshot(self, end: int, changes: dict) -> list:
        """The initial snapshot batch: a fresh engine with the shard's rows, written as ``snap-<end>``
        (earlier files of the directory are from a discarded attempt)."""
        if self.lsn == end and self.last is not None and self.last[:2] == (-1, end):
            return self.last[2]
        self.state = self._fresh()
        out = self.state.apply(changes).get(self.router.defn.name, []) if changes else []
        for prefix in ("snap-", "log-"):
            for x in self._files(prefix):
                self.fs.delete(self._path(prefix, x))
        self._snapshot(end, prune=False)
        self.lsn, self.last = end, (-1, end, out)
        return out

    def _snapshot(self, lsn: int, prune: bool = True) -> None:
        """``snap-<lsn>``; then drop what only the snapshot before the previous one needed (a
        replayed batch may start before the newest snapshot, never before the previous one)."""
        self.fs.write(self._path("snap-", lsn), self.state.dump())
        if not prune:
            return
        snaps = self._files("snap-")
        if len(snaps) < 2:
            return
        keep_from = snaps[-2]
        for s in snaps[:-2]:
            self.fs.delete(self._path("snap-", s))
        for x in self._files("log-"):
            if x <= keep_from:
                self.fs.delete(self._path("log-", x))


def register(spark) -> None:
    spark.dataSource.register(ShardedCdcDataSource)
