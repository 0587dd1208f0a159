"""``--shards N`` on Spark: the writer of a sharded daemon and the merge of its shards' outputs
(how changes are routed to shards: :mod:`.routing`).

On Spark (:mod:`.shardsource`), the changes are routed where the source plans a batch, into
one input partition per shard; the Python worker reading a partition applies it to the
shard's engines, which it keeps in memory between batches (state logged per batch to the
checkpoint directory, so any worker can take a shard over): no shuffle, no state store.
:class:`ShardSinkWriter` merges the shards' outputs per view and writes the sinks.
"""

from __future__ import annotations

import math
import pickle

from .routing import ViewRouter
from .state import ViewDef


def merge_changes(parts: list[list[tuple[tuple, int]]], disjoint: bool = False) -> list[tuple[tuple, int]]:
    """One view's change from its shards' changes (each already consolidated; a row may come
    from several shards when the view projects the columns that tell them apart, unless
    ``disjoint``)."""
    if len(parts) == 1:
        return parts[0]
    if disjoint:
        return [x for part in parts for x in part]
    d = dict(parts[0])
    for part in parts[1:]:
        for row, k in part:
            n = d.get(row, 0) + k
            if n:
                d[row] = n
            else:
                del d[row]
    return list(d.items())


class ShardSinkWriter:
    """``foreachBatch`` over the shards' output: consolidate per view, write the sinks."""

    def __init__(self, sinks, status, view_names: list[str], disjoint: set[str] | None = None,
                 checkpoint: str | None = None):
        self.sinks, self.status, self.views = sinks, status, view_names
        self.checkpoint = checkpoint   # where the sinks' commit marker goes (:mod:`.commitmark`)
        self.disjoint = disjoint or set()   # views whose shards' changes never share a row
        self.spark = None   # the daemon's session (its streams hold the query's progress)

    def __call__(self, df, batch_id: int) -> None:
        import time

        from ..io.postgres.snapshot import lsn_text

        t0 = time.monotonic()
        prev = previous_progress(self.spark or df.sparkSession)
        frame = df.toArrow().to_pydict()
        t_spark = time.monotonic()
        parts: dict[str, list] = {v: [] for v in self.views}
        rows_in, lsn, ts = 0, None, None
        work, catchup = [0.0], [0.0]
        changes_in, shipped, per_shard = 0, 0, {}
        for key, view, raw, delta, l_, t_, w_, c_, st_, sh_, ci_ in zip(
                frame["key"], frame["view"], frame["changes"], frame["delta"], frame["lsn"], frame["ts"],
                frame["work"], frame["catchup"], frame["state"], frame["shipped"], frame["changes_in"]):
            if view is None:
                rows_in += delta
                changes_in += ci_ or 0
                shipped += sh_ or 0
                per_shard[key] = {"routed_rows": delta, "state_rows": st_, "shipped_bytes": sh_ or 0}
                work.append(w_ or 0.0)
                catchup.append(c_ or 0.0)
                if l_ is not None:
                    lsn = l_ if lsn is None else max(lsn, l_)
                if t_ is not None and not math.isnan(t_):
                    ts = t_ if ts is None else max(ts, t_)
            else:
                parts[view].append(pickle.loads(raw))
        changes = {v: merge_changes(p, v in self.disjoint) for v, p in parts.items() if p}
        changes = {v: c for v, c in changes.items() if c}
        t_merge = time.monotonic()
        for s in self.sinks:
            s.write(batch_id, changes)
        if self.checkpoint is not None and lsn is not None:
            from .commitmark import write_marker

            write_marker(self.checkpoint, batch_id, lsn)   # before Spark commits the batch
        n_out = sum(len(c) for c in changes.values())
        t_end = time.monotonic()
        secs = t_end - t0
        # the Spark jobs (read, route, shards) run inside toArrow; then the merge, the sinks
        split = {"spark": round(t_spark - t0, 3), "merge": round(t_merge - t_spark, 3),
                 "sinks": round(t_end - t_merge, 3),
                 # inside "spark": the longest shard task, the engines' catching up in all tasks
                 "longest_task": round(max(work), 3), "catch_up": round(sum(catchup), 3)}
        behind = round(max(0.0, time.time() - ts), 3) if ts else 0.0
        import logging

        logging.getLogger("ivm.daemon").warning(
            "batch %d: %d routed rows in, %d view changes out, LSN %s, %.3f s behind, %.3f s, "
            "%s changes/s (%s)", batch_id, rows_in, n_out, lsn_text(lsn) if lsn is not None else None,
            behind, secs, round(rows_in / secs) if secs > 0 else None,
            ", ".join(f"{k} {v:.3f} s" for k, v in split.items()))
        if prev:
            logging.getLogger("ivm.daemon").warning("batch %d: the previous batch in Spark: %s", batch_id, prev)
        if self.status is not None:
            self.status.shard_batch(per_shard)
            self.status.batch(batch_id=batch_id, rows_in=rows_in, changes_in=changes_in,
                              shipped_bytes=shipped, changes_out=n_out, lsn=lsn,
                              lsn_text=lsn_text(lsn) if lsn is not None else None,
                              seconds_behind=behind, seconds=secs, split=split,
                              changes_per_s=round(rows_in / secs) if secs > 0 else None)


