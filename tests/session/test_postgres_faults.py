"""Faults under a live PostgreSQL session, on a real server: ``pg_ctl restart -m fast``
under writers, the replication connection killed with ``pg_terminate_backend``, a slot
dropped behind the session's back, connections refused. Each ends with the views equal to
PostgreSQL's own SELECT (multisets) or a clear error naming the cause."""

from __future__ import annotations

import random
import time
from collections import Counter

import psycopg
import pytest
from test_postgres_concurrency import Q, Writers, oracle, setup_tables

import ivm_layer
from ivm_layer.errors import IVMError
from ivm_layer.session.postgres.session import ViewStoppedWarning


class RestartProofWriters(Writers):
    """Writers that reconnect when the server restarts under them (a transaction in flight
    then either committed or not: the oracle is PostgreSQL's SELECT at the end)."""

    def _run(self, i: int) -> None:
        rnd = random.Random(self.seed * 100 + i)
        base = 1000 + i * 1_000_000
        while not self.stop.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, connect_timeout=2) as conn:
                    while not self.stop.is_set():
                        base += 1
                        if rnd.random() < 0.3:
                            conn.execute("BEGIN")
                            for _ in range(rnd.randint(2, 4)):
                                base += 1
                                self._one(conn, rnd, base)
                            conn.execute("ROLLBACK" if rnd.random() < 0.3 else "COMMIT")
                        else:
                            self._one(conn, rnd, base)
                        self.committed += 1
                        time.sleep(0.005)
            except psycopg.OperationalError:
                time.sleep(0.1)                  # the server is restarting: try again


def engine_bag(s, name) -> Counter:
    return Counter({r: k for r, k in s.view(name).rows()})


def test_fast_restart_under_writers_and_a_live_session(pg_cluster, pg_url, tmp_path):
    setup_tables(pg_url)
    s = ivm_layer.connect(pg_url, state_dir=tmp_path, checkpoint_seconds=0.5)
    s.execute(f"CREATE INCREMENTAL VIEW v AS {Q}")
    s.execute(f"CREATE INCREMENTAL MATERIALIZED VIEW mv AS {Q}")
    writers = RestartProofWriters(pg_url, seed=5).start()
    try:
        for _ in range(2):
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                s.poll(0.05)
            res = pg_cluster.restart(timeout=20)     # the live session must not hold it up
            assert res.returncode == 0, res.stderr
            pg_cluster.wait_ready()
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            s.poll(0.05)
    finally:
        writers.join()
    assert writers.committed > 50
    s.sync()
    want = oracle(pg_url, Q)
    assert sum(want.values()) > 10
    assert engine_bag(s, "v") == want                            # nothing lost or doubled
    assert engine_bag(s, "mv") == want
    assert oracle(pg_url, "SELECT * FROM mv") == want
    assert Counter(s.execute("SELECT * FROM v").fetchall()) == want   # the user's connection is back
    assert s._views["v"].reader.reconnects >= 2
    s.close(drop=True)
    with psycopg.connect(pg_url, autocommit=True) as w:
        assert w.execute("SELECT count(*) FROM pg_replication_slots WHERE database = current_database()").fetchone()[0] == 0
        assert w.execute("SELECT count(*) FROM pg_publication").fetchone()[0] == 0


def _walsenders(w, like: str = "ivm_%") -> list[int]:
    return [r[0] for r in w.execute("SELECT active_pid FROM pg_replication_slots WHERE slot_name LIKE %s "
                                    "AND active_pid IS NOT NULL", [like]).fetchall()]


def test_terminated_replication_connection_reconnects(pg_url, tmp_path):
    setup_tables(pg_url)
    s = ivm_layer.connect(pg_url, state_dir=tmp_path)
    s.execute(f"CREATE INCREMENTAL VIEW v AS {Q}")
    writers = RestartProofWriters(pg_url, seed=9).start()
    w = psycopg.connect(pg_url, autocommit=True)
    try:
        for _ in range(3):
            deadline = time.monotonic() + 0.7
            while time.monotonic() < deadline:
                s.poll(0.05)
            pids = _walsenders(w)
            assert pids
            for pid in pids:
                w.execute("SELECT pg_terminate_backend(%s)", [pid])
            # the session's own connections too: the next statement reconnects
            w.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                      "AND datname = current_database() AND application_name = '' AND backend_type = 'client backend' "
                      "AND pid NOT IN (SELECT pid FROM pg_stat_activity WHERE query LIKE '%%INSERT%%' "
                      "OR query LIKE '%%UPDATE%%' OR query LIKE '%%DELETE%%')")
    finally:
        writers.join()
    s.sync()
    want = oracle(pg_url, Q)
    assert engine_bag(s, "v") == want
    assert Counter(s.execute("SELECT * FROM v").fetchall()) == want
    assert s._views["v"].reader.reconnects >= 3
    s.close(drop=True)
    w.close()


