"""Fault suite, sessions (issue 29): writes and statements that used to leave views stale or raise
raw exceptions. Each test states the expected outcome: the views equal their SELECT, or a named
``ivm_layer`` error and nothing half-applied."""

from __future__ import annotations

from collections import Counter

import psycopg
import pytest

import ivm_layer
from ivm_layer.errors import IVMError


def _bag(s, view):
    return Counter(r for r, k in s.view(view).rows() for _ in range(k))


def _table(s, sql):
    return Counter(s.connection.execute(sql).fetchall())


@pytest.mark.parametrize("write", [
    "INSERT INTO memory.main.r VALUES (7, 7)",
    "INSERT INTO memory.r VALUES (7, 7)",
    "INSERT INTO main.r VALUES (7, 7)",
    'INSERT INTO "memory"."main"."r" VALUES (7, 7)',
    "DELETE FROM memory.r WHERE a = 1",
    "DELETE FROM memory.main.r WHERE a = 1",
    "UPDATE main.r SET b = b + 10 WHERE a = 1",
    "UPDATE memory.main.r SET b = b + 10",
    'UPDATE "main".r SET b = 0',
    "TRUNCATE memory.main.r",
    "INSERT INTO memory.main.r SELECT a + 1, b FROM r",
])
def test_case3_qualified_writes_are_captured_without_sync(write):
    """Issue 29 case 3: writes naming the catalog or schema change the views at once."""
    s = ivm_layer.connect()
    s.execute("CREATE TABLE r (a INT, b INT)")
    s.execute("INSERT INTO r VALUES (1, 1), (2, 2)")
    s.execute("CREATE INCREMENTAL VIEW v AS SELECT a, b FROM r")
    s.execute("CREATE INCREMENTAL MATERIALIZED VIEW m AS SELECT a, count(*) AS n FROM r GROUP BY a")
    s.execute(write)
    assert _bag(s, "v") == _table(s, "SELECT a, b FROM r")       # no sync()
    assert _table(s, "SELECT * FROM m") == _table(s, "SELECT a, count(*) FROM r GROUP BY a")
    s.close()


def test_case3_a_file_database_catalog_name(tmp_path):
    s = ivm_layer.connect(str(tmp_path / "shop.duckdb"))
    s.execute("CREATE TABLE r (a INT, b INT)")
    s.execute("CREATE INCREMENTAL VIEW v AS SELECT a, b FROM r")
    s.execute("INSERT INTO shop.main.r VALUES (1, 2)")
    s.execute("INSERT INTO shop.r VALUES (3, 4)")
    assert _bag(s, "v") == Counter({(1, 2): 1, (3, 4): 1})
    with pytest.raises(IVMError, match="v"):  # a tracked table is protected under every spelling
        s.execute("DROP TABLE shop.main.r")
    s.close()


def test_case3_other_catalogs_are_left_alone(tmp_path):
    s = ivm_layer.connect()
    s.execute("CREATE TABLE r (a INT, b INT)")
    s.execute("CREATE INCREMENTAL VIEW v AS SELECT a, b FROM r")
    s.execute(f"ATTACH '{tmp_path / 'other.duckdb'}' AS other")
    s.execute("CREATE TABLE other.r (a INT, b INT)")
    s.execute("INSERT INTO other.r VALUES (5, 5)")          # another database's r: not the view's
    s.execute("INSERT INTO other.main.r VALUES (6, 6)")
    assert _bag(s, "v") == Counter()
    s.close()


def test_case3_postgres_qualified_names_name_the_tracked_table(pg_url):
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("CREATE TABLE r (a int, b int)")
        db = c.execute("SELECT current_database()").fetchone()[0]
    s = ivm_layer.connect(pg_url, set_replica_identity=True)
    try:
        s.execute("CREATE INCREMENTAL VIEW v AS SELECT a, b FROM r")
        s.execute(f"INSERT INTO {db}.public.r VALUES (1, 2)")
        s.execute("INSERT INTO public.r VALUES (3, 4)")
        s.sync()
        assert _bag(s, "v") == Counter({(1, 2): 1, (3, 4): 1})
        for drop in (f"DROP TABLE {db}.public.r", "DROP TABLE public.r"):
            with pytest.raises(IVMError, match="v"):
                s.execute(drop)
    finally:
        s.close()


