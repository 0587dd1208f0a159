"""End to end: a real PostgreSQL, the daemon on a real Spark (local[2]) as a subprocess.

Writers change three tables while the daemon maintains a materialized 3-way view with an
inequality join; the daemon is killed with SIGKILL (driver and JVM: the whole process group)
mid-stream and restarted on the same checkpoint; after the writers stop and the daemon
caught up, the materialized table equals PostgreSQL evaluating the SELECT, as multisets.
"""

from __future__ import annotations

import json
import os
import time

import psycopg
import pytest

from ivm_layer.bench.daemon_workload import (
    AGG_SELECT,
    AGG_VIEWS,
    VIEWS,
    Daemon,
    Writers,
    create_tables,
    expected,
    materialized,
    restart_server,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def slow_first_worker(module: str, marker: str, seconds: float = 15.0) -> dict[str, str]:
    """Environment under which the first Python process Spark starts for ``module`` sleeps
    ``seconds`` before it connects back (``tests/slow_worker/sitecustomize.py``); ``marker``
    is created by that process."""
    return {"PYTHONPATH": os.pathsep.join([ROOT, os.path.join(ROOT, "tests", "slow_worker")]),
            "IVM_TEST_SLOW_WORKER_MODULE": module, "IVM_TEST_SLOW_WORKER_ONCE": marker,
            "IVM_TEST_SLOW_WORKER_SECONDS": str(seconds)}


def _lsn(text: str) -> int:
    hi, lo = text.split("/")
    return int(hi, 16) << 32 | int(lo, 16)


def _confirmed(conn) -> int:
    return _lsn(conn.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                             "WHERE database = current_database()").fetchone()[0])


def _leftovers(conn) -> list:
    """Backends of the daemon (its connections are named ``ivm daemon …``) and active slots."""
    return conn.execute(
        "SELECT 'backend', application_name, coalesce(query, '') FROM pg_stat_activity "
        "WHERE application_name LIKE 'ivm daemon%' AND datname = current_database() UNION ALL "
        "SELECT 'slot', slot_name, active_pid::text FROM pg_replication_slots "
        "WHERE active AND database = current_database()").fetchall()


def _diff(a, b) -> str:
    return f"missing {dict((b - a).most_common(5))}, extra {dict((a - b).most_common(5))}"


@pytest.mark.spark
def test_daemon_end_to_end_with_kill9(pg_cluster, pg_url, tmp_path):
    create_tables(pg_url)
    views = tmp_path / "views.sql"
    views.write_text(VIEWS + AGG_VIEWS)
    ckpt = str(tmp_path / "ckpt")
    args = ["--source", pg_url, "--views", str(views), "--set-replica-identity", "--master", "local[2]", "--trigger", "1s",
            "--max-changes-per-batch", "500", "--sink", "source", "--sink", f"parquet:{tmp_path / 'pq'}"]
    log = str(tmp_path / "daemon.log")

    procs: list[Daemon] = []
    try:
        _run(procs, args, ckpt, log, pg_url, tmp_path, pg_cluster)
    finally:
        for p in procs:
            if isinstance(p, Writers):
                p.stop_event.set()
            elif p.proc.poll() is None:
                p.kill9()


