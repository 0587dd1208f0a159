"""``--metrics-port``: Prometheus text on ``/metrics`` (prometheus-client, served by
:class:`ivm_layer.exposition.Exposition`).

Counters and histograms are updated by the connections as statements run (O(1) each); the
per-view figures (rows, lag, subscriber backlog) are read from the backend when Prometheus
scrapes (:meth:`Metrics.collect`), so an idle server does no work for them.

=====================================  ==========================================================
``ivm_serve_connections``              open client connections
``ivm_serve_statements_total{kind}``   statements by kind (read, insert, engine_read, subscribe …)
``ivm_serve_errors_total{sqlstate}``   errors sent, by SQLSTATE
``ivm_serve_statement_seconds{path}``  latency until the first row or the result (engine, duckdb,
                                       write, other)
``ivm_serve_commit_seconds``           a commit's exclusive hold on the views (update latency)
``ivm_serve_view_rows{view}``          total multiplicity of each incremental view
``ivm_serve_view_lag_bytes{view}``     PostgreSQL proxy: bytes of WAL not yet applied
``ivm_serve_view_lag_seconds{view}``   PostgreSQL proxy: seconds behind the last commit
``ivm_serve_subscriber_backlog{view}`` change rows queued for SUBSCRIBE clients
=====================================  ==========================================================
"""

from __future__ import annotations

import logging

log = logging.getLogger("ivm_layer.serve")


class Metrics:
    def __init__(self, port: int, host: str = "127.0.0.1"):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        from ..exposition import Exposition

        self.registry = CollectorRegistry()
        r = self.registry
        self.connections = Gauge("ivm_serve_connections", "open client connections", registry=r)
        self.statements = Counter("ivm_serve_statements", "statements by kind", ["kind"], registry=r)
        self.errors = Counter("ivm_serve_errors", "errors sent to clients, by SQLSTATE", ["sqlstate"], registry=r)
        buckets = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5, 30)
        self.latency = Histogram("ivm_serve_statement_seconds", "statement latency until its result or first row",
                                 ["path"], buckets=buckets, registry=r)
        self.commit = Histogram("ivm_serve_commit_seconds", "a commit's exclusive hold on the views",
                                buckets=buckets, registry=r)
        self.server = None
        self._collector = _ViewCollector(self)
        r.register(self._collector)
        self._http = Exposition(r, port, host)
        self.port = self._http.port
        self.host = host

    def bind(self, server) -> None:
        self.server = server
        backend = server.backend
        backend.on_commit = self.commit.observe

    def connected(self, delta: int) -> None:
        self.connections.inc(delta)

    def error(self, sqlstate: str) -> None:
        self.errors.labels(sqlstate).inc()

    def statement(self, p, seconds: float) -> None:
        kind = _kind(p)
        self.statements.labels(kind).inc()
        path = "engine" if kind in ("engine_read", "subscribe") else \
            "write" if kind in ("insert", "update", "delete", "copy_from", "merge", "truncate", "commit") else \
            "duckdb" if kind in ("read", "catalog") else "other"
        self.latency.labels(path).observe(seconds)

    def close(self) -> None:
        self._http.close()


def _kind(p) -> str:
    c = getattr(p, "command", None)
    if c is not None:
        return type(c).__name__.lower().replace("cmd", "")
    if getattr(p, "catalog", False):
        return "catalog"
    if getattr(p, "shape", None) is not None:
        return "engine_read"
    return p.route.kind


class _ViewCollector:
    """Per-view gauges, read from the backend at scrape time."""

    def __init__(self, metrics: Metrics):
        self.metrics = metrics

    def describe(self):
        return []

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        server = self.metrics.server
        if server is None:
            return
        rows = GaugeMetricFamily("ivm_serve_view_rows", "total multiplicity of each incremental view", labels=["view"])
        lag_b = GaugeMetricFamily("ivm_serve_view_lag_bytes", "bytes of change stream not yet applied", labels=["view"])
        lag_s = GaugeMetricFamily("ivm_serve_view_lag_seconds", "seconds behind the source", labels=["view"])
        backlog = GaugeMetricFamily("ivm_serve_subscriber_backlog", "change rows queued for SUBSCRIBE clients",
                                    labels=["view"])
        try:
            infos = server.backend.view_infos()
        except Exception as e:  # noqa: BLE001 - a scrape must not fail the server
            log.warning("metrics: cannot read the views: %s", e)
            infos = []
        queued = server.backend.hub.subscriber_backlog()
        for i in infos:
            rows.add_metric([i.name], i.rows)
            lag_b.add_metric([i.name], i.lag_bytes or 0)
            lag_s.add_metric([i.name], i.lag_seconds or 0.0)
            backlog.add_metric([i.name], queued.get(i.name, 0))
        yield from (rows, lag_b, lag_s, backlog)
