"""The daemon on Spark's own tooling (issue 26, item 5), end to end on a real Spark (local[2]):
the Spark UI answers, a StreamingQueryListener's progress reaches ``ivm daemon --status --json``,
``--conf`` settings reach the session (read back from the session and from the UI's REST API),
``--metrics-port`` serves Prometheus text; with ``--sink-commit spark`` the sinks hold every
batch Spark has committed (item 6); and the views equal PostgreSQL's SELECT."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

import psycopg
import pytest

from ivm_layer.bench.daemon_workload import (
    ROOT,
    VIEWS,
    Daemon,
    Writers,
    create_tables,
    expected,
    materialized,
)


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.status, r.read().decode()


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith((name + " ", name + "{")):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in the metrics:\n{text[:3000]}")


@pytest.mark.spark
def test_ui_listener_conf_metrics_and_sink_commit(pg_url, tmp_path):
    create_tables(pg_url, seed=3)
    views = tmp_path / "views.sql"
    views.write_text(VIEWS)
    ckpt, log = str(tmp_path / "ckpt"), str(tmp_path / "daemon.log")
    args = ["--source", pg_url, "--views", str(views), "--set-replica-identity", "--master", "local[2]",
            "--trigger", "1s", "--max-changes-per-batch", "60",
            "--conf", "spark.sql.shuffle.partitions=3", "--conf", "spark.ivm.test.marker=tooling",
            "--metrics-port", "0", "--driver-memory", "900m", "--sink-commit", "spark"]
    d = Daemon(args, ckpt, log).start()
    writers = None
    try:
        d.wait(lambda st: st.get("batches", 0) >= 1, 300, "the snapshot batch")
        writers = Writers(pg_url, seed=41).start()
        # several change batches; sample, each time, Spark's committed batch and then the sinks'
        samples = []
        deadline = time.monotonic() + 240
        while len({s[0] for s in samples}) < 4 and time.monotonic() < deadline:
            st = d.status()
            spark_batch = st.get("spark_committed_batch") if st else None
            if spark_batch is not None:
                with psycopg.connect(pg_url) as c:
                    sinks_batch = c.execute("SELECT max(batch_id) FROM ivm_daemon_batches").fetchone()[0]
                samples.append((spark_batch, sinks_batch))
            time.sleep(0.3)
        assert len({s[0] for s in samples}) >= 4, (samples, d.tail())
        # --sink-commit spark: whatever Spark committed, the sinks held first
        assert all(sinks >= spark for spark, sinks in samples), samples
        marker = writers.stop()
        st = d.wait_lsn(marker)

        # the Spark UI answers HTTP, and its REST API shows the settings passed with --conf
        ui = st["ui_url"]
        assert ui and ui.startswith("http://")
        code, page = _get(ui + "/jobs/")
        assert code == 200 and "Spark" in page
        code, env = _get(f"{ui}/api/v1/applications/{st['spark_app_id']}/environment")
        props = dict(json.loads(env)["sparkProperties"])
        assert props["spark.sql.shuffle.partitions"] == "3" and props["spark.ivm.test.marker"] == "tooling"
        assert props["spark.driver.memory"] == "900m"
        assert "spark.sql.streaming.stateStore.providerClass" not in props   # dead setting dropped
        # ... and the session itself reads them back
        assert st["conf"] == {"spark.ivm.test.marker": "tooling", "spark.sql.shuffle.partitions": "3"}

        # ivm daemon --status --json: the listener's progress, in Spark's names
        out = subprocess.run([sys.executable, "-m", "ivm_layer", "daemon", "--status", "--json", "--checkpoint",
                              ckpt], cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True,
                             text=True, timeout=60, check=True).stdout
        js = json.loads(out)
        p = js["progress"]
        assert isinstance(p["batchId"], int) and p["batchId"] >= 4 and p["batchId"] == js["spark_committed_batch"]
        assert isinstance(p["numInputRows"], int) and p["numInputRows"] >= 0
        assert {"addBatch", "triggerExecution", "walCommit"} <= set(p["durationMs"])
        assert p["sources"][0]["endOffset"]["lsn"] >= p["sources"][0]["startOffset"]["lsn"] > 0
        assert js["sinks_committed_batch"] >= p["batchId"]
        text = subprocess.run([sys.executable, "-m", "ivm_layer", "daemon", "--status", "--checkpoint", ckpt],
                              cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True,
                              timeout=60, check=True).stdout
        assert f"Spark UI {ui}" in text and "committed: sinks hold batch" in text

        # the metrics endpoint: Prometheus text with the daemon's batches, rows and durations
        code, metrics = _get(js["metrics_url"])
        assert code == 200
        assert _metric(metrics, "ivm_daemon_batches_total") >= 5
        assert _metric(metrics, "ivm_daemon_rows_in_total") >= st["rows_in_total"] > 0
        assert _metric(metrics, "ivm_daemon_changes_out_total") >= 0
        assert _metric(metrics, "ivm_daemon_batch_seconds_count") >= 5
        assert "# TYPE ivm_daemon_batch_seconds histogram" in metrics
        assert _metric(metrics, "ivm_daemon_spark_committed_batch") >= p["batchId"]
        assert 'ivm_daemon_spark_duration_seconds{phase="addBatch"}' in metrics
        assert _metric(metrics, "ivm_daemon_slot_retained_bytes") >= 0
        assert 'ivm_daemon_up{state="running"} 1.0' in metrics

        got, want = materialized(pg_url), expected(pg_url)
        assert got == want and sum(want.values()) > 0
        assert d.terminate() == 0, d.tail()
    finally:
        if writers is not None:
            writers.stop_event.set()
        if d.proc.poll() is None:
            d.kill9()
    # the marker of the last batch the sinks hold (what the slot is confirmed by)
    with open(os.path.join(ckpt, "sinks-committed.json")) as f:
        mark = json.load(f)
    st = d.status()
    assert mark["batch_id"] == st["sinks_committed_batch"] and mark["lsn"] == st["last_batch"]["lsn"]
