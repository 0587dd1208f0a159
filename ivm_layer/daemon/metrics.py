"""``ivm daemon --metrics-port``: Prometheus text on ``/metrics`` (served like ``ivm serve``'s,
by :class:`ivm_layer.exposition.Exposition`).

Everything but the histogram is read from the status file's figures when Prometheus scrapes
(the batches' counts, Spark's last progress report from :mod:`.listener`); the WAL the slot
retains is asked of PostgreSQL at scrape time (one short connection per scrape, none between).

=============================================  ====================================================
``ivm_daemon_batches_total``                   batches the sinks hold (since the daemon started)
``ivm_daemon_rows_in_total``                   row changes read (routed rows with ``--shards N``)
``ivm_daemon_changes_in_total``                row changes read from the slot (before routing)
``ivm_daemon_changes_out_total``               view changes written to the sinks
``ivm_daemon_shard_routed_rows_total{shard}``  rows routed to a shard (replicas included)
``ivm_daemon_shard_state_rows{shard}``         distinct rows a shard's engines hold (last batch)
``ivm_daemon_shard_shipped_bytes_total{shard}`` bytes of the shard's task partitions
``ivm_daemon_batch_seconds``                   histogram: a batch from its start until its sinks held it
``ivm_daemon_batch_split_seconds{step}``       the last batch's split (read, engine, checkpoint, sinks …)
``ivm_daemon_last_batch_id``                   the last batch the sinks hold
``ivm_daemon_seconds_behind``                  now − the commit time of the last batch's last transaction
``ivm_daemon_spark_committed_batch``           the last batch in Spark's commit log (listener)
``ivm_daemon_spark_input_rows``                Spark's ``numInputRows`` of that batch
``ivm_daemon_spark_duration_seconds{phase}``   Spark's ``durationMs`` of that batch (addBatch, walCommit …)
``ivm_daemon_slot_retained_bytes``             WAL the slot retains (current WAL − confirmed_flush_lsn)
``ivm_daemon_up{state}``                       1 for the daemon's state (starting, running, failed …)
=============================================  ====================================================
"""

from __future__ import annotations

import logging

from .status import StatusFile

log = logging.getLogger("ivm.daemon")

BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


class DaemonMetrics:
    def __init__(self, status: StatusFile, port: int, host: str = "127.0.0.1",
                 source: str | None = None, slot: str | None = None):
        from prometheus_client import CollectorRegistry, Histogram

        from ..exposition import Exposition

        self.status, self.source, self.slot = status, source, slot
        self.registry = CollectorRegistry()
        self.batch_seconds = Histogram("ivm_daemon_batch_seconds", "a batch from its start until its sinks held it",
                                       buckets=BUCKETS, registry=self.registry)
        self.registry.register(_StatusCollector(self))
        status.observers.append(self._observe)
        self._http = Exposition(self.registry, port, host)
        self.port, self.url = self._http.port, self._http.url

    def _observe(self, fields: dict) -> None:
        if fields.get("seconds") is not None:
            self.batch_seconds.observe(fields["seconds"])

    def slot_retained_bytes(self) -> int | None:
        if not self.source or not self.slot:
            return None
        from ..io.postgres.replication import connect

        try:
            conn = connect(self.source)
            try:
                row = conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint "
                                   "FROM pg_replication_slots WHERE slot_name = %s", [self.slot]).fetchone()
            finally:
                conn.close()
        except Exception as e:  # noqa: BLE001 - a scrape must not fail the daemon
            log.info("metrics: cannot read the slot's position: %s", e)
            return None
        return None if row is None or row[0] is None else int(row[0])

    def close(self) -> None:
        self._http.close()


class _StatusCollector:
    """The status file's figures, read at scrape time."""

    def __init__(self, metrics: DaemonMetrics):
        self.metrics = metrics

    def describe(self):
        return []

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        d = self.metrics.status.snapshot()
        b = d.get("last_batch") or {}
        p = d.get("progress") or {}
        yield CounterMetricFamily("ivm_daemon_batches", "batches the sinks hold", value=d.get("batches", 0))
        yield CounterMetricFamily("ivm_daemon_rows_in", "row changes read", value=d.get("rows_in_total", 0))
        yield CounterMetricFamily("ivm_daemon_changes_in", "row changes read from the slot",
                                  value=d.get("changes_in", 0))
        yield CounterMetricFamily("ivm_daemon_changes_out", "view changes written to the sinks",
                                  value=d.get("changes_out_total", 0))
        shards = d.get("shards") if isinstance(d.get("shards"), list) else []
        for name, key, kind, doc in (
                ("ivm_daemon_shard_routed_rows", "routed_rows", CounterMetricFamily, "rows routed to a shard"),
                ("ivm_daemon_shard_state_rows", "state_rows", GaugeMetricFamily, "distinct rows a shard holds"),
                ("ivm_daemon_shard_shipped_bytes", "shipped_bytes", CounterMetricFamily,
                 "bytes of a shard's task partitions")):
            fam = kind(name, doc, labels=["shard"])
            for x in shards:
                fam.add_metric([str(x["shard"])], float(x.get(key) or 0))
            yield fam
        split = GaugeMetricFamily("ivm_daemon_batch_split_seconds", "the last batch's time by step", labels=["step"])
        for step, secs in (b.get("split") or {}).items():
            split.add_metric([step], float(secs))
        yield split
        for name, doc, value in (
                ("ivm_daemon_last_batch_id", "the last batch the sinks hold", b.get("batch_id")),
                ("ivm_daemon_seconds_behind", "seconds behind the last batch's last commit", b.get("seconds_behind")),
                ("ivm_daemon_spark_committed_batch", "the last batch in Spark's commit log", p.get("batchId")),
                ("ivm_daemon_spark_input_rows", "Spark's numInputRows of its last batch", p.get("numInputRows"))):
            if value is not None:
                yield GaugeMetricFamily(name, doc, value=float(value))
        dur = GaugeMetricFamily("ivm_daemon_spark_duration_seconds", "Spark's durationMs of its last batch",
                                labels=["phase"])
        for phase, ms in (p.get("durationMs") or {}).items():
            dur.add_metric([phase], float(ms) / 1000)
        yield dur
        retained = self.metrics.slot_retained_bytes()
        if retained is not None:
            yield GaugeMetricFamily("ivm_daemon_slot_retained_bytes", "WAL the slot retains", value=retained)
        up = GaugeMetricFamily("ivm_daemon_up", "1 for the daemon's state", labels=["state"])
        up.add_metric([str(d.get("state"))], 1)
        yield up
