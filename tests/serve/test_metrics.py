"""``--metrics-port``: Prometheus text with connections, statements by kind, errors by
SQLSTATE, per-view rows, lag, latency histograms and subscriber backlog."""

from __future__ import annotations

import urllib.request

import psycopg
import pytest
from serve_process import ServeProcess, free_port


def test_metrics_endpoint(tmp_path):
    port = free_port()
    with ServeProcess(f"duckdb:///{tmp_path / 'm.duckdb'}", "--metrics-port", str(port), log=tmp_path / "log") as srv:
        with psycopg.connect(srv.url(), autocommit=True) as c:
            c.execute("CREATE TABLE t (k INT, v INT)")
            c.execute("INSERT INTO t SELECT i % 10, i FROM range(100) r(i)")
            c.execute("CREATE INCREMENTAL VIEW totals AS SELECT k, sum(v) AS s FROM t GROUP BY k")
            c.execute("INSERT INTO t VALUES (1, 1)")
            assert c.execute("SELECT count(*) FROM totals").fetchone() == (10,)
            with pytest.raises(psycopg.errors.UndefinedTable):
                c.execute("SELECT * FROM nope")
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert "ivm_serve_connections 1.0" in text
    assert 'ivm_serve_view_rows{view="totals"} 10.0' in text
    assert 'ivm_serve_errors_total{sqlstate="42P01"} 1.0' in text
    assert 'ivm_serve_statements_total{kind="engine_read"} 1.0' in text
    assert 'ivm_serve_statements_total{kind="insert"} 2.0' in text
    assert "ivm_serve_commit_seconds_count" in text and 'ivm_serve_statement_seconds_bucket{le="0.001",path="engine"}' in text
    assert 'ivm_serve_subscriber_backlog{view="totals"} 0.0' in text
    assert 'ivm_serve_view_lag_seconds{view="totals"} 0.0' in text
    assert (tmp_path / "m.duckdb").exists()      # duckdb:///PATH served that file
