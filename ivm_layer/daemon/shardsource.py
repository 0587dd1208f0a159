"""``ivm-cdc-shards``: the ``ivm-cdc`` source whose input partitions ARE the shards.

With ``--shards N`` the changes of a batch are routed once, where they are planned (the
reader's process holds the decoded transactions; :class:`.routing.ViewRouter` per view), into
per-shard buffers: the batch is one input partition (task) per shard that has rows, holding
only that shard's rows (pickled once, in the planner: ``payload``), so a task receives
O(its share) bytes and the bytes shipped per batch are O(batch), whatever N. A task is run by
a Python worker that applies its shard's rows to that shard's engines (one per view) and
yields the views' changes: no shuffle, no state store. Each Python worker keeps the engines
it ran in memory (:func:`shard_engine`) between batches; Spark places a shard's task on any
free worker, and a worker whose copy of the shard is behind brings it forward from the
shard's logs (the ``catchup`` seconds of a task).

Durability: every engine writes, per batch it applies, its consolidated delta to
``<checkpoint>/shards/<view>/<shard>/log-<end LSN>`` (atomically, before the batch's output
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
#: (``state``: the rows the shard's engines hold after the batch, ``shipped``: the bytes of the
#: task's partition payload, ``changes_in``: the batch's row changes before routing, on task 0)
OUT_SCHEMA = ("key INT, view STRING, changes BINARY, delta BIGINT, lsn BIGINT, ts DOUBLE, work DOUBLE, "
              "catchup DOUBLE, state BIGINT, shipped BIGINT, changes_in BIGINT")


def shard_spec(defs, types: dict, shards: int, checkpoint: str, snapshot_every: int,
               plans: dict | None = None) -> str:
    """The JSON the source is given (option ``shardSpec``): what it needs to rebuild the routers
    (``plans``: each view's recorded shares, :mod:`.routingplan`; absent: chosen as for
    tables of one row each)."""
    plans = plans or {}
    return json.dumps({"shards": shards, "checkpoint": os.path.abspath(checkpoint),
                       "snapshot_every": snapshot_every, "types": types,
                       "views": [{"name": d.name, "sql": d.select_sql, "materialized": d.materialized,
                                  "tables": list(d.tables), "shares": plans.get(d.name)} for d in defs]})


class ShardSnapshot(InputPartition):
    """The initial snapshot for one shard: every slice of every table, filtered to the shard."""

    def __init__(self, shard: int, end: int, slices: list):
        self.shard, self.end, self.slices = shard, end, slices


class ShardChanges(InputPartition):
    """Shard ``shard``'s part of the change batch ``(start, end]``: ``payload`` = the pickled
    ``{view index: [(lsn, seq, atom table, sign, row)]}`` in stream order (only this shard's
    rows), ``rows`` = the rows routed to it. ``lsn``/``ts``: the batch's last end LSN and
    commit time (epoch seconds); ``changes_in``: the batch's changes before routing (on the
    first task only, so that the tasks' figures add up)."""

    def __init__(self, shard: int, start: int, end: int, payload: bytes, rows: int, lsn: int,
                 ts: float | None, changes_in: int):
        self.shard, self.start, self.end, self.payload, self.rows = shard, start, end, payload, rows
        self.lsn, self.ts, self.changes_in = lsn, ts, changes_in


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
                                        self.spec["types"], self.spec["shards"], shares=v.get("shares"))
                             for v in self.spec["views"]]
        return self._routers

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        s, e = int(start["lsn"]), int(end["lsn"])
        if s < 0:
            slices = super().partitions(start, end)
            return [ShardSnapshot(k, e, slices) for k in range(self.spec["shards"])] if slices else []
        if e <= s:
            return []
        return self.route(s, e, self._ensure_feed(s).take(s, e))

    def route(self, s: int, e: int, txns) -> list[InputPartition]:
        """The batch's transactions routed once into per-shard buffers: one task per shard
        that gets rows, holding only that shard's rows (pickled here, once)."""
        routers = self.routers()
        per: dict[int, dict[int, list]] = {}
        counts: dict[int, int] = {}
        last_lsn, ts, n_in = s, None, 0
        for t in txns:
            last_lsn = max(last_lsn, t.end_lsn)
            ts = t.commit_time.timestamp() if t.commit_time is not None else ts
            ops = [(tb, None, 0) for tb in t.truncated]
            ops += [(tb, row, k) for tb, rows in t.changes.items() for row, k in rows]
            n_in += len(ops)
            for seq, (tb, row, k) in enumerate(ops):
                for vi, r in enumerate(routers):
                    for shard, atab in r.route(tb, row):
                        per.setdefault(shard, {}).setdefault(vi, []).append((t.end_lsn, seq, atab, k, row))
                        counts[shard] = counts.get(shard, 0) + 1
        dumps, proto = pickle.dumps, pickle.HIGHEST_PROTOCOL
        return [ShardChanges(k, s, e, dumps(per[k], proto), counts[k], last_lsn, ts, n_in if i == 0 else 0)
                for i, k in enumerate(sorted(per))]

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
            rows = read_rows = 0
            for sl in partition.slices:
                for row in copy_slice(self.url, sl.snapshot, sl.table, sl.columns, sl.lo, sl.hi):
                    read_rows += 1
                    for vi, r in enumerate(routers):
                        for shard, atab in r.route(sl.table, row):
                            if shard == k:
                                picked.setdefault(vi, []).append((atab, row, 1))
                                rows += 1
            lsn = partition.slices[0].lsn if partition.slices else None
            engines = []
            for vi, r in enumerate(routers):
                eng = shard_engine(self.spec, vi, k, r)
                engines.append(eng)
                outs.append((r.defn.name, eng.load_snapshot(partition.end, consolidate(picked.get(vi, ())))))
            ts, shipped, changes_in = None, 0, (read_rows if k == 0 else 0)
        else:
            k, rows = partition.shard, partition.rows
            lsn, ts = partition.lsn, partition.ts
            shipped, changes_in = len(partition.payload), partition.changes_in
            engines = []
            for vi, items in pickle.loads(partition.payload).items():
                r = routers[vi]
                eng = shard_engine(self.spec, vi, k, r)
                engines.append(eng)
                outs.append((r.defn.name, eng.run(partition.start, partition.end,
                                                  lambda base, items=items: batch_changes(items, base))))
                catchup += eng.catchup_seconds
        state = sum(e.state_rows() for e in engines)
        res: dict[str, list] = {"key": [], "view": [], "changes": [], "delta": [], "lsn": [], "ts": [],
                                "work": [], "catchup": [], "state": [], "shipped": [], "changes_in": []}
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
            res["state"].append(state if change is None else None)
            res["shipped"].append(shipped if change is None else None)
            res["changes_in"].append(changes_in if change is None else None)
        types = [pa.int32(), pa.string(), pa.binary(), pa.int64(), pa.int64(), pa.float64(), pa.float64(),
                 pa.float64(), pa.int64(), pa.int64(), pa.int64()]
        yield pa.RecordBatch.from_arrays([pa.array(res[n], t) for n, t in zip(res, types)], names=list(res))