def _run(procs, args, ckpt, log, pg_url, tmp_path, pg_cluster):
    d = Daemon(args, ckpt, log).start()
    procs.append(d)
    st = d.wait(lambda s: s.get("batches", 0) >= 1, 240, "the snapshot batch")
    cold_start = time.monotonic() - d.started
    assert st["last_batch"]["batch_id"] == 0
    assert materialized(pg_url) == expected(pg_url)  # the snapshot batch alone is exact
    assert materialized(pg_url, "g3", "k, n, total") == expected(pg_url, AGG_SELECT)

    writers = Writers(pg_url).start()
    procs.append(writers)
    d.wait(lambda s: s.get("batches", 0) >= 4, 240, "a few change batches")
    d.kill9()  # mid-stream: the writers keep going
    time.sleep(2)

    d2 = Daemon(args, ckpt, log).start()
    procs.append(d2)
    st = d2.wait(lambda s: s.get("batches", 0) >= 1, 240, "the first batch after the restart")
    recovery = time.monotonic() - d2.started
    assert st["last_batch"]["batch_id"] > 4 - 1  # batch ids continue from the checkpoint
    time.sleep(3)
    marker = writers.stop()
    assert sum(writers.counts.values()) > 50
    d2.wait_lsn(marker)
    got, want = materialized(pg_url), expected(pg_url)
    assert got == want, _diff(got, want)
    assert sum(want.values()) > 0
    got_g, want_g = materialized(pg_url, "g3", "k, n, total"), expected(pg_url, AGG_SELECT)
    assert got_g == want_g and set(got_g.values()) == {1}, _diff(got_g, want_g)

    # the parquet sink: the sum of all per-batch deltas is the view, once per batch id
    from collections import Counter

    import pyarrow.parquet as pq

    total: Counter = Counter()
    files = sorted((tmp_path / "pq" / "v3").glob("batch-*.parquet"))
    for f in files:
        for rec in pq.read_table(f).to_pylist():
            total[(rec["a"], rec["k"], rec["x"], rec["y"], rec["tag"])] += rec["ivm_delta"]
    assert +total == want and not -total

    # the slot is confirmed promptly once the batches are applied, past the sink's own writes
    # into the same cluster too (nothing is pending), so no WAL piles up behind it
    with psycopg.connect(pg_url, autocommit=True) as c:
        wal = _lsn(c.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0])
        deadline = time.monotonic() + 60
        while _confirmed(c) < wal and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _confirmed(c) >= wal
    # pg_ctl restart -m fast under the running daemon: the shutdown is not held by its walsender
    # (pg_ctl fails after 60 s otherwise) and the daemon reconnects and resumes exactly
    restart_s = restart_server(pg_cluster)
    writers = Writers(pg_url, seed=23).start()
    procs.append(writers)
    time.sleep(3)
    marker = writers.stop()
    d2.wait_lsn(marker)
    got, want = materialized(pg_url), expected(pg_url)
    assert got == want, _diff(got, want)
    assert materialized(pg_url, "g3", "k, n, total") == expected(pg_url, AGG_SELECT)

    assert d2.terminate() == 0
    with psycopg.connect(pg_url, autocommit=True) as c:  # a stopped daemon leaves nothing running
        deadline = time.monotonic() + 10
        while _leftovers(c) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _leftovers(c) == []
    assert "stopped" in d2.status_text()
    # maxChangesPerBatch: whole transactions (≤ 8 row changes each) up to 500 changes per batch
    sizes = d2.batch_sizes()
    assert len(sizes) >= 6 and max(n for b, n in sizes.items() if b > 0) <= 500 + 8, sizes
    print(f"\ncold start to first batch {cold_start:.1f} s; restart to first batch {recovery:.1f} s; "
          f"pg_ctl restart -m fast {restart_s:.1f} s")


@pytest.mark.spark
def test_available_now_cold_start_then_catch_up(pg_url, tmp_path):
    """``--trigger available-now`` from an empty checkpoint (the first run of a fresh daemon:
    JVM, Python workers and slot all new) succeeds first time and exits — even when the first
    Python worker Spark starts for the stream's reader misses Spark's fixed connect-back
    deadline (the environment makes that process sleep past it: "Python worker failed to
    connect back"), which the daemon survives by starting the query once more; a second run on
    the same checkpoint streams what was committed meanwhile, exactly, and exits; neither
    leaves a query, walsender or active slot behind."""
    create_tables(pg_url, seed=5)
    views = tmp_path / "views.sql"
    views.write_text(VIEWS)
    args = ["--source", pg_url, "--views", str(views), "--set-replica-identity", "--master", "local[2]",
            "--trigger", "available-now", "--max-changes-per-batch", "40"]
    ckpt, log = str(tmp_path / "ckpt"), str(tmp_path / "daemon.log")
    marker = tmp_path / "slow-worker-started"
    env = slow_first_worker("pyspark.sql.streaming.python_streaming_source_runner", str(marker))
    d = Daemon(args, ckpt, log, env=env).start()
    assert d.proc.wait(600) == 0, d.tail()
    d.log.close()
    assert marker.exists()  # the slow first start did happen
    with open(log, errors="replace") as f:
        assert "could not start a Python worker" in f.read(), d.tail()
    assert materialized(pg_url) == expected(pg_url)
    writers = Writers(pg_url, seed=31).start()
    time.sleep(3)
    writers.stop()
    assert sum(writers.counts.values()) > 10
    d = Daemon(args, ckpt, log).start()
    assert d.proc.wait(600) == 0, d.tail()
    d.log.close()
    got, want = materialized(pg_url), expected(pg_url)
    assert got == want, _diff(got, want)
    assert max(d.batch_sizes()) >= 2  # the catch-up came in several capped batches
    assert "stopped" in d.status_text()
    with psycopg.connect(pg_url, autocommit=True) as c:
        deadline = time.monotonic() + 10
        while _leftovers(c) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _leftovers(c) == []


