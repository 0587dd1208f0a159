"""The initial snapshot reaches the single-shard engine one Spark partition (table slice) at a
time, so ``spark.driver.maxResultSize`` bounds a slice, not the table: a 60,000-row snapshot
(≈ 3 MB of source rows) goes through a daemon whose ``--max-result-size`` is 1m (Spark's
minimum), in slices of 10,000 rows, and the view equals PostgreSQL's SELECT (EXCEPT ALL both
ways). Collected as one batch, the same snapshot exceeds the limit and the query fails."""

from __future__ import annotations

import psycopg
import pytest

from ivm_layer.bench.daemon_workload import Daemon

SELECT = "SELECT r.a, r.k, r.pad, s.x FROM r JOIN s ON r.k = s.k"


@pytest.mark.spark
def test_snapshot_larger_than_max_result_size_goes_through_in_slices(pg_url, tmp_path):
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("CREATE TABLE r (a int, k int, pad text); CREATE TABLE s (k int, x int)")
        c.execute("INSERT INTO r SELECT i, i % 10, repeat('p', 20) || i FROM generate_series(1, 60000) i")
        c.execute("INSERT INTO s SELECT i, i * 3 FROM generate_series(0, 9) i")
        c.execute("ANALYZE r; ANALYZE s")
    views = tmp_path / "views.sql"
    views.write_text(f"CREATE INCREMENTAL MATERIALIZED VIEW v AS {SELECT};\n")
    config = tmp_path / "daemon.toml"
    config.write_text("[daemon]\nsnapshot_partition_rows = 10000\n")
    args = ["--config", str(config), "--source", pg_url, "--views", str(views), "--set-replica-identity",
            "--master", "local[2]", "--trigger", "available-now", "--sink", "source", "--max-result-size", "1m"]
    d = Daemon(args, str(tmp_path / "ckpt"), str(tmp_path / "daemon.log")).start()
    assert d.proc.wait(600) == 0, d.tail()
    bag = "SELECT a, k, pad, x FROM v, generate_series(1, ivm_count)"
    with psycopg.connect(pg_url) as c:
        missing = c.execute(f"SELECT count(*) FROM (({SELECT}) EXCEPT ALL ({bag})) q").fetchone()[0]
        extra = c.execute(f"SELECT count(*) FROM (({bag}) EXCEPT ALL ({SELECT})) q").fetchone()[0]
        n = c.execute("SELECT sum(ivm_count) FROM v").fetchone()[0]
    assert (missing, extra, n) == (0, 0, 60000)
