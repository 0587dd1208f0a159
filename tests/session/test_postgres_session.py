"""PostgresSession against a real PostgreSQL 15 server: views fed by logical replication,
checked against PostgreSQL evaluating the same SELECT (multisets)."""

from __future__ import annotations

import time
import warnings
from collections import Counter

import psycopg
import pytest

import ivm_layer
from ivm_layer.errors import IVMError, SQLError
from ivm_layer.io.postgres import replication as pgc
from ivm_layer.session.postgres.session import (
    SourceChangedError,
    ViewStoppedError,
    ViewStoppedWarning,
    slot_name,
)


def writer(url):
    return psycopg.connect(url, autocommit=True)


def oracle(conn, sql) -> Counter:
    return Counter(conn.execute(sql).fetchall())


def engine_bag(s, name) -> Counter:
    return Counter({r: k for r, k in s.view(name).rows()})


@pytest.fixture
def db(pg_url, tmp_path):
    w = writer(pg_url)
    w.execute("CREATE TABLE r (a int, b int, t text)")
    w.execute("CREATE TABLE s (b int, c int, ts timestamptz, d numeric)")
    w.execute("INSERT INTO r VALUES (1, 10, 'x'), (2, 20, NULL), (3, 10, 'y')")
    w.execute("INSERT INTO s VALUES (10, 5, '2024-01-01 00:00+00', 1.5), (20, 7, NULL, NULL)")
    yield pg_url, w, tmp_path / "state"
    w.close()


def open_session(url, state, **kw):
    kw.setdefault("set_replica_identity", True)
    return ivm_layer.connect(url, state_dir=state, **kw)


Q = "SELECT r.a, r.t, s.c, s.ts, s.d FROM r JOIN s ON r.b = s.b WHERE r.a < s.c"


def test_replica_identity_is_required_or_set_with_consent(db):
    url, w, state = db
    with ivm_layer.connect(url, state_dir=state) as s:
        with pytest.raises(IVMError, match=r"REPLICA IDENTITY FULL.*set_replica_identity=True"):
            s.execute(f"CREATE INCREMENTAL VIEW v AS {Q}")
        assert s.views == []
        assert w.execute("SELECT count(*) FROM pg_replication_slots WHERE database = current_database()").fetchone()[0] == 0
    with open_session(url, state) as s:
        s.execute(f"CREATE INCREMENTAL VIEW v AS {Q}")
        assert w.execute("SELECT relreplident FROM pg_class WHERE relname = 'r'").fetchone()[0] == "f"
        s.close(drop=True)


def test_view_follows_other_clients_and_serves_selects(db):
    url, w, state = db
    with open_session(url, state) as s:
        s.execute(f"CREATE INCREMENTAL VIEW v AS {Q}")
        assert engine_bag(s, "v") == oracle(w, Q)
        assert s.execute("SELECT count(*) FROM v").fetchone() == (3,) == w.execute(f"SELECT count(*) FROM ({Q}) q").fetchone()
        w.execute("INSERT INTO r VALUES (4, 20, 'z')")
        n = 0
        deadline = time.monotonic() + 10
        while n == 0 and time.monotonic() < deadline:
            n += s.poll(0.5)                         # another client's commit arrives
        assert n == 1
        assert engine_bag(s, "v") == oracle(w, Q)
        w.execute("UPDATE r SET b = 20 WHERE a = 1")                    # join key change
        w.execute("DELETE FROM s WHERE c = 5")
        w.execute("BEGIN; INSERT INTO s VALUES (10, 100, NULL, 2); ROLLBACK")
        s.sync()
        assert engine_bag(s, "v") == oracle(w, Q)
        # writes through the session are visible to its next SELECT (read your writes)
        s.execute("INSERT INTO s VALUES (10, 100, now(), 2.5)")
        got = Counter(s.execute("SELECT * FROM v").fetchall())
        assert got == oracle(w, Q)
        assert s.execute("SELECT a FROM v WHERE t = 'y' ORDER BY a").fetchall() == [(3,)]
        # SELECTs of ordinary tables go to PostgreSQL
        assert s.execute("SELECT count(*) FROM r").fetchone() == (4,)
        s.close(drop=True)