# -- the shard engines (in the Python workers) ----------------------------------------------
_CACHE: dict[tuple, ShardEngine] = {}   # per Python worker: (checkpoint, view, shard) → engine


def shard_engine(spec: dict, vi: int, shard: int, router) -> ShardEngine:
    """This Python worker's engine of ``(view, shard)`` (created empty: :meth:`ShardEngine.at`
    brings it to a batch's start)."""
    key = (spec["checkpoint"], vi, shard)
    eng = _CACHE.get(key)
    if eng is None:
        directory = os.path.join(spec["checkpoint"], "shards", router.defn.name, str(shard))
        eng = _CACHE[key] = ShardEngine(directory, router, int(spec["snapshot_every"]))
    return eng


class ShardEngine:
    """One view's engine for one shard, its files and the output of the last batch it ran."""

    def __init__(self, directory: str, router, snapshot_every: int):
        self.dir, self.router, self.snapshot_every = directory, router, snapshot_every
        self.state = None
        self.lsn: int | None = None          # the end LSN of the last batch in ``state``
        self.last: tuple | None = None       # (start, end, output) of the last batch run here
        self.catchup_seconds = 0.0           # of the last run: bringing the engine to its start

    def state_rows(self) -> int:
        """The distinct rows the engine holds in its atom tables (O(tables), not O(rows))."""
        if self.state is None:
            return 0
        return sum(len(rows) for rows in self.state.base.values())

    def _fresh(self):
        from .state import EngineState

        return EngineState([self.router.defn], self.router.atom_schema)

    def _files(self, prefix: str) -> list[int]:
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        return sorted(int(n[len(prefix):]) for n in names if n.startswith(prefix) and n[len(prefix):].isdigit())

    def _path(self, prefix: str, lsn: int) -> str:
        return os.path.join(self.dir, f"{prefix}{lsn:020d}")

    def _read(self, prefix: str, lsn: int) -> bytes:
        with open(self._path(prefix, lsn), "rb") as f:
            return f.read()

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
                       "Spark's state store?)") if not os.path.isdir(self.dir) else \
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

        from .state import encode_changes, write_atomic

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
        os.makedirs(self.dir, exist_ok=True)
        write_atomic(self._path("log-", end), encode_changes(changes))
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
        os.makedirs(self.dir, exist_ok=True)
        for prefix in ("snap-", "log-"):
            for x in self._files(prefix):
                os.unlink(self._path(prefix, x))
        self._snapshot(end, prune=False)
        self.lsn, self.last = end, (-1, end, out)
        return out

    def _snapshot(self, lsn: int, prune: bool = True) -> None:
        """``snap-<lsn>``; then drop what only the snapshot before the previous one needed (a
        replayed batch may start before the newest snapshot, never before the previous one)."""
        from .state import write_atomic

        write_atomic(self._path("snap-", lsn), self.state.dump())
        if not prune:
            return
        snaps = self._files("snap-")
        if len(snaps) < 2:
            return
        keep_from = snaps[-2]
        for s in snaps[:-2]:
            os.unlink(self._path("snap-", s))
        for x in self._files("log-"):
            if x <= keep_from:
                os.unlink(self._path("log-", x))


def register(spark) -> None:
    spark.dataSource.register(ShardedCdcDataSource)