def previous_progress(spark) -> str | None:
    """The previous micro-batch's ``durationMs`` and state-operator timings (for the log)."""
    try:
        for q in spark.streams.active:
            p = q.lastProgress
            if p:
                ops = [{k: o.get(k) for k in ("numRowsTotal", "commitTimeMs", "allUpdatesTimeMs",
                                                "allRemovalsTimeMs") if k in o} for o in p.get("stateOperators", [])]
                return f"durationMs {p.get('durationMs')} state {ops}"
    except Exception:  # noqa: BLE001 - only diagnostics
        return None
    return None


def sharded_writer(spark, reader, cfg, defs: list[ViewDef], pg_schema: dict, sinks, status):
    """The streaming writer for ``--shards N``: ``reader`` (the ``ivm-cdc`` reader with its
    options) read as ``ivm-cdc-shards`` (partitions = shards, engines in the Python workers,
    :mod:`.shardsource`) → sinks."""
    from .routingplan import load_or_choose, table_sizes
    from .shardsource import register, shard_spec
    from .sinks import view_layout
    from .state import compile_defs

    types = {t: {c: ty for c, ty, _ in cols} for t, cols in pg_schema.items()}
    # refuse what cannot be split before anything starts; the routing plan: the checkpoint's,
    # or chosen now from the tables' sizes and recorded
    for d in defs:
        ViewRouter(d, types, cfg.shards)
    plans, plan = load_or_choose(cfg.checkpoint, defs, types, cfg.shards,
                                 sizes=lambda: table_sizes(cfg.source, list(pg_schema)))
    routers = {d.name: ViewRouter(d, types, cfg.shards, shares=plans[d.name]) for d in defs}
    disjoint = {n for n, r in routers.items() if r.disjoint}
    if status is not None:
        status.set(routing={n: {"shares": r.shares, "tables": r.scheme} for n, r in routers.items()},
                   routing_table_rows=plan.get("table_rows"))
        status.init_shards(cfg.shards)
    import logging

    for n, r in routers.items():
        logging.getLogger("ivm.daemon").warning("view %s over %d shards: %s", n, cfg.shards, "; ".join(r.scheme))
    # the sinks' layouts come from the unrewritten views (same columns, same types)
    views = compile_defs(defs, types)
    layouts = {d.name: view_layout(views[d.name], pg_schema, d.types, d.columns) for d in defs}
    from .commitmark import marker_path, read_marker

    # no batch ever reached the sinks from this checkpoint: earlier output (of a discarded
    # checkpoint at the same path) is emptied; a batch the sinks hold is not replayed
    fresh = read_marker(marker_path(cfg.checkpoint)) is None
    for s in sinks:
        s.prepare(layouts, fresh=fresh)
    register(spark)
    df = (reader.format("ivm-cdc-shards")
          .option("shardSpec", shard_spec(defs, types, cfg.shards, cfg.checkpoint, cfg.snapshot_every, plans))
          .load())
    writer = ShardSinkWriter(sinks, status, [d.name for d in defs], disjoint, cfg.checkpoint)
    writer.spark = spark
    return df.writeStream.foreachBatch(writer)
