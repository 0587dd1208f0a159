"""One view's trouble stays its own (PostgreSQL sessions, real server): a stopped view
reports its error on its own reads while the others keep working; dropping a column a view
does not use stops nothing; driver exceptions never reach the user; NaN rows update."""

from __future__ import annotations

import math
import time
import warnings
from collections import Counter

import psycopg
import pytest

import ivm_layer
from ivm_layer.errors import IVMError
from ivm_layer.session.postgres.session import ViewStoppedError, ViewStoppedWarning


def bag(s, name) -> Counter:
    return Counter({r: k for r, k in s.view(name).rows()})


@pytest.fixture
def env(pg_url, tmp_path):
    w = psycopg.connect(pg_url, autocommit=True)
    w.execute("CREATE TABLE r (a int, b int, t text, f float8)")
    w.execute("CREATE TABLE s (b int, c int)")
    w.execute("INSERT INTO r VALUES (1, 10, 'x', 'NaN'), (2, 20, 'y', 1.5)")
    w.execute("INSERT INTO s VALUES (10, 5), (20, 7)")
    s = ivm_layer.connect(pg_url, state_dir=tmp_path / "state", set_replica_identity=True)
    yield s, w, pg_url
    s.close(drop=True)
    w.close()


def test_a_stopped_view_fails_alone(env):
    s, w, _ = env
    s.execute("CREATE INCREMENTAL VIEW uses_t AS SELECT r.a, r.t FROM r")
    s.execute("CREATE INCREMENTAL VIEW n AS SELECT COUNT(*) AS n FROM r")          # COUNT(*) reads no column
    s.execute("CREATE INCREMENTAL VIEW j AS SELECT r.a, s.c FROM r JOIN s ON r.b = s.b")
    w.execute("ALTER TABLE r DROP COLUMN t")                 # used by uses_t only
    w.execute("INSERT INTO r VALUES (3, 10, 'NaN')")
    with pytest.warns(ViewStoppedWarning, match="r.t used by view 'uses_t' was dropped"):
        s.sync()                                             # no exception: the others are fine
    with pytest.raises(ViewStoppedError, match="uses_t"):
        s.execute("SELECT * FROM uses_t")
    with pytest.raises(ViewStoppedError):
        s.view("uses_t")
    assert s.execute("SELECT n FROM n").fetchone() == (3,)
    assert Counter(s.execute("SELECT * FROM j").fetchall()) == Counter(
        w.execute("SELECT r.a, s.c FROM r JOIN s ON r.b = s.b").fetchall())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s.poll(0.1)
        w.execute("DELETE FROM r WHERE a = 1")
        s.sync()
    assert s.execute("SELECT n FROM n").fetchone() == (2,)
    assert "STOPPED" in s.explain("uses_t") and "STOPPED" not in s.explain("n")
    s.execute("DROP VIEW uses_t")


def test_nan_rows_update_and_delete(env):
    s, w, _ = env
    s.execute("CREATE INCREMENTAL VIEW v AS SELECT r.a, r.f FROM r")
    w.execute("UPDATE r SET a = a + 100")                    # the NaN row's old image must be found
    w.execute("UPDATE r SET f = 'Infinity' WHERE a = 102")
    s.sync()
    rows = sorted(s.view("v").rows())
    assert [(r[0], k) for r, k in rows] == [(101, 1), (102, 1)]
    assert math.isnan(rows[0][0][1]) and rows[1][0][1] == math.inf
    w.execute("DELETE FROM r WHERE a = 101")
    s.sync()
    assert [r for r, _ in s.view("v").rows()] == [(102, math.inf)]