def test_case12_a_failing_copy_reports_its_own_error():
    s = ivm_layer.connect()
    s.execute("CREATE TABLE r (a INT, b INT)")
    s.execute("CREATE INCREMENTAL VIEW v AS SELECT a, b FROM r")
    for block in (False, True):
        if block:
            s.execute("BEGIN")
        with pytest.raises(Exception, match="(?i)no files found") as info:
            s.execute("COPY r FROM '/nonexistent/x.csv'")
        assert "aborted" not in str(info.value)
        if block:
            s.execute("ROLLBACK")
    s.execute("INSERT INTO r VALUES (1, 2)")   # the session is usable, the view exact
    assert _bag(s, "v") == Counter({(1, 2): 1})
    s.close()


@pytest.mark.parametrize("stmt", ["ALTER VIEW v RENAME TO w", "ALTER VIEW IF EXISTS v RENAME TO w",
                                  "ALTER TABLE v RENAME TO w", "ALTER TABLE m RENAME TO w"])
def test_case14_altering_an_incremental_view_is_refused(stmt):
    s = ivm_layer.connect()
    s.execute("CREATE TABLE r (a INT, b INT)")
    s.execute("CREATE INCREMENTAL VIEW v AS SELECT a, b FROM r")
    s.execute("CREATE INCREMENTAL MATERIALIZED VIEW m AS SELECT a FROM r")
    with pytest.raises(IVMError, match="cannot be altered or renamed"):
        s.execute(stmt)
    s.execute("INSERT INTO r VALUES (1, 2)")
    assert s.execute("SELECT * FROM v").fetchall() == [(1, 2)]
    assert s.execute("SELECT * FROM m").fetchall() == [(1,)]
    s.close()


def test_case14_and_17_postgres(pg_url):
    """ALTER VIEW of an incremental view is refused; a view dropped and created again with other
    column types reads back (no 'cached plan must not change result type' from a plan psycopg
    prepared for the old view)."""
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("CREATE TABLE r (a int, b int, c text)")
        c.execute("INSERT INTO r VALUES (1, 2, 'x')")
    s = ivm_layer.connect(pg_url, set_replica_identity=True)
    reads = ["SELECT * FROM v ORDER BY 1", "SELECT v.* FROM v, r WHERE r.a = 1", "SELECT * FROM v"]
    try:
        for kind in ("", "MATERIALIZED "):
            s.execute(f"CREATE INCREMENTAL {kind}VIEW v AS SELECT a, b FROM r")
            with pytest.raises(IVMError, match="cannot be altered or renamed"):
                s.execute("ALTER VIEW v RENAME TO w")
            for q in reads:
                for _ in range(7):  # psycopg prepares a statement run 5 times
                    assert s.execute(q).fetchall() == [(1, 2)]
            s.execute("DROP VIEW v")
            s.execute(f"CREATE INCREMENTAL {kind}VIEW v AS SELECT c, a FROM r")
            for q in reads:
                for _ in range(7):
                    assert s.execute(q).fetchall() == [("x", 1)]
            s.execute("DROP VIEW v")
    finally:
        s.close()


def test_case9_hugeint_values_beyond_38_digits_read_back():
    """HUGEINT/UHUGEINT reach 39 digits, past Arrow's decimal128(38) that DuckDB exports them
    as: served, MATERIALIZED and aggregate views keep reading them (they were poisoned)."""
    s = ivm_layer.connect(":memory:")
    s.execute("CREATE TABLE t(g INT, v HUGEINT, u UHUGEINT)")
    s.execute("CREATE INCREMENTAL VIEW w AS SELECT g, v, u FROM t")
    s.execute("CREATE INCREMENTAL MATERIALIZED VIEW wm AS SELECT g, v, u FROM t")
    s.execute("CREATE INCREMENTAL VIEW a AS SELECT g, sum(v) AS sv, count(*) AS c FROM t GROUP BY g")
    big, ubig = 2 ** 127 - 1, 2 ** 128 - 1
    s.execute(f"INSERT INTO t VALUES (1, {big}, {ubig}), (1, -{big}, 0), (2, NULL, NULL), (3, 10::HUGEINT ** 38, 1)")
    want = s.execute("SELECT g, v, u FROM t ORDER BY ALL").fetchall()
    assert (1, big, ubig) in want
    for v in ("w", "wm"):
        assert s.execute(f"SELECT g, v, u FROM {v} ORDER BY ALL").fetchall() == want
        assert s.execute(f"SELECT typeof(v), typeof(u) FROM {v} LIMIT 1").fetchall() == [("HUGEINT", "UHUGEINT")]
    assert (s.execute("SELECT * FROM a ORDER BY g").fetchall()
            == s.execute("SELECT g, sum(v), count(*) FROM t GROUP BY g ORDER BY g").fetchall())
    s.execute(f"DELETE FROM t WHERE v = {big}")
    assert s.execute("SELECT g, v, u FROM w ORDER BY ALL").fetchall() == s.execute(
        "SELECT g, v, u FROM t ORDER BY ALL").fetchall()


