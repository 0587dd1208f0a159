"""The streaming query of ``ivm daemon``: ``ivm-cdc`` → engine → sinks.

With one shard the engine lives in the driver (:class:`DriverEngine`, the ``foreachBatch``
function). Per batch it (1) skips a batch id at or below the last applied one, (2) turns the
batch's rows into one consolidated delta per table (TRUNCATE empties the table as of its
place in the stream), (3) applies it to every view, (4) appends the delta to the
checkpoint's log — from then on the batch counts as applied — and (5) writes the view changes
to the sinks (idempotent per batch id). With ``sink_commit = "pipelined"`` (the default) they
are written on a background thread while the next batch is read and applied
(:mod:`.sinkwriter`), and Spark's commit log runs up to one batch ahead of the sinks
(``ivm_daemon_batches`` and ``sinks_committed_batch`` in ``--status`` are the truth); with
``"spark"`` the function returns only once the sinks hold the batch, so what Spark then
records in its commit log is in the sinks. Once the sinks hold a batch, the commit marker (:mod:`.commitmark`) and the status
file are rewritten and the batch logged. A crash before (4) replays the batch: the engine is
rebuilt from the checkpoint. A crash after it: at start-up the logged batches a sink does not
hold yet are applied one at a time and written to the sinks again. With ``--shards N`` the
engines run inside Spark (:mod:`.shards`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import time

from ..errors import IVMError
from .commitmark import marker_path
from .config import DaemonConfig
from .sinks import Sink, open_sink, view_layout
from .sinkwriter import SinkWriter
from .state import (
    EngineState,
    ViewDef,
    batch_changes,
    last_batch_in,
    open_checkpoint,
    parse_views,
)
from .status import StatusFile

log = logging.getLogger("ivm.daemon")


def _lap(split: dict[str, float], name: str, t: float) -> float:
    now = time.monotonic()
    split[name] = round(now - t, 3)
    return now


def decode_frame(table) -> list[tuple]:
    """A pyarrow table of source rows → ``(lsn, seq, tbl, sign, row)`` tuples in stream order."""
    import pickle

    cols = table.to_pydict()
    loads = pickle.loads
    rows = [(lsn, seq, t, s, None if r is None else loads(r))
            for lsn, seq, t, s, r in zip(cols["lsn"], cols["seq"], cols["tbl"], cols["sign"], cols["row"])]
    rows.sort(key=lambda x: (x[0], x[1]))
    return rows


class DriverEngine:
    """The ``foreachBatch`` function of the single-machine daemon."""

    def __init__(self, cfg: DaemonConfig, defs: list[ViewDef], pg_schema: dict, sinks: list[Sink],
                 status: StatusFile | None = None):
        self.cfg = cfg
        types = {t: {c: ty for c, ty, _ in cols} for t, cols in pg_schema.items()}
        self.state = EngineState(defs, types)
        self.store = open_checkpoint(os.path.join(cfg.checkpoint, "engine"), defs)
        self.sinks = sinks
        self.writer = SinkWriter(sinks)
        layouts = {d.name: view_layout(self.state.views[d.name], pg_schema, d.types, d.columns) for d in defs}
        for s in sinks:
            s.prepare(layouts, fresh=self.store.position < 0)
        t0 = time.monotonic()
        # the logged batches a sink lacks (the daemon stopped while they were being written)
        # are applied one at a time and written again
        marks = [m for m in (s.committed() for s in sinks) if m is not None]
        self.last, held = self.state.recover(self.store, hold_after=min(marks) if marks else None)
        for batch_id, changes in held:
            self.writer.write(batch_id, self.state.apply(changes))
            log.warning("batch %d: written to the sinks again (the daemon stopped before they "
                        "held it)", batch_id)
        self.recovery_seconds = time.monotonic() - t0
        self.status = status
        if status is not None:
            status.init_shards(1)
        self.failed: BaseException | None = None

    def __call__(self, df, batch_id: int) -> None:
        if self.failed is not None:
            raise IVMError(f"the engine failed earlier ({self.failed}); restart the daemon")
        t0 = time.monotonic()
        if batch_id <= self.last:
            log.info("batch %d: already applied (replay), skipped", batch_id)
            return
        split: dict[str, float] = {}
        t = time.monotonic()
        # reading the batch runs Spark jobs (Python workers may fail to start: the query is
        # started again) and touches nothing: only a failure from here on stops the engine
        frame = df.select("lsn", "seq", "tbl", "sign", "row",
                          df["ts"].cast("double").alias("ts")).toArrow()
        ts = [t for t in frame.column("ts").to_pylist() if t is not None]
        rows = decode_frame(frame)
        shipped = frame.nbytes   # the batch's Arrow rows: shipped to a task as IPC, and back
        changes = batch_changes(rows, self.state.base)
        t = _lap(split, "read", t)
        try:
            out = self.state.apply(changes)
            t = _lap(split, "engine", t)
            self.state.log(batch_id, changes)
            self.last = batch_id
            t = _lap(split, "checkpoint", t)
            fields = self._fields(batch_id, rows, out, ts)
            fields["shipped_bytes"] = shipped
            if self.cfg.sink_commit == "spark" or self.store.log_entries >= self.cfg.snapshot_every:
                # the sinks hold the batch before Spark commits it; a snapshot replaces the log:
                # the sinks must hold every batch in it first
                prepared = self.writer.prepare(out)
                t = _lap(split, "prepare", t)
                split["sinks"] = round(self.writer.write(batch_id, out, prepared), 3)
                if self.store.log_entries >= self.cfg.snapshot_every:
                    self.state.snapshot(batch_id)
                self._committed(fields)
                self._report(fields, time.monotonic() - t0, time.monotonic() - t0, split)
            else:
                # keys and encoding while the previous batch's sinks still write, then wait
                prepared = self.writer.prepare(out)
                t = _lap(split, "prepare", t)
                split["wait"] = round(self.writer.wait(), 3)
                cycle = time.monotonic() - t0

                def done(seconds: float) -> None:
                    self._committed(fields)
                    self._report(fields, time.monotonic() - t0, cycle, dict(split, sinks=round(seconds, 3)))

                self.writer.submit(batch_id, out, done, self._fail, prepared)
        except BaseException as e:
            self._fail(e)
            raise

    def _committed(self, fields: dict) -> None:
        """The sinks hold the batch: the commit marker (the slot may be confirmed up to it)."""
        if fields["lsn"] is not None:
            from .commitmark import write_marker

            write_marker(self.cfg.checkpoint, fields["batch_id"], fields["lsn"])

    def _fail(self, e: BaseException) -> None:
        """The engine or a sink failed: no further batch is applied (the daemon's loop stops
        the query; a restart resumes exactly from the checkpoint)."""
        if self.failed is None:
            self.failed = e
            log.error("the daemon stops: %s", e)
        if self.status is not None:
            self.status.set(state="failed", error=str(e))

    def flush(self) -> None:
        """Wait until the sinks hold every applied batch (raises a sink's failure that was
        not reported yet)."""
        try:
            self.writer.wait()
        except BaseException as e:
            if e is not self.failed:
                raise

    def _fields(self, batch_id: int, rows: list, out: dict, ts: list) -> dict:
        from ..io.postgres.snapshot import lsn_text

        lsn = max((r[0] for r in rows), default=None)
        behind = round(max(0.0, time.time() - max(ts)), 3) if ts else 0.0
        return {"batch_id": batch_id, "rows_in": len(rows), "changes_out": sum(len(c) for c in out.values()),
                "lsn": lsn, "lsn_text": lsn_text(lsn) if lsn is not None else None,
                "seconds_behind": behind,
                "view_rows": {name: len(v) for name, v in self.state.views.items()},
                "state_rows": sum(len(r) for r in self.state.base.values()),
                "rebuilds": {n: k for n, k in self.state.rebuilds.items() if k}}

    def _report(self, fields: dict, seconds: float, cycle: float, split: dict[str, float]) -> None:
        """Log and record one batch once its sinks hold it. ``seconds``: from its start until
        then; ``cycle``: its time in the query (read, engine, checkpoint, waiting for the
        previous batch's sinks), which sets the throughput: its own sinks run alongside the
        next batch."""
        fields = dict(fields, seconds=round(seconds, 3), query_seconds=round(cycle, 3), split=split)
        fields["changes_per_s"] = round(fields["rows_in"] / cycle) if cycle > 0 else None
        log.warning("batch %d: %d rows in, %d view changes out, LSN %s, %.3f s behind, in the sinks "
                    "after %.3f s, %.3f s in the query, %s changes/s (%s)", fields["batch_id"],
                    fields["rows_in"], fields["changes_out"], fields["lsn_text"], fields["seconds_behind"],
                    seconds, cycle, fields["changes_per_s"],
                    ", ".join(f"{k} {v:.3f} s" for k, v in split.items()))
        if self.status is not None:
            self.status.shard_batch({0: {"routed_rows": fields["rows_in"], "shipped_bytes": fields["shipped_bytes"],
                                         "state_rows": fields["state_rows"]}})
            self.status.batch(**fields)


def _flush(engine: DriverEngine | None) -> Exception | None:
    """Wait for the sinks of the last batch; their failure (the next start writes the batch
    again), logged, or None."""
    if engine is None:
        return None
    try:
        engine.flush()
    except Exception as e:  # noqa: BLE001 - reported by the caller
        log.error("writing the last batch to the sinks failed (the next start writes it): %s", e)
        return e
    return None


def prepare_source(cfg: DaemonConfig, defs: list[ViewDef]) -> dict:
    """Read the tables' schema and the view columns' types; check (or, with
    ``set_replica_identity``, set) ``REPLICA IDENTITY FULL`` on every table (deletes and updates
    must carry the whole old row); (re)create the publication for them."""
    from ..io.postgres.replication import (
        connect,
        ensure_publication,
        replica_identity,
        set_replica_identity_full,
    )
    from ..io.postgres.snapshot import read_schema, view_types

    tables: list[str] = []
    for d in defs:
        tables += [t for t in d.tables if t not in tables]
    schema = read_schema(cfg.source, tables)
    for d in defs:
        d.types = view_types(cfg.source, d.select_sql)
    conn = connect(cfg.source)
    try:
        lacking = [t for t in tables if replica_identity(conn, t) != "f"]
        if lacking and not cfg.set_replica_identity:
            raise IVMError(
                f"table(s) {', '.join(lacking)} lack REPLICA IDENTITY FULL, so their updates and "
                "deletes would not carry the old rows the views need: run ALTER TABLE … REPLICA "
                "IDENTITY FULL, or start the daemon with --set-replica-identity to let it do so")
        for t in lacking:
            log.warning("setting REPLICA IDENTITY FULL on %s (--set-replica-identity)", t)
            set_replica_identity_full(conn, t)
        ensure_publication(conn, cfg.publication, tables)
        from .hygiene import clean_orphans, mark_publication

        mark_publication(conn, cfg.publication, cfg.checkpoint)
        clean_orphans(conn, cfg.publication)
    finally:
        conn.close()
    return schema


def process_age() -> float | None:
    """Seconds since this process started (Linux), i.e. interpreter start and imports
    before :func:`run` was entered."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


class Phases:
    """Wall-clock seconds of the start-up phases (for the log and ``--status``)."""

    def __init__(self, t0: float):
        self.t = t0
        self.data: dict[str, float] = {}
        age = process_age()
        if age is not None:
            self.data["process_start_and_imports"] = round(age - (time.monotonic() - t0), 3)

    def mark(self, name: str) -> None:
        now = time.monotonic()
        self.data[name] = round(now - self.t, 3)
        self.t = now

    def report(self, **extra: float | None) -> dict[str, float]:
        return self.data | {k: round(v, 3) for k, v in extra.items() if v is not None}


def warm_worker_imports() -> None:
    import importlib

    for mod in ("pyarrow", "pyspark.sql.streaming.python_streaming_source_runner",
                "pyspark.sql.worker.plan_data_source_read", "pyspark.worker", "pandas"):
        try:
            importlib.import_module(mod)
        except Exception:  # noqa: BLE001,S112 - only a cache warm-up
            continue


def warm_python_workers(spark) -> None:
    """A one-row Python job: Spark starts its Python worker pool for it."""
    try:
        spark.range(1).mapInArrow(lambda batches: batches, "id long").collect()
    except Exception:  # noqa: BLE001,S110 - only a warm-up; the query reports real failures
        pass


def error_text(e: BaseException) -> str:
    """``str(e)``, or the class name where that fails: a Py4J error asks the JVM for its message,
    and after SIGTERM to the process group the JVM is gone (the question itself raises)."""
    try:
        return str(e) or type(e).__name__
    except Exception:  # noqa: BLE001 - Py4JNetworkError, ConnectionRefusedError, ...
        return type(e).__name__


def worker_start_failure(e: BaseException) -> bool:
    """Spark could not start a Python worker in time (a transient start-up failure on a loaded
    machine: the worker must connect back within a fixed 10 s)."""
    text = error_text(e)
    return "failed to connect back" in text or "waiting for the Python worker to connect back" in text


class SessionStarter:
    """Build the SparkSession (JVM start, the longest part of a cold start) on a thread."""

    def __init__(self, cfg: DaemonConfig):
        import threading

        self.cfg, self.spark, self.error, self.seconds = cfg, None, None, None
        self.thread = threading.Thread(target=self._build, name="ivm-spark-session", daemon=True)
        self.thread.start()

    def _build(self) -> None:
        from .spark import build_session

        t0 = time.monotonic()
        try:
            host, bind = self.cfg.driver_address()
            self.spark = build_session(self.cfg.master, app_name=f"ivm-daemon-{self.cfg.name}",
                                       shuffle_partitions=self.cfg.shuffle_partitions or self.cfg.shards,
                                       log_level=self.cfg.log_level, extra=self.cfg.spark_conf(),
                                       driver_host=host, bind_address=bind)
        except BaseException as e:  # noqa: BLE001 - re-raised on the main thread by get()
            self.error = e
        self.seconds = time.monotonic() - t0
        # what the first Python workers import, loaded once here (on this thread: concurrent
        # imports of pyspark race) before any worker starts: the OS has the files cached, so a
        # worker connects back to the JVM within Spark's fixed 10 s
        warm_worker_imports()

    def get(self):
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.spark


def run(cfg: DaemonConfig) -> int:
    """Run the daemon until it is stopped (SIGINT/SIGTERM) or, with ``trigger =
    available-now``, until it caught up with the WAL position at its start."""
    cfg.validate()
    t_start = time.monotonic()
    with open(cfg.views) as f:
        defs = parse_views(f.read())
    os.makedirs(cfg.checkpoint, exist_ok=True)
    spark_ckpt = os.path.join(cfg.checkpoint, "spark")
    engine_dir = os.path.join(cfg.checkpoint, "engine")
    if cfg.shards == 1 and os.path.isdir(engine_dir) and last_batch_in(engine_dir) >= 0 \
            and not os.path.isdir(os.path.join(spark_ckpt, "offsets")):
        raise IVMError(f"the checkpoint {cfg.checkpoint} holds engine state but no Spark offsets; "
                       "it is damaged: use a new --checkpoint")
    # every connection of the daemon (driver, source reader, executors) is named for it, so
    # pg_stat_activity shows what it runs and that a stopped daemon left nothing behind
    os.environ["PGAPPNAME"] = f"ivm daemon {cfg.name}"[:63]
    phases = Phases(t_start)
    # the JVM starts in the background while the driver reads the catalog and recovers the engine
    session = SessionStarter(cfg)
    schema = prepare_source(cfg, defs)
    phases.mark("source_catalog_and_publication")
    status = StatusFile(cfg.checkpoint, cfg.name, cfg.master, cfg.shards)
    status.set(sink_commit=cfg.sink_commit)
    metrics = None
    if cfg.metrics_port is not None:
        from .metrics import DaemonMetrics

        metrics = DaemonMetrics(status, cfg.metrics_port, cfg.metrics_host, cfg.source, cfg.slot)
        status.set(metrics_url=metrics.url)
    sinks = [open_sink(s, cfg.source, cfg.name) for s in cfg.sinks]
    engine = None
    if cfg.shards == 1:
        engine = DriverEngine(cfg, defs, schema, sinks, status)
        phases.mark("engine_recovery_and_sinks")
        if engine.last >= 0:
            log.warning("recovered the engine at batch %d in %.2f s", engine.last, engine.recovery_seconds)
    spark = session.get()
    phases.mark("spark_session_wait")
    from .listener import ProgressListener

    spark.streams.addListener(ProgressListener(status))
    ui_url = spark.sparkContext.uiWebUrl
    # the settings passed through, as the running session reports them (read back)
    conf = {k: spark.conf.get(k, None) for k in sorted(cfg.conf)}
    status.set(ui_url=ui_url, spark_app_id=spark.sparkContext.applicationId, conf=conf)
    if ui_url:
        log.warning("Spark UI: %s", ui_url)
    import threading

    # the executors' Python worker pool starts while the query starts (not in the first batch)
    threading.Thread(target=warm_python_workers, args=(spark,), name="ivm-warm-workers", daemon=True).start()
    tables = sorted({t for d in defs for t in d.tables})
    reader = (spark.readStream.format("ivm-cdc")
              .option("url", cfg.source).option("slot", cfg.slot).option("publication", cfg.publication)
              .option("tables", ",".join(tables)).option("maxChangesPerBatch", str(cfg.max_changes_per_batch))
              .option("snapshotPartitionRows", str(cfg.snapshot_partition_rows))
              .option("statePath", engine_dir).option("commitMarker", marker_path(cfg.checkpoint)))
    if engine is not None:
        writer = reader.load().writeStream.foreachBatch(engine)
    else:
        from .shards import sharded_writer

        writer = sharded_writer(spark, reader, cfg, defs, schema, sinks, status)
    writer = writer.option("checkpointLocation", spark_ckpt).queryName(cfg.name)
    secs = cfg.trigger_seconds
    writer = writer.trigger(availableNow=True) if secs is None else writer.trigger(processingTime=f"{secs} seconds")
    query = writer.start()
    phases.mark("query_start")
    startup = phases.report(spark_session_build=session.seconds)
    status.set(state="running", startup_seconds=round(time.monotonic() - t_start, 3), startup=startup)
    log.warning("daemon %s started in %.1f s (master %s, %d shard(s), sinks %s; %s)", cfg.name,
                time.monotonic() - t_start, cfg.master, cfg.shards, ", ".join(s.label for s in sinks),
                ", ".join(f"{k} {v:.2f} s" for k, v in startup.items()))

    stop_requested: list[int] = []

    def on_signal(signum, frame):
        stop_requested.append(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    restarts = 0
    try:
        while not stop_requested:
            if engine is not None and engine.failed is not None:
                query.stop()        # a sink failed on its thread: stop (a restart writes it)
                raise engine.failed
            try:
                if query.awaitTermination(1):
                    break
            except Exception as e:
                # the checkpoint makes a restart exact; the engine was not touched (it fails
                # for good on its own errors)
                if not worker_start_failure(e) or restarts >= 3 or (engine is not None and engine.failed):
                    raise
                restarts += 1
                log.warning("Spark could not start a Python worker (%s); restarting the query (%d/3)",
                            error_text(e).splitlines()[0][:200], restarts)
                query = writer.start()
                continue
        if stop_requested:
            log.warning("stopping (signal %d): finishing the running batch", stop_requested[0])
            query.stop()
    except Exception as e:  # noqa: BLE001 - report the query's failure and exit non-zero
        # the engine's or a sink's own error (raised inside foreachBatch, Spark wraps it)
        first = error_text(engine.failed if engine is not None and engine.failed is not None else e)
        first = (first.splitlines() or [type(e).__name__])[0]
        if stop_requested:
            # SIGTERM/SIGINT to the process group (a supervisor, Ctrl-C) reaches Spark's JVM too
            # and ends the query under us: the running batch is abandoned, not failed — the
            # checkpoint and the log replay it at the next start
            log.warning("stopped (signal %d): the running batch was abandoned (%s); the next start "
                        "replays it", stop_requested[0], first[:200])
            status.set(state="stopped", abandoned_batch=True)
            return 0
        status.set(state="failed", error=first[:500])
        print(f"ivm daemon: the streaming query failed: {first}", file=sys.stderr)
        return 1
    finally:
        unflushed = _flush(engine)      # the last batch's sinks
        for s in sinks:
            s.close()
        if metrics is not None:
            metrics.close()
    if unflushed is not None:
        status.set(state="failed", error=str(unflushed)[:500])
        print(f"ivm daemon: writing the last batch to the sinks failed: {unflushed}", file=sys.stderr)
        return 1
    try:
        exc = query.exception()
    except Exception as e:  # noqa: BLE001 - Spark's JVM is gone (it got the signal too)
        exc = None if stop_requested else e
    if exc is not None:
        status.set(state="failed", error=error_text(exc)[:500])
        print(f"ivm daemon: the streaming query failed: {error_text(exc)}", file=sys.stderr)
        return 1
    status.set(state="stopped")
    with contextlib.suppress(Exception):  # the JVM may have been stopped by the same signal
        spark.stop()
    return 0