def test_materialized_view_table_and_progress_in_one_transaction(db):
    url, w, state = db
    with open_session(url, state) as s:
        s.execute(f"CREATE INCREMENTAL MATERIALIZED VIEW mv AS {Q}")
        assert oracle(w, "SELECT * FROM mv") == oracle(w, Q)
        w.execute("INSERT INTO r SELECT i, 10 + 10 * (i % 2), 'n' FROM generate_series(5, 60) i")
        w.execute("UPDATE s SET c = c + 50")
        s.sync()
        assert oracle(w, "SELECT * FROM mv") == oracle(w, Q)
        assert sum(oracle(w, Q).values()) > 30
        info = s.info("mv")[0]
        assert info.kind == "materialized" and info.rows == sum(oracle(w, Q).values())
        lsn = w.execute("SELECT lsn FROM ivm.progress WHERE slot = %s", [slot_name(w.info.dbname, "default", "mv")]).fetchone()[0]
        assert lsn == s._views["mv"].table_lsn > 0
        s.close(drop=True)
    assert w.execute("SELECT to_regclass('public.mv')").fetchone()[0] is None


def test_truncate_and_alter_table(db):
    url, w, state = db
    with open_session(url, state) as s:
        s.execute("CREATE INCREMENTAL VIEW v AS SELECT r.a, s.c FROM r JOIN s ON r.b = s.b")
        q = "SELECT r.a, s.c FROM r JOIN s ON r.b = s.b"
        w.execute("TRUNCATE s")
        s.sync()
        assert len(s.view("v")) == 0
        w.execute("INSERT INTO s VALUES (10, 1, NULL, NULL)")
        # columns the view does not use may change
        w.execute("ALTER TABLE s ADD COLUMN extra text")
        w.execute("ALTER TABLE s DROP COLUMN ts")
        w.execute("INSERT INTO s VALUES (20, 2, 9, 'e')")
        w.execute("UPDATE s SET extra = 'u'")
        s.sync()
        assert engine_bag(s, "v") == oracle(w, q) and len(s.view("v")) == 3
        # a used column changing type stops the view with a clear error, never a wrong answer
        w.execute("ALTER TABLE s ALTER COLUMN c TYPE text")
        w.execute("INSERT INTO s VALUES (10, 'x', 1, NULL)")
        with pytest.warns(ViewStoppedWarning, match=r"s\.c used by view 'v' changed type"):
            s.sync()
        with pytest.raises(ViewStoppedError, match=r"s\.c used by view 'v' changed type") as ei:
            s.execute("SELECT * FROM v")
        assert isinstance(ei.value.__cause__, SourceChangedError)
        assert "STOPPED" in s.explain("v")
        s.execute("DROP VIEW v")                     # the way out
        assert s.views == []
        s.close(drop=True)


def test_restart_resumes_from_checkpoint_without_duplicates(db):
    url, w, state = db
    s = open_session(url, state, session="app")
    s.execute(f"CREATE INCREMENTAL VIEW v AS {Q}")
    s.execute(f"CREATE INCREMENTAL MATERIALIZED VIEW mv AS {Q}")
    w.execute("INSERT INTO r VALUES (5, 10, 'a')")
    s.sync()
    s.close()
    slot = slot_name(w.info.dbname, "app", "v")
    assert pgc.slot_exists(w, slot)                           # the slot outlives the session
    w.execute("INSERT INTO r VALUES (6, 20, 'b')")            # while nobody listens
    w.execute("DELETE FROM r WHERE a = 1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")                        # no rebuild: a real resume
        s = open_session(url, state, session="app")
    assert s.views == ["mv", "v"]
    s.sync()
    assert engine_bag(s, "v") == oracle(w, Q)
    assert oracle(w, "SELECT * FROM mv") == oracle(w, Q)
    # another session name does not see these views
    with open_session(url, state, session="other") as o:
        assert o.views == []
    s.close(drop=True)
    assert not pgc.slot_exists(w, slot)
    assert w.execute("SELECT count(*) FROM ivm.views").fetchone()[0] == 0
    assert w.execute("SELECT count(*) FROM pg_publication").fetchone()[0] == 0
    assert not any(state.glob("*.snap")) and not any(state.glob("*.log"))