def test_privileges_and_engine_failures_are_clear_errors(env):
    s, w, url = env
    w.execute("CREATE ROLE ivm_app LOGIN REPLICATION")
    w.execute("GRANT CREATE ON DATABASE " + w.info.dbname + " TO ivm_app")
    w.execute("GRANT USAGE, CREATE ON SCHEMA public TO ivm_app")
    w.execute("CREATE SCHEMA IF NOT EXISTS ivm")
    w.execute("GRANT ALL ON SCHEMA ivm TO ivm_app")
    w.execute("CREATE TABLE IF NOT EXISTS ivm.views (session text NOT NULL, name text NOT NULL, kind text NOT NULL, "
              "definition text NOT NULL, slot text NOT NULL, PRIMARY KEY (session, name))")
    w.execute("CREATE TABLE IF NOT EXISTS ivm.progress (slot text PRIMARY KEY, lsn bigint NOT NULL)")
    w.execute("GRANT ALL ON ivm.views, ivm.progress TO ivm_app")
    w.execute("CREATE TABLE secret (x int)")                  # owned by the superuser, no grant
    app_url = url.replace("postgres@", "ivm_app@", 1)
    with ivm_layer.connect(app_url, state_dir=s.state_dir.parent / "app", session="app",
                           set_replica_identity=True) as a:
        with pytest.raises(IVMError, match="permission denied") as ei:
            a.execute("CREATE INCREMENTAL VIEW sv AS SELECT x FROM secret")
        assert not isinstance(ei.value, psycopg.Error)
        w.execute("GRANT SELECT ON secret TO ivm_app")
        with pytest.raises(IVMError, match="must be owner|permission denied") as ei:
            a.execute("CREATE INCREMENTAL VIEW sv AS SELECT x FROM secret")
        assert not isinstance(ei.value, psycopg.Error)
        assert a.views == []
        with pytest.raises(IVMError, match="must be owner"):
            a.execute("DROP TABLE secret")  # PostgreSQL's own error, as an SQLError
    w.execute("CREATE TABLE p (id int, price numeric(12,2))")
    w.execute("CREATE TABLE q (id int, lim numeric(12,2))")
    w.execute("INSERT INTO p VALUES (1, 10.25), (2, 10.75)")
    w.execute("INSERT INTO q VALUES (1, 10.50)")
    # DECIMAL compared with a fractional offset (PostgreSQL's numeric semantics)
    dq = "SELECT p.id FROM p JOIN q ON p.id = q.id WHERE p.price < q.lim + 0.5"
    s.execute(f"CREATE INCREMENTAL VIEW dec AS {dq}")
    w.execute("INSERT INTO p VALUES (1, 10.9), (1, 11.0), (1, 10.99)")
    w.execute("UPDATE q SET lim = lim + 0.01")
    s.sync()
    assert bag(s, "dec") == Counter(w.execute(dq).fetchall()) == Counter({(1,): 4})


def test_publication_altered_and_a_200k_row_transaction(env):
    s, w, _ = env
    s.execute("CREATE INCREMENTAL VIEW cnt AS SELECT COUNT(*) AS n FROM r")
    s.execute("CREATE INCREMENTAL VIEW j AS SELECT s.b, s.c FROM s")
    w.execute("INSERT INTO r SELECT i, i % 3, NULL, i / 7.0 FROM generate_series(1, 200000) i")
    s.sync()
    assert s.execute("SELECT * FROM cnt").fetchone() == w.execute("SELECT COUNT(*) FROM r").fetchone() == (200002,)
    w.execute("ALTER PUBLICATION " + s._views["j"].slot + " DROP TABLE s")
    with pytest.warns(ViewStoppedWarning, match="no longer publishes table 's'"):
        s.sync()
    with pytest.raises(ViewStoppedError, match="ALTER PUBLICATION"):
        s.execute("SELECT * FROM j")
    w.execute("DELETE FROM r WHERE a > 100")
    s.sync()
    assert s.execute("SELECT * FROM cnt").fetchone() == w.execute("SELECT COUNT(*) FROM r").fetchone()


def test_publication_dropped_behind_the_sessions_back(env):
    s, w, _ = env
    s.execute("CREATE INCREMENTAL VIEW gone AS SELECT s.b FROM s")
    s.execute("CREATE INCREMENTAL VIEW kept AS SELECT r.a FROM r")
    w.execute("DROP PUBLICATION " + s._views["gone"].slot)
    w.execute("INSERT INTO s VALUES (30, 9)")
    w.execute("INSERT INTO r VALUES (5, 30, 'z', 0)")
    with pytest.warns(ViewStoppedWarning, match="publication .* of view 'gone'"):
        s.sync()
    with pytest.raises(ViewStoppedError, match="publication"):
        s.execute("SELECT * FROM gone")
    assert sorted(r[0] for r, _ in s.view("kept").rows()) == [1, 2, 5]
    s.execute("DROP VIEW gone")
    assert not w.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name LIKE %s",
                         ["%gone%"]).fetchone()


