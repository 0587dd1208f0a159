"""The daemon's state on S3 (a moto server on loopback), end to end on a real PostgreSQL and
Spark (local[2]): writers change three tables under a 3-way view; the daemon is killed with
SIGKILL mid-stream and restarted on the same ``s3://`` checkpoint; then killed again and its
Spark checkpoint (a local directory) deleted, as when the driver's machine is replaced, and
restarted: Spark's checkpoint is rebuilt from the state on S3. Each time the materialized
view equals PostgreSQL's SELECT, as multisets (EXCEPT ALL both ways), and no credential is in
any object the daemon wrote."""

from __future__ import annotations

import shutil
import time

import psycopg
import pytest

from ivm_layer.bench.daemon_workload import (
    COLUMNS,
    SELECT,
    VIEWS,
    Daemon,
    Writers,
    create_tables,
)


def _except_all(url: str) -> tuple[int, int, int]:
    """(rows of the view's bag missing from the SELECT, extra rows, rows in the SELECT)."""
    bag = f"SELECT {COLUMNS} FROM v3, generate_series(1, ivm_count)"
    with psycopg.connect(url) as c:
        missing = c.execute(f"SELECT count(*) FROM (({SELECT}) EXCEPT ALL ({bag})) x").fetchone()[0]
        extra = c.execute(f"SELECT count(*) FROM (({bag}) EXCEPT ALL ({SELECT})) x").fetchone()[0]
        n = c.execute(f"SELECT count(*) FROM ({SELECT}) x").fetchone()[0]
    return missing, extra, n


@pytest.mark.spark
def test_daemon_state_on_s3_survives_kill9_and_a_lost_spark_checkpoint(pg_url, tmp_path, s3_url, s3_server):
    create_tables(pg_url)
    views = tmp_path / "views.sql"
    views.write_text(VIEWS)
    spark_ckpt = tmp_path / "spark-ckpt"
    args = ["--source", pg_url, "--views", str(views), "--set-replica-identity", "--master", "local[2]",
            "--trigger", "1s", "--max-changes-per-batch", "300", "--sink", "source",
            "--spark-checkpoint", str(spark_ckpt)]
    log = str(tmp_path / "daemon.log")
    procs: list = []
    try:
        d = Daemon(args, s3_url, log).start()
        procs.append(d)
        d.wait(lambda s: s.get("batches", 0) >= 1, 300, "the snapshot batch")
        assert _except_all(pg_url)[:2] == (0, 0)
        w = Writers(pg_url).start()
        procs.append(w)
        d.wait(lambda s: s.get("batches", 0) >= 4, 300, "a few change batches")
        d.kill9()                                  # mid-stream: the writers keep going
        d = Daemon(args, s3_url, log).start()
        procs.append(d)
        st = d.wait(lambda s: s.get("batches", 0) >= 1, 300, "a batch after the restart")
        assert st["last_batch"]["batch_id"] >= 4 and not st["epoch"]["rebuilt"]
        time.sleep(2)
        d.kill9()
        shutil.rmtree(spark_ckpt)                  # Spark's checkpoint is lost with the driver's disk
        d = Daemon(args, s3_url, log).start()
        procs.append(d)
        st = d.wait(lambda s: s.get("batches", 0) >= 1, 300, "a batch after the rebuild")
        assert st["epoch"]["rebuilt"] and st["epoch"]["batch_base"] >= 5
        time.sleep(2)
        marker = w.stop()
        d.wait_lsn(marker)
        missing, extra, n = _except_all(pg_url)
        assert (missing, extra) == (0, 0) and n > 0, (missing, extra, n)
        assert sum(w.counts.values()) > 30
        assert d.terminate() == 0
    finally:
        for p in procs:
            if isinstance(p, Writers):
                p.stop_event.set()
            elif p.proc.poll() is None:
                p.kill9()
    # nothing the daemon wrote holds a credential (the state's objects, Spark's checkpoint, the log)
    import boto3

    bucket = s3_url.split("/")[2]
    s3 = boto3.client("s3", endpoint_url=s3_server["endpoint"])
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert any(k.startswith("ckpt/engine/logs-") and "/log-" in k for k in keys) and "ckpt/sinks-committed.json" in keys
    secrets = [s3_server["env"]["AWS_SECRET_ACCESS_KEY"].encode(), s3_server["env"]["AWS_ACCESS_KEY_ID"].encode()]
    blobs = [s3.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys]
    blobs += [p.read_bytes() for p in spark_ckpt.rglob("*") if p.is_file()]
    with open(log, "rb") as f:
        blobs.append(f.read())
    assert not [b for b in blobs if any(x in b for x in secrets)]