def test_lost_checkpoint_rebuilds_from_a_fresh_snapshot(db):
    url, w, state = db
    s = open_session(url, state)
    s.execute(f"CREATE INCREMENTAL MATERIALIZED VIEW mv AS {Q}")
    s.close()
    for f in state.glob("*.snap"):
        f.unlink()
    w.execute("INSERT INTO r VALUES (5, 10, 'a')")
    with pytest.warns(UserWarning, match="no usable checkpoint file.*rebuilding"):
        s = open_session(url, state)
    s.sync()
    assert engine_bag(s, "mv") == oracle(w, Q) == oracle(w, "SELECT * FROM mv")
    s.close(drop=True)


def test_drop_view_info_explain_tables_and_errors(db):
    url, w, state = db
    s = open_session(url, state)
    s.execute(f"CREATE INCREMENTAL VIEW v AS {Q}")
    with pytest.raises(SQLError, match="already exists"):
        s.execute(f"CREATE INCREMENTAL VIEW v AS {Q}")
    s.execute(f"CREATE INCREMENTAL VIEW IF NOT EXISTS v AS {Q}")
    with pytest.raises(SQLError, match="unknown table"):
        s.execute("CREATE INCREMENTAL VIEW bad AS SELECT * FROM nope")
    with pytest.raises(IVMError, match="read by incremental view"):
        s.execute("DROP TABLE r")
    s.execute("BEGIN")
    with pytest.raises(IVMError, match="explicit transaction"):
        s.execute(f"CREATE INCREMENTAL VIEW v2 AS {Q}")
    s.execute("ROLLBACK")
    w.execute("INSERT INTO r SELECT i, 10, 'lag' FROM generate_series(100, 2100) i")
    time.sleep(0.5)                                   # arrived (queued) but not applied
    behind = s.info("v")[0]
    assert behind.lag_bytes > 10_000 and behind.lag_seconds > 0.3
    s.sync()
    info = s.info("v")[0]
    assert 0 <= info.lag_bytes < 1 << 20 and info.lag_seconds == 0.0
    assert info.tables == ("r", "s") and info.columns == ("a", "t", "c", "ts", "d")
    assert info.types[3] == "timestamp with time zone"
    text = s.explain("v")
    assert slot_name(w.info.dbname, "default", "v") in text and "lag:" in text
    assert s.tables()["v"] == ["a", "t", "c", "ts", "d"] and s.tables()["r"] == ["a", "b", "t"]
    changes = []
    unsub = s.subscribe("v", changes.append)
    w.execute("INSERT INTO r VALUES (0, 10, 'sub')")
    s.sync()
    unsub()
    assert [(r[0], k) for ch in changes for r, k in ch] == [(0, 1)]
    slot = slot_name(w.info.dbname, "default", "v")
    s.execute("DROP VIEW v")
    assert not pgc.slot_exists(w, slot)
    assert s.views == []
    s.close()
    with pytest.raises(IVMError, match="closed"):
        s.execute("SELECT 1")


def test_source_table_dropped_by_another_client_stops_the_view(db):
    url, w, state = db
    with open_session(url, state) as s:
        s.execute("CREATE INCREMENTAL VIEW v AS SELECT r.a FROM r")
        w.execute("DROP TABLE r")                  # leaves the publication silently
        with pytest.warns(ViewStoppedWarning, match="'r' of view 'v' was dropped"):
            s.sync()
        with pytest.raises(ViewStoppedError, match="'r' of view 'v' was dropped"):
            s.execute("SELECT * FROM v")
        s.close(drop=True)


def test_source_table_recreated_while_closed_is_rebuilt(db):
    url, w, state = db
    s = open_session(url, state)
    s.execute("CREATE INCREMENTAL VIEW v AS SELECT r.a, r.b FROM r")
    s.close()
    w.execute("DROP TABLE r")
    w.execute("CREATE TABLE r (a int, b int)")
    w.execute("INSERT INTO r VALUES (7, 7)")
    with pytest.warns(UserWarning, match="re-created"):
        s = open_session(url, state)
    w.execute("INSERT INTO r VALUES (8, 8)")
    s.sync()
    assert engine_bag(s, "v") == oracle(w, "SELECT a, b FROM r")
    s.close(drop=True)