def _writing_subscriber_round(s, engine_level: bool):
    """A subscriber of ``v`` that writes through its own session into ``log`` (read by ``lv``):
    in autocommit and inside a block; every write lands once and every view follows. (On
    PostgreSQL the stream may hand both commits over as one batch: one notification of 3 rows.)"""
    def cb(change):
        s.execute("INSERT INTO log VALUES (%d)" % len(list(change)))

    if engine_level:
        s.view("v").subscribe(cb)
    else:
        s.subscribe("v", cb)
    s.execute("INSERT INTO t VALUES (1)")
    s.execute("BEGIN")
    s.execute("INSERT INTO t VALUES (2), (3)")
    s.execute("COMMIT")
    s.sync()
    logged = sorted(s.execute("SELECT n FROM log").fetchall())
    assert logged in ([(1,), (2,)], [(3,)])
    assert _bag(s, "v") == Counter([(1,), (2,), (3,)])
    s.sync()
    assert _bag(s, "lv") == Counter(logged)


@pytest.mark.parametrize("engine_level", [False, True])
def test_case8_a_subscriber_writes_through_its_own_session(engine_level):
    s = ivm_layer.connect(":memory:")
    s.execute("CREATE TABLE t(a INT)")
    s.execute("CREATE TABLE log(n INT)")
    s.execute("CREATE INCREMENTAL VIEW v AS SELECT a FROM t")
    s.execute("CREATE INCREMENTAL VIEW lv AS SELECT n FROM log")
    _writing_subscriber_round(s, engine_level)
    s.close()


@pytest.mark.parametrize("engine_level", [False, True])
def test_case8_postgres(pg_url, engine_level):
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS t, log")
        c.execute("CREATE TABLE t (a int)")
        c.execute("CREATE TABLE log (n int)")
    s = ivm_layer.connect(pg_url, set_replica_identity=True, session=f"c8{int(engine_level)}")
    try:
        s.execute("CREATE INCREMENTAL VIEW v AS SELECT a FROM t")
        s.execute("CREATE INCREMENTAL VIEW lv AS SELECT n FROM log")
        _writing_subscriber_round(s, engine_level)
        s.execute("DROP VIEW v")
        s.execute("DROP VIEW lv")
    finally:
        s.close()