def test_slot_dropped_behind_the_sessions_back_is_a_clear_error(pg_url, tmp_path):
    setup_tables(pg_url)
    s = ivm_layer.connect(pg_url, state_dir=tmp_path)
    s.execute("CREATE INCREMENTAL VIEW gone AS SELECT a.id, a.k FROM a")
    s.execute("CREATE INCREMENTAL VIEW kept AS SELECT c.id, c.z FROM c")
    slot = s._views["gone"].slot
    w = psycopg.connect(pg_url, autocommit=True)
    deadline = time.monotonic() + 20
    while True:                          # the reader reconnects at once: drop in between
        for pid in _walsenders(w, slot):
            w.execute("SELECT pg_terminate_backend(%s)", [pid])
        try:
            w.execute("SELECT pg_drop_replication_slot(%s)", [slot])
            break
        except psycopg.errors.ObjectInUse:
            assert time.monotonic() < deadline
    w.execute("INSERT INTO a VALUES (999, 1, 1)")
    w.execute("INSERT INTO c VALUES (999, 1, 1)")
    with pytest.raises(IVMError, match=r"replication slot .* of view 'gone' was dropped.*DROP VIEW gone"):
        with pytest.warns(ViewStoppedWarning, match="'gone' stopped"):
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                s.poll(0.1)
                s.execute("SELECT count(*) FROM gone")
    assert "STOPPED" in s.explain("gone") and "missing" in s.explain("gone")
    # the other view is untouched
    s.sync()
    assert engine_bag(s, "kept") == oracle(pg_url, "SELECT c.id, c.z FROM c")
    s.execute("DROP VIEW gone")                   # the way out: its publication goes too
    assert w.execute("SELECT count(*) FROM pg_publication WHERE pubname = %s", [slot]).fetchone()[0] == 0
    s.close(drop=True)
    w.close()


def test_server_refusing_connections_gives_a_clear_error(pg_url, tmp_path):
    setup_tables(pg_url)
    s = ivm_layer.connect(pg_url, state_dir=tmp_path, reconnect_seconds=2)
    s.execute("CREATE INCREMENTAL VIEW v AS SELECT a.id FROM a")
    dbname = psycopg.conninfo.conninfo_to_dict(pg_url)["dbname"]
    with psycopg.connect(pg_url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{dbname}" ALLOW_CONNECTIONS false')
        try:
            for pid in _walsenders(admin, s._views["v"].slot):
                admin.execute("SELECT pg_terminate_backend(%s)", [pid])
            with pytest.warns(ViewStoppedWarning, match=r"view 'v'.*(not currently accepting|could not be re-established)"):
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and s._views["v"].error is None:
                    s.poll(0.1)
            with pytest.raises(IVMError, match="not currently accepting"):
                s.execute("SELECT * FROM v")
        finally:
            admin.execute(f'ALTER DATABASE "{dbname}" ALLOW_CONNECTIONS true')
    s.close(drop=True)


def test_a_consumer_far_behind_lets_go_and_never_blocks_a_shutdown(pg_cluster, pg_url, tmp_path, monkeypatch):
    from ivm_layer.session.postgres import views as pg_views

    monkeypatch.setattr(pg_views, "STAGED_CHANGES", 10)            # a stage that fills at once
    with psycopg.connect(pg_url, autocommit=True) as w:
        w.execute("CREATE TABLE t (a int)")
        w.execute("ALTER TABLE t REPLICA IDENTITY FULL")
    s = ivm_layer.connect(pg_url, state_dir=tmp_path)
    s.execute("CREATE INCREMENTAL VIEW v AS SELECT a FROM t")
    with psycopg.connect(pg_url, autocommit=True) as w:
        for i in range(200):                                        # 200 transactions, nobody polls
            w.execute("INSERT INTO t VALUES (%s)", [i])
    time.sleep(1.5)                                                 # the reader pauses
    res = pg_cluster.restart(timeout=20)
    assert res.returncode == 0, res.stderr
    pg_cluster.wait_ready()
    with psycopg.connect(pg_url, autocommit=True) as w:
        w.execute("INSERT INTO t VALUES (200)")
    s.sync()
    assert sorted(r for r, _ in s.view("v").rows()) == [(i,) for i in range(201)]
    s.close(drop=True)


def test_a_bare_replication_stream_never_blocks_a_shutdown(pg_cluster, pg_url):
    """The connector level (what the daemon uses too): a reader that has acknowledged nothing
    still lets a fast shutdown through, and then sees ConnectionLost (retryable)."""
    import threading

    from ivm_layer.io.postgres import replication as pgc

    with psycopg.connect(pg_url, autocommit=True) as w:
        w.execute("CREATE TABLE t (a int)")
        w.execute("CREATE PUBLICATION p_bare FOR TABLE t")
    rs = pgc.ReplicationStream(pg_url, status_interval=0.5)
    slot = rs.create_slot("bare_slot", export_snapshot=False)
    rs.start("bare_slot", "p_bare", slot.consistent_lsn)
    with psycopg.connect(pg_url, autocommit=True) as w:
        w.execute("INSERT INTO t VALUES (1)")
    seen: list = []
    errors: list[BaseException] = []

    def read():
        try:
            while True:
                seen.extend(rs.read(0.2))          # flushed_lsn stays at the start: nothing durable
        except BaseException as e:  # noqa: BLE001 - inspected below
            errors.append(e)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    time.sleep(1.0)
    res = pg_cluster.restart(timeout=20)
    assert res.returncode == 0, res.stderr
    t.join(20)
    assert seen and errors and pgc.is_retryable(errors[0])
    rs.close()
    pg_cluster.wait_ready()
    with psycopg.connect(pg_url, autocommit=True) as w:
        # the slot kept its position: nothing acknowledged was lost
        assert pgc.slot_lag(w, "bare_slot").confirmed_flush_lsn == slot.consistent_lsn
        w.execute("SELECT pg_drop_replication_slot('bare_slot')")