@pytest.mark.spark
def test_a_failed_sink_stops_the_daemon_and_a_restart_writes_its_batch(pg_url, tmp_path):
    """A batch is in the engine's log before its sinks are written (on a background thread,
    beside the next batch). When the sink refuses a batch (someone else deleted a row of the
    sink table: its count would go negative) the daemon stops, failed, naming the cause; once
    the table is repaired, a restart writes the logged batch to the sink, without applying it
    to the engine twice, and the table equals PostgreSQL's SELECT."""
    create_tables(pg_url, seed=9)
    views = tmp_path / "views.sql"
    views.write_text(VIEWS)
    args = ["--source", pg_url, "--views", str(views), "--set-replica-identity", "--master", "local[2]"]
    ckpt, log = str(tmp_path / "ckpt"), str(tmp_path / "daemon.log")
    d = Daemon(args, ckpt, log).start()
    d.wait(lambda st: st.get("batches", 0) >= 1, 300, "the snapshot batch")
    with psycopg.connect(pg_url, autocommit=True) as c:
        row = c.execute("SELECT a, k, x, y, tag, ivm_count, ivm_key FROM v3 ORDER BY ivm_key LIMIT 1").fetchone()
        c.execute("DELETE FROM v3 WHERE ivm_key = %s", [row[-1]])       # someone else
        c.execute("DELETE FROM r WHERE a = %s AND k = %s", row[:2])      # removes that view row
    assert d.proc.wait(300) != 0, d.tail()
    d.log.close()
    st = d.status()
    assert st["state"] == "failed" and "negative count" in st["error"], st
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("INSERT INTO v3 (a, k, x, y, tag, ivm_count, ivm_key) VALUES (%s, %s, %s, %s, %s, %s, %s)", row)
    d = Daemon(args, ckpt, log).start()
    d.wait(lambda st: st.get("state") == "running", 300, "the restarted query")
    assert d.terminate() == 0, d.tail()
    got, want = materialized(pg_url), expected(pg_url)
    assert got == want, _diff(got, want)
    with open(log, errors="replace") as f:
        assert "written to the sinks again" in f.read()


@pytest.mark.spark
def test_sigterm_to_the_process_group_stops_the_daemon_cleanly(pg_url, tmp_path):
    """Issue 29 case 15: SIGTERM to the daemon's process group (a supervisor, Ctrl-C in a
    terminal) reaches Spark's JVM too; the daemon ends ``stopped`` (the running batch finished or
    abandoned), exit 0, and a restart on the same checkpoint is exact."""
    create_tables(pg_url, seed=7)
    views = tmp_path / "views.sql"
    views.write_text(VIEWS)
    args = ["--source", pg_url, "--views", str(views), "--set-replica-identity", "--master", "local[2]",
            "--trigger", "1s"]
    ckpt, log = str(tmp_path / "ckpt"), str(tmp_path / "daemon.log")
    writers = Writers(pg_url, seed=8).start()
    d = Daemon(args, ckpt, log).start()
    d.wait(lambda st: (st.get("batches") or 0) >= 2, 300, "two batches")
    assert d.terminate(group=True) == 0, d.tail()
    with open(os.path.join(ckpt, "status.json")) as f:
        assert json.load(f)["state"] == "stopped", d.tail()
    writers.stop()
    args[-2:] = ["--trigger", "available-now"]
    d = Daemon(args, ckpt, log).start()
    assert d.proc.wait(600) == 0, d.tail()
    d.log.close()
    got, want = materialized(pg_url), expected(pg_url)
    assert got == want, _diff(got, want)