def test_case9_an_overflowing_sum_or_product_is_refused_not_served():
    """A SUM over DECIMAL(38)/HUGEINT or a BIGINT product past its type is refused at write time
    with an IVMError naming the value (DuckDB's SELECT would overflow); the statement is not
    applied and every later read works (it poisoned every read before)."""
    s = ivm_layer.connect(":memory:")
    s.execute("CREATE TABLE d(g INT, x DECIMAL(38,0), h HUGEINT, b BIGINT)")
    s.execute("CREATE INCREMENTAL VIEW ds AS SELECT g, sum(x) AS sx, sum(h) AS sh FROM d GROUP BY g")
    s.execute("CREATE INCREMENTAL MATERIALIZED VIEW pm AS SELECT g, b * b AS bb FROM d")
    top = 10 ** 38 - 1
    s.execute(f"INSERT INTO d VALUES (1, {top}, 1, 1)")
    bad = [(f"INSERT INTO d VALUES (1, {top}, 1, 1)", str(2 * top)),
           (f"INSERT INTO d VALUES (2, 1, {2 ** 127 - 1}, 1), (2, 1, 1, 1)", str(2 ** 127)),
           ("INSERT INTO d VALUES (3, 1, 1, 4000000000)", str(4000000000 ** 2))]
    for stmt, value in bad:
        with pytest.raises(IVMError, match=value):
            s.execute(stmt)
    s.execute("BEGIN")
    with pytest.raises(IVMError, match="out of range"):
        s.execute(f"INSERT INTO d VALUES (5, 1, 1, 1), (1, {top}, 1, 1)")
    s.execute("ROLLBACK")
    s.execute("INSERT INTO d VALUES (3, 1, 1, 4)")
    for v, q in [("ds", "SELECT g, sum(x), sum(h) FROM d GROUP BY g"), ("pm", "SELECT g, b * b FROM d")]:
        assert s.execute(f"SELECT * FROM {v} ORDER BY ALL").fetchall() == s.execute(q + " ORDER BY ALL").fetchall()
    assert s.execute("SELECT count(*) FROM d").fetchall() == [(2,)]
    with pytest.raises(IVMError, match="out of range"):   # the initial load is checked too
        s.execute("CREATE INCREMENTAL VIEW dd AS SELECT g, b * 4000000000000000000 AS t FROM d")
    assert not s.execute("SELECT * FROM duckdb_views() WHERE view_name = 'dd'").fetchall()
    s.close()


# -- case 4: ±infinity of DATE / TIMESTAMP / TIMESTAMPTZ -------------------------------------------

_INF_DATES = ["'infinity'", "'-infinity'", "'9999-12-31'", "'0001-01-01'", "'2020-01-01'", "NULL"]
_INF_TS = ["'infinity'", "'-infinity'", "'9999-12-31 23:59:59.999999'", "'0001-01-01 00:00:00'",
           "'2020-01-01 10:00:00'", "NULL"]
_INF_TSTZ = ["'infinity'", "'-infinity'", "'9999-12-31 23:59:59.999999+00'", "'0001-01-01 00:00:00+00'",
             "'2020-01-01 10:00:00+00'", "NULL"]
#: the views of case 4 and their oracle SELECTs
_INF_VIEWS = {
    "ig": "SELECT d, count(*) AS n FROM r GROUP BY d",
    "igt": "SELECT z, t, count(*) AS n FROM r GROUP BY z, t",
    "ip": "SELECT k, d, t, z FROM r",
    "ij": "SELECT r.k, q.z AS qz, r.z AS rz, q.d AS qd FROM r JOIN q ON r.z < q.z",
    "ijd": "SELECT r.k, q.d AS qd FROM r JOIN q ON r.d < q.d",
}


def _inf_row(rng, k):
    return f"({k}, {rng.choice(_INF_DATES)}, {rng.choice(_INF_TS)}, {rng.choice(_INF_TSTZ)})"


def _inf_stream(s, rng, steps):
    """Random inserts (duplicates included), updates and deletes over r and q."""
    for _ in range(steps):
        op = rng.random()
        t = rng.choice(["r", "q"])
        if op < 0.5:
            rows = ", ".join(_inf_row(rng, rng.randrange(6)) for _ in range(rng.randrange(1, 4)))
            s.execute(f"INSERT INTO {t} VALUES {rows}")
        elif op < 0.75:
            col, vals = rng.choice([("d", _INF_DATES), ("t", _INF_TS), ("z", _INF_TSTZ)])
            s.execute(f"UPDATE {t} SET {col} = {rng.choice(vals)} WHERE k = {rng.randrange(6)}")
        else:
            s.execute(f"DELETE FROM {t} WHERE k = {rng.randrange(6)}")


def _inf_check(s, oracle_types):
    """Each view equals its SELECT: the same values (compared as the backend's text, which
    tells ``infinity`` from 9999-12-31) and the same column types."""
    for v, sql in _INF_VIEWS.items():
        got = s.execute(f"SELECT * FROM {v}")
        got_types = [d[1] for d in got.description]
        got.fetchall()
        want = s.execute(sql)
        assert got_types == [d[1] for d in want.description], v
        want.fetchall()
        cols = ", ".join(f"{c}::text" for c in oracle_types[v])
        assert Counter(s.execute(f"SELECT {cols} FROM {v}").fetchall()) == \
            Counter(s.execute(f"SELECT {cols} FROM ({sql}) o").fetchall()), v