def test_an_idle_view_lets_its_slot_advance(pg_url, tmp_path):
    """WAL of tables a view does not read is acknowledged once the view has applied all it
    received, so the slot does not retain it; a resume after that is exact."""
    from ivm_layer.io.postgres import replication as pgc

    w = psycopg.connect(pg_url, autocommit=True)
    w.execute("CREATE TABLE mine (a int)")
    w.execute("CREATE TABLE other (a int)")
    w.execute("ALTER TABLE mine REPLICA IDENTITY FULL")
    s = ivm_layer.connect(pg_url, state_dir=tmp_path, checkpoint_seconds=0.1)
    s.execute("CREATE INCREMENTAL VIEW v AS SELECT a FROM mine")
    slot = s._views["v"].slot
    start = pgc.slot_lag(w, slot).confirmed_flush_lsn
    w.execute("INSERT INTO other SELECT generate_series(1, 20000)")       # WAL that is not the view's
    w.execute("INSERT INTO mine VALUES (1)")
    w.execute("INSERT INTO other SELECT generate_series(1, 20000)")
    end = pgc.current_wal_lsn(w)
    deadline = time.monotonic() + 20
    while pgc.slot_lag(w, slot).confirmed_flush_lsn < end and time.monotonic() < deadline:
        s.poll(0.2)
    assert pgc.slot_lag(w, slot).confirmed_flush_lsn >= end > start
    s.close()
    w.execute("INSERT INTO mine VALUES (2)")
    with warnings.catch_warnings():
        warnings.simplefilter("error")                                    # a resume, not a rebuild
        s = ivm_layer.connect(pg_url, state_dir=tmp_path)
    s.sync()
    assert sorted(r for r, _ in s.view("v").rows()) == [(1,), (2,)]
    s.close(drop=True)
    w.close()


def test_a_raising_subscriber_stops_nothing(pg_url, tmp_path):
    """Subscribers hear each committed change once; one that raises becomes a SubscriberWarning
    and the view keeps following the stream."""
    import psycopg

    import ivm_layer
    from ivm_layer.session.core import SubscriberWarning

    w = psycopg.connect(pg_url, autocommit=True)
    w.execute("CREATE TABLE sub_t (a int)")
    s = ivm_layer.connect(pg_url, state_dir=tmp_path / "st", set_replica_identity=True)
    s.execute("CREATE INCREMENTAL VIEW sub_v AS SELECT a FROM sub_t WHERE a > 0")
    heard = []

    def bad(change):
        heard.append(change)
        raise RuntimeError("subscriber bug")

    s.subscribe("sub_v", bad)
    w.execute("INSERT INTO sub_t VALUES (1), (2), (-3)")
    with pytest.warns(SubscriberWarning, match="subscriber bug"):
        s.sync()
    assert sorted(heard[0]) == [((1,), 1), ((2,), 1)]
    w.execute("INSERT INTO sub_t VALUES (4)")
    with pytest.warns(SubscriberWarning):
        s.sync()
    assert sorted(r for r, _ in s.view("sub_v").rows()) == [(1,), (2,), (4,)]
    assert s.info("sub_v")[0].kind == "incremental"
    s.close(drop=True)
    w.close()


def test_engine_level_subscribers_go_the_sessions_way(pg_url, tmp_path):
    """A callback on the engine view (``s.view(name).subscribe``) is told through the same
    road as the session's subscribers — after the batch is applied and its table written —
    and one that raises is a SubscriberWarning: the view keeps following the stream."""
    import psycopg

    import ivm_layer
    from ivm_layer.errors import SubscriberWarning

    w = psycopg.connect(pg_url, autocommit=True)
    w.execute("CREATE TABLE esub_t (a int)")
    s = ivm_layer.connect(pg_url, state_dir=tmp_path / "st", set_replica_identity=True)
    s.execute("CREATE INCREMENTAL MATERIALIZED VIEW esub_v AS SELECT a FROM esub_t WHERE a > 0")
    heard = []

    def bad(change):
        heard.append(sorted(change))
        raise RuntimeError("engine subscriber bug")

    s.view("esub_v").subscribe(bad)
    w.execute("INSERT INTO esub_t VALUES (1), (2), (-3)")
    with pytest.warns(SubscriberWarning, match="engine subscriber bug"):
        s.sync()
    assert heard == [[((1,), 1), ((2,), 1)]]
    assert sorted(w.execute("SELECT a FROM esub_v").fetchall()) == [(1,), (2,)]   # the table was written
    w.execute("DELETE FROM esub_t WHERE a = 1")
    with pytest.warns(SubscriberWarning):
        s.sync()
    assert heard[-1] == [((1,), -1)]
    assert sorted(r for r, _ in s.view("esub_v").rows()) == [(2,)]
    s.close(drop=True)
    w.close()
