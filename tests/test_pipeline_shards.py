"""Scale-out: the daemon with ``--shards 4`` (engines in transformWithStateInPandas, RocksDB
state) on ``local[2]`` and on a Spark standalone master with two one-core workers started
on 127.0.0.1; the union of the shards' outputs equals PostgreSQL evaluating the SELECT —
the same result one shard gives (test_pipeline_daemon.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections import Counter

import pyarrow.parquet as pq
import pytest
from daemon_workload import (
    VIEWS,
    Daemon,
    Writers,
    create_tables,
    expected,
    materialized,
)

SPARK_HOME = os.path.dirname(__import__("pyspark").__file__)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _parquet_view(directory) -> Counter:
    total: Counter = Counter()
    for f in sorted(directory.glob("batch-*.parquet")):
        for rec in pq.read_table(f).to_pylist():
            total[(rec["a"], rec["k"], rec["x"], rec["y"], rec["tag"])] += rec["ivm_delta"]
    assert not -total, "negative multiplicities in the parquet deltas"
    return +total


def _run_sharded(pg_url, tmp_path, master: str) -> None:
    create_tables(pg_url, seed=3)
    views = tmp_path / "views.sql"
    views.write_text(VIEWS)
    args = ["--source", pg_url, "--views", str(views), "--set-replica-identity", "--master", master, "--shards", "4",
            "--trigger", "1s", "--max-changes-per-batch", "200",
            "--sink", "source", "--sink", f"parquet:{tmp_path / 'pq'}"]
    d = Daemon(args, str(tmp_path / "ckpt"), str(tmp_path / "daemon.log")).start()
    writers = None
    try:
        d.wait(lambda s: s.get("batches", 0) >= 1, 300, "the snapshot batch")
        writers = Writers(pg_url, seed=11).start()
        time.sleep(8)
        marker = writers.stop()
        d.wait_lsn(marker, timeout=300)
        want = expected(pg_url)
        assert sum(want.values()) > 0
        assert materialized(pg_url) == want
        assert _parquet_view(tmp_path / "pq" / "v3") == want
        assert sum(writers.counts.values()) > 20
        assert d.terminate() == 0
    finally:
        if writers is not None:
            writers.stop_event.set()
        if d.proc.poll() is None:
            d.kill9()


def test_four_shards_on_local2(pg_url, tmp_path):
    _run_sharded(pg_url, tmp_path, "local[2]")


@pytest.fixture
def standalone_cluster(tmp_path):
    """A Spark standalone master and two one-core workers on 127.0.0.1."""
    env = dict(os.environ, SPARK_HOME=SPARK_HOME, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               SPARK_LOG_DIR=str(tmp_path / "spark-logs"), SPARK_WORKER_DIR=str(tmp_path / "spark-work"))
    spark_class = os.path.join(SPARK_HOME, "bin", "spark-class")
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    procs = []
    logs = []

    def launch(name, *args):
        log = open(tmp_path / f"{name}.log", "wb")
        logs.append(log)
        procs.append(subprocess.Popen([spark_class, *args], env=env, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True))

    launch("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
           "--webui-port", str(_free_port()))
    for i in range(2):
        launch(f"worker{i}", "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
               "--cores", "1", "--memory", "1g", "--webui-port", str(_free_port()),
               "--work-dir", str(tmp_path / f"work{i}"))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # both workers registered with the master
        text = (tmp_path / "master.log").read_text(errors="replace")
        if text.count("Registering worker") >= 2:
            break
        time.sleep(0.5)
    else:
        raise AssertionError("the standalone workers did not register:\n" + text[-3000:])
    try:
        yield url
    finally:
        import signal

        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(30)
        for log in logs:
            log.close()


def test_four_shards_on_standalone_cluster(pg_url, tmp_path, standalone_cluster):
    _run_sharded(pg_url, tmp_path, standalone_cluster)