_INF_COLS = {"ig": ["d", "n"], "igt": ["z", "t", "n"], "ip": ["k", "d", "t", "z"],
             "ij": ["k", "qz", "rz", "qd"], "ijd": ["k", "qd"]}


def _inf_setup(s, tz_type):
    for t in ("r", "q"):
        s.execute(f"CREATE TABLE {t} (k INT, d DATE, t TIMESTAMP, z {tz_type})")
    s.execute("INSERT INTO r VALUES (1, 'infinity', 'infinity', 'infinity'), "
              "(2, '9999-12-31', '9999-12-31 23:59:59.999999', '9999-12-31 23:59:59.999999+00')")
    for v, sql in _INF_VIEWS.items():
        s.execute(f"CREATE INCREMENTAL VIEW {v} AS {sql}")
    s.execute("CREATE INCREMENTAL MATERIALIZED VIEW igm AS SELECT d, t, z, count(*) AS n FROM r GROUP BY d, t, z")


def _inf_check_materialized(s):
    sql = "SELECT d::text, t::text, z::text, count(*) AS n FROM r GROUP BY d, t, z"
    assert Counter(s.execute("SELECT d::text, t::text, z::text, n FROM igm").fetchall()) == \
        Counter(s.execute(sql).fetchall())


@pytest.mark.parametrize("seed", [1, 2])
def test_case4_infinite_dates_and_timestamps(seed):
    """Issue 29 case 4 (DuckDB): 'infinity'/'-infinity' stay apart from 9999-12-31/0001-01-01
    in GROUP BY (two groups), order above/below every finite value in a ``<`` join, and come
    back with the types DuckDB gives, through random insert/update/delete streams."""
    import random

    rng = random.Random(seed)
    s = ivm_layer.connect()
    _inf_setup(s, "TIMESTAMPTZ")
    s.execute("SET TimeZone = 'UTC'")
    assert s.execute("SELECT count(*) FROM ig").fetchall() == [(2,)]   # two groups, not one
    _inf_check(s, _INF_COLS)
    for _ in range(4):
        _inf_stream(s, rng, 12)
        _inf_check(s, _INF_COLS)
        _inf_check_materialized(s)


def test_case4_infinite_dates_and_timestamps_postgres(pg_url):
    """Issue 29 case 4 (PostgreSQL): the same views and streams; psycopg's loaders, which refuse
    'infinity', are replaced on the session's connections and in the pgoutput decoder."""
    import random

    rng = random.Random(3)
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("SET TimeZone = 'UTC'")
        for t in ("r", "q"):
            c.execute(f"CREATE TABLE {t} (k int, d date, t timestamp, z timestamptz)")
        c.execute("INSERT INTO r VALUES (1, 'infinity', 'infinity', 'infinity'), "
                  "(2, '9999-12-31', '9999-12-31 23:59:59.999999', '9999-12-31 23:59:59.999999+00'), "
                  "(3, '-infinity', '-infinity', '-infinity')")   # in the snapshot
    s = ivm_layer.connect(pg_url, set_replica_identity=True)
    try:
        s.execute("SET TimeZone = 'UTC'")
        for v, sql in _INF_VIEWS.items():
            s.execute(f"CREATE INCREMENTAL VIEW {v} AS {sql}")
        s.execute("CREATE INCREMENTAL MATERIALIZED VIEW igm AS SELECT d, t, z, count(*) AS n FROM r GROUP BY d, t, z")
        assert s.execute("SELECT count(*) FROM ig").fetchall() == [(3,)]   # three groups
        _inf_check(s, _INF_COLS)
        for _ in range(3):
            _inf_stream(s, rng, 10)
            _inf_check(s, _INF_COLS)
            _inf_check_materialized(s)
        assert tp_inf_rows(s) > 0
    finally:
        s.close()


def tp_inf_rows(s):
    """How many infinities the projection view holds (the stream must have produced some)."""
    return s.execute("SELECT count(*) FROM ip WHERE d = 'infinity' OR t = '-infinity' "
                     "OR z = 'infinity'").fetchall()[0][0]