def test_lag_warning(db):
    url, w, state = db
    from ivm_layer.session.postgres.session import LagWarning

    with open_session(url, state, lag_warning_bytes=1) as s:
        s.execute("CREATE INCREMENTAL VIEW v AS SELECT r.a FROM r")
        w.execute("INSERT INTO r SELECT i, i, 'w' FROM generate_series(1, 100) i")
        with pytest.warns(LagWarning, match="retains .* of WAL"):
            s.poll(0.5)
        s.close(drop=True)


def test_two_materialized_views_with_arrays_jsonb_duplicates_and_nulls(db):
    url, w, state = db
    w.execute("CREATE TABLE doc (id int, tags text[], body jsonb, grp int)")
    w.execute("INSERT INTO doc VALUES (1, '{a,b}', '{\"x\": 1}', 10), (1, '{a,b}', '{\"x\": 1}', 10), "
              "(2, NULL, NULL, 20), (3, '{}', '[1, 2]', NULL)")
    qd = "SELECT doc.id, doc.tags, doc.body, r.a FROM doc JOIN r ON doc.grp = r.b"
    qd_text = "SELECT id, tags::text, body::text, a FROM ({q}) x"
    with open_session(url, state) as s:
        s.execute(f"CREATE INCREMENTAL MATERIALIZED VIEW m1 AS {Q}")
        s.execute(f"CREATE INCREMENTAL MATERIALIZED VIEW m2 AS {qd}")
        s.execute(f"CREATE INCREMENTAL VIEW v2 AS {qd}")
        w.execute("DELETE FROM r WHERE a = 2")
        w.execute("INSERT INTO r VALUES (9, 10, NULL), (9, 10, NULL)")           # duplicates
        w.execute("UPDATE doc SET body = '{\"x\": 2}' WHERE id = 1")
        w.execute("DELETE FROM s WHERE c = 5")
        s.sync()
        assert oracle(w, "SELECT * FROM m1") == oracle(w, Q)
        want = oracle(w, qd_text.format(q=qd))
        assert sum(want.values()) == 8 and max(want.values()) == 4      # duplicates on both sides
        assert oracle(w, qd_text.format(q="SELECT * FROM m2")) == want
        got = Counter(s.execute(qd_text.format(q="SELECT * FROM v2")).fetchall())
        assert got == want
        s.close(drop=True)


def test_join_using_and_self_join(db):
    url, w, state = db
    q = "SELECT r1.a, r2.a AS a2, s.c FROM r r1 JOIN s USING (b) JOIN r r2 ON r2.b = s.b WHERE r1.a < r2.a"
    with open_session(url, state) as s:
        s.execute(f"CREATE INCREMENTAL VIEW j AS {q}")
        w.execute("INSERT INTO r VALUES (5, 10, NULL), (6, 20, 'q')")
        w.execute("UPDATE r SET b = 20 WHERE a = 3")
        s.sync()
        assert engine_bag(s, "j") == oracle(w, q) and len(s.view("j")) > 0
        s.close(drop=True)


def test_grouped_views_from_the_stream(db):
    url, w, state = db
    q = ("SELECT r.b, COUNT(*) AS n, SUM(s.d) AS total, AVG(r.a) AS avg_a, MIN(s.c) AS lo "
         "FROM r JOIN s ON r.b = s.b GROUP BY r.b")
    glob = "SELECT COUNT(*) AS n, SUM(s.d) AS t FROM s"
    with open_session(url, state) as s:
        s.execute(f"CREATE INCREMENTAL MATERIALIZED VIEW g AS {q}")
        s.execute(f"CREATE INCREMENTAL VIEW h AS {glob}")
        w.execute("INSERT INTO s VALUES (10, 2, NULL, 7.25), (20, 9, NULL, 0.5)")
        w.execute("DELETE FROM r WHERE a = 1")
        w.execute("UPDATE s SET c = 1, d = 2.75 WHERE c = 5")
        w.execute("DELETE FROM s WHERE c = 7")
        s.sync()
        # the engine's rows, the served SELECT and the materialized table equal PostgreSQL's
        # (Decimal results compare equal whatever their scale: 2.0 == 2.0000000000000000)
        want = oracle(w, q)
        assert engine_bag(s, "g") == want and sum(want.values()) == 2
        assert Counter(w.execute("SELECT * FROM g").fetchall()) == want
        assert Counter(s.execute("SELECT * FROM h").fetchall()) == oracle(w, glob)
        assert s.info("g")[0].types == ("integer", "bigint", "numeric", "numeric", "integer")
