"""Sessions over real DuckDB (in-memory and a file): views served through the session equal
DuckDB evaluating the original SELECT, after every statement of random write workloads."""

import random

import duckdb
import pytest

import ivm_layer
from ivm_layer import IVMError, SQLError, UnsupportedSQLError
from ivm_layer.session import connect

VIEWS = {
    # equi-join
    "v_join": "SELECT r.a, r.b, s.d FROM r, s WHERE r.b = s.b",
    # self-join with inequalities (a band join on b within a group a)
    "v_self": "SELECT r1.a, r1.b, r2.b AS b2, r2.c FROM r r1, r r2 "
              "WHERE r1.a = r2.a AND r1.b < r2.b AND r2.b < r1.b + 3",
    # projection that drops the join variable (not free-connex: duplicates matter)
    "v_proj": "SELECT r.c FROM r JOIN s ON r.b = s.b",
    # theta join across tables
    "v_theta": "SELECT r.a, s.d FROM r, s WHERE r.a < s.d AND s.b > 1",
}
MATERIALIZED = {
    "m_join": "SELECT r.a, r.c, s.b, s.d FROM r JOIN s ON r.b = s.b WHERE r.a < 4",
    "m_self": "SELECT * FROM r r1, r r2 WHERE r1.b = r2.b AND r1.a < r2.a",
}


def bag(rows):
    return sorted(rows, key=repr)


def check(s):
    for name, sql in {**VIEWS, **MATERIALIZED}.items():
        got = bag(s.execute(f"SELECT * FROM {name}").fetchall())
        want = bag(s.execute(sql).fetchall())
        assert got == want, name
        assert len(s.view(name)) == len(want), name


def val(rng, lo=0, hi=5, p_null=0.15):
    return "NULL" if rng.random() < p_null else str(rng.randint(lo, hi))


def write_statement(rng):
    r = rng.random()
    if r < 0.30:
        rows = ", ".join(f"({val(rng)}, {val(rng)}, {rng.choice(['NULL', quote_s(rng)])})"
                         for _ in range(rng.randint(1, 4)))
        if rng.random() < 0.3:  # duplicate rows in one statement
            rows = rows + ", " + rows
        return f"INSERT INTO r VALUES {rows}"
    if r < 0.50:
        rows = ", ".join(f"({val(rng)}, {val(rng)})" for _ in range(rng.randint(1, 4)))
        return f"INSERT INTO s VALUES {rows}"
    if r < 0.65:
        return rng.choice([
            f"UPDATE r SET b = b + 1 WHERE a = {rng.randint(0, 5)}",
            f"UPDATE r SET c = {quote_s(rng)} WHERE b = {rng.randint(0, 5)}",
            f"UPDATE r SET a = NULL WHERE b = {rng.randint(0, 5)}",
            f"UPDATE s SET d = {val(rng)} WHERE b = {rng.randint(0, 5)}",
            f"UPDATE s SET b = coalesce(d, 0) WHERE d > {rng.randint(0, 5)}",
        ])
    if r < 0.80:
        return rng.choice([
            f"DELETE FROM r WHERE a = {rng.randint(0, 5)}",
            f"DELETE FROM r WHERE b > {rng.randint(2, 6)} OR c IS NULL",
            f"DELETE FROM s WHERE d = {rng.randint(0, 5)}",
            "DELETE FROM s WHERE b IS NULL",
        ])
    return None  # a transaction


def quote_s(rng):
    return "'" + rng.choice("xyz") + "'"


def make_session(url=None, views=True):
    s = connect(url)
    s.execute("CREATE TABLE r(a INTEGER, b INTEGER, c VARCHAR)")
    s.execute("CREATE TABLE s(b INTEGER, d INTEGER)")
    s.execute("INSERT INTO r VALUES (1, 2, 'x'), (1, 2, 'x'), (1, 3, NULL), (2, NULL, 'y'), (NULL, 4, 'z')")
    s.execute("INSERT INTO s VALUES (2, 5), (2, 5), (3, NULL), (NULL, 1), (4, 4)")
    if views:
        for name, sql in VIEWS.items():
            s.execute(f"CREATE INCREMENTAL VIEW {name} AS {sql}")
        for name, sql in MATERIALIZED.items():
            s.execute(f"CREATE INCREMENTAL MATERIALIZED VIEW {name} AS {sql}")
    return s


def run_workload(s, rng, steps):
    check(s)
    for _ in range(steps):
        stmt = write_statement(rng)
        if stmt is not None:
            s.execute(stmt)
            check(s)
            continue
        s.execute(rng.choice(["BEGIN", "BEGIN TRANSACTION"]))
        check(s)
        for _ in range(rng.randint(1, 4)):
            stmt = write_statement(rng) or "DELETE FROM r WHERE a IS NULL"
            s.execute(stmt)
            check(s)  # read-your-writes inside the transaction
        if rng.random() < 0.15:  # a failing statement aborts the DuckDB transaction
            with pytest.raises(ivm_layer.errors.DataError):
                s.execute("INSERT INTO r VALUES (1/0::INTEGER, 1, 'x')")
        end = rng.choice(["COMMIT", "ROLLBACK", "ROLLBACK"])
        s.execute(end)
        check(s)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_workload_in_memory(seed):
    s = make_session()
    run_workload(s, random.Random(seed), 60)
    s.close()


def test_random_workload_file_and_reconnect(tmp_path):
    path = tmp_path / "db.duckdb"
    s = make_session(f"duckdb:///{path}")
    rng = random.Random(7)
    run_workload(s, rng, 30)
    s.close()
    # another writer changes the tables while no session is open
    raw = duckdb.connect(str(path))
    raw.execute("INSERT INTO r VALUES (3, 3, 'x'), (3, 5, 'y')")
    raw.execute("DELETE FROM s WHERE d = 5")
    raw.close()
    s = connect(str(path))  # a bare path ending in .duckdb
    assert sorted(s.views) == sorted({**VIEWS, **MATERIALIZED})
    assert s.execute("SELECT kind FROM ivm.views WHERE name = 'm_join'").fetchone() == ("materialized",)
    run_workload(s, rng, 30)
    s.close()


def test_bulk_load_uses_existing_rows_and_multiplicities():
    s = make_session(views=False)
    s.execute("CREATE INCREMENTAL VIEW v AS SELECT r.c FROM r, s WHERE r.b = s.b")
    rows = s.execute("SELECT * FROM v").fetchall()
    assert bag(rows) == bag([("x",), ("x",), ("x",), ("x",), (None,), ("z",)])
    assert dict(s.view("v").rows())[("x",)] == 4


def test_select_from_view_where_order_limit_and_mixed_join():
    s = make_session()
    got = s.execute("SELECT a, d FROM v_join WHERE d IS NOT NULL ORDER BY a, d DESC LIMIT 3").fetchall()
    want = s.execute(f"SELECT a, d FROM ({VIEWS['v_join']}) WHERE d IS NOT NULL ORDER BY a, d DESC LIMIT 3").fetchall()
    assert got == want
    got = s.execute("SELECT v.a, s.d FROM v_theta v JOIN s ON v.d = s.d").fetchall()
    want = s.execute(f"SELECT v.a, s.d FROM ({VIEWS['v_theta']}) v JOIN s ON v.d = s.d").fetchall()
    assert bag(got) == bag(want)
    # a write that reads a view
    s.execute("CREATE TABLE snap AS SELECT * FROM v_proj")
    assert bag(s.execute("SELECT * FROM snap").fetchall()) == bag(s.execute(VIEWS["v_proj"]).fetchall())


def test_cursor_api_and_params():
    s = make_session()
    cur = s.execute("INSERT INTO r VALUES (?, ?, ?)", [4, 2, "w"])
    assert cur.rowcount == 1
    cur = s.execute("SELECT a, b FROM v_join WHERE a = ? ORDER BY b", [4])
    assert [d[0] for d in cur.description] == ["a", "b"]
    first = cur.fetchone()
    assert first == (4, 2)
    assert cur.fetchmany(1) == [(4, 2)]
    assert list(cur) == []
    assert cur.fetchone() is None
    cur = s.execute("UPDATE r SET c = 'q' WHERE a = 1")
    assert cur.rowcount == 3
    check(s)
    cur = s.execute("SELECT 1; SELECT 2 AS two")
    assert cur.fetchall() == [(2,)]
    with pytest.raises(IVMError, match="exactly one statement"):
        s.execute("SELECT ?; SELECT ?", [1])


def test_materialized_table_is_a_real_table_and_same_transaction():
    s = make_session()
    cols = [d[0] for d in s.execute("SELECT * FROM m_join LIMIT 0").description]
    assert cols == ["a", "c", "b", "d"]
    s = make_session()
    s.execute("BEGIN")
    s.execute("INSERT INTO r VALUES (0, 4, 'k')")
    assert (0, "k", 4, 4) in s.execute("SELECT * FROM m_join").fetchall()
    s.execute("ROLLBACK")
    assert (0, "k", 4, 4) not in s.execute("SELECT * FROM m_join").fetchall()
    check(s)


def test_explicit_column_names_and_or_replace_if_not_exists():
    s = make_session(views=False)
    s.execute("CREATE INCREMENTAL MATERIALIZED VIEW mv (x, y) AS SELECT r.a, s.d FROM r, s WHERE r.b = s.b")
    assert [d[0] for d in s.execute("SELECT * FROM mv").description] == ["x", "y"]
    s.execute("CREATE INCREMENTAL MATERIALIZED VIEW IF NOT EXISTS mv AS SELECT r.a FROM r")
    assert len(s.execute("SELECT * FROM mv").description) == 2
    s.execute("CREATE OR REPLACE INCREMENTAL VIEW mv AS SELECT r.a FROM r WHERE r.a > 1")
    assert s.execute("SELECT * FROM mv").fetchall() == [(2,)]
    assert s.execute("SELECT kind FROM ivm.views WHERE name = 'mv'").fetchall() == [("incremental",)]
    s.execute("INSERT INTO r VALUES (5, 5, NULL)")
    assert bag(s.execute("SELECT * FROM mv").fetchall()) == [(2,), (5,)]


def test_drop_view_stops_tracking():
    """Capture keeps no copy of the base tables (no shadow tables): the ivm schema holds only the
    catalog, and dropping the views removes their objects."""
    s = make_session(views=False)
    s.execute("CREATE INCREMENTAL VIEW v1 AS SELECT * FROM r")
    s.execute("CREATE INCREMENTAL MATERIALIZED VIEW v2 AS SELECT * FROM r, s WHERE r.b = s.b")
    ivm_tables = lambda: sorted(x[0] for x in s.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'ivm'").fetchall())
    assert ivm_tables() == ["views"]
    s.execute("DROP VIEW v2")
    assert s.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'v2'").fetchone() == (0,)
    s.execute("DROP VIEW v1")
    assert s.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'v1'").fetchone() == (0,)
    assert ivm_tables() == ["views"]
    assert s.execute("SELECT count(*) FROM ivm.views").fetchone() == (0,)
    with pytest.raises(IVMError):
        s.view("v1")
    # plain DuckDB views pass through
    s.execute("CREATE VIEW pv AS SELECT a FROM r")
    assert len(s.execute("SELECT * FROM pv").fetchall()) == 5
    s.execute("DROP VIEW pv")
    s.execute("DROP VIEW IF EXISTS nothing_here")


def test_errors_pass_through():
    s = make_session(views=False)
    with pytest.raises(UnsupportedSQLError):
        s.execute("CREATE INCREMENTAL VIEW bad AS SELECT r.a, ntile(2) OVER (ORDER BY r.a) FROM r")
    with pytest.raises(SQLError, match="unknown table"):
        s.execute("CREATE INCREMENTAL VIEW bad AS SELECT * FROM nope")
    with pytest.raises(SQLError, match="unknown table"):
        s.execute("CREATE INCREMENTAL VIEW bad AS SELECT * FROM r, nope WHERE r.a = nope.a")
    with pytest.raises(SQLError, match="exists"):
        s.execute("CREATE INCREMENTAL VIEW r AS SELECT * FROM s")
    s.execute("CREATE INCREMENTAL VIEW ok AS SELECT * FROM r")
    with pytest.raises(SQLError, match="already exists"):
        s.execute("CREATE INCREMENTAL VIEW ok AS SELECT * FROM s")
    with pytest.raises(IVMError, match="drop them"):
        s.execute("DROP TABLE r")
    with pytest.raises(IVMError, match="drop them"):
        s.execute("ALTER TABLE r ADD COLUMN z INTEGER")
    # nothing half-done: no shadow for s, no catalog rows for the failed views
    assert s.execute("SELECT name FROM ivm.views").fetchall() == [("ok",)]
    assert s.view("ok").tables == ["r"]
    with pytest.raises(IVMError, match="not supported"):
        connect("mysql://user@localhost:3306/db")
    s.close()
    with pytest.raises(IVMError, match="closed"):
        s.execute("SELECT 1")


def test_failed_autocommit_statement_changes_nothing():
    s = make_session()
    with pytest.raises(ivm_layer.errors.DataError) as e:
        s.execute("INSERT INTO r VALUES (1, 2, 'x'), (1/0::INTEGER, 2, 'x')")
    assert isinstance(e.value.__cause__, duckdb.ConversionException)
    check(s)
    s.execute("INSERT INTO r VALUES (9, 2, 'x')")
    check(s)


def test_truncate_and_other_statements():
    s = make_session()
    s.execute("TRUNCATE s")
    check(s)
    s.execute("INSERT INTO s SELECT i % 5, i % 3 FROM range(50) t(i)")
    check(s)
    s.execute("CHECKPOINT")
    s.execute("CREATE TABLE other(x INTEGER); INSERT INTO other VALUES (1); DELETE FROM r WHERE a = 1")
    check(s)


def test_connect_is_exported():
    assert ivm_layer.connect is connect


def test_commit_of_aborted_transaction_is_a_rollback():
    s = make_session()
    before = {n: bag(s.execute(f"SELECT * FROM {n}").fetchall()) for n in {**VIEWS, **MATERIALIZED}}
    s.execute("BEGIN")
    s.execute("INSERT INTO r VALUES (2, 2, 'x'), (2, 3, 'y')")
    s.execute("DELETE FROM s WHERE b = 2")
    check(s)
    with pytest.raises(ivm_layer.errors.DataError):
        s.execute("INSERT INTO r VALUES (1/0::INTEGER, 1, 'x')")
    s.execute("COMMIT")  # DuckDB silently rolls back an aborted transaction
    check(s)
    assert {n: bag(s.execute(f"SELECT * FROM {n}").fetchall()) for n in before} == before
    with pytest.raises(IVMError, match="transaction"):
        s.execute("BEGIN; CREATE INCREMENTAL VIEW w AS SELECT * FROM r")
    s.execute("ROLLBACK")
    check(s)


def test_view_read_inside_rolled_back_transaction():
    # the TEMP table serving a view is created inside the user's transaction; a ROLLBACK
    # undoes it, so the next read must rebuild it
    s = make_session()
    s.execute("INSERT INTO r VALUES (2, 2, 'x')")
    s.execute("BEGIN")
    check(s)
    s.execute("ROLLBACK")
    check(s)
    s.execute("INSERT INTO s VALUES (2, 7)")
    s.execute("BEGIN")
    check(s)
    s.execute("DELETE FROM r WHERE a = 99")  # changes nothing
    s.execute("ROLLBACK")
    check(s)


def test_info_explain_subscribe_and_sync_capture_outside_writes():
    import ivm_layer

    s = ivm_layer.connect()
    s.execute("CREATE TABLE r (a INT, b INT); CREATE TABLE t (b INT, c INT)")
    s.execute("INSERT INTO r VALUES (1, 2), (3, 4); INSERT INTO t VALUES (2, 10)")
    s.execute("CREATE INCREMENTAL VIEW v AS SELECT r.a, t.c FROM r JOIN t ON r.b = t.b")
    (info,) = s.info()
    assert (info.name, info.kind, info.rows, info.tables, info.columns) == ("v", "incremental", 1, ("r", "t"), ("a", "c"))
    assert info.lag_bytes is None and "CREATE INCREMENTAL VIEW" in info.definition
    assert "class" in s.explain("v")
    assert s.tables()["v"] == ["a", "c"] and s.tables()["r"] == ["a", "b"]
    seen = []
    unsubscribe = s.subscribe("v", seen.append)
    s.connection.execute("INSERT INTO t VALUES (4, 20)")  # bypasses the session
    assert sorted(s.view("v")) == [(1, 10)]
    assert s.poll() == 1
    assert sorted(s.view("v")) == [(1, 10), (3, 20)] and seen == [[((3, 20), 1)]]
    unsubscribe()
    s.connection.execute("DELETE FROM r WHERE a = 1")
    s.sync()
    assert sorted(s.view("v")) == [(3, 20)] and len(seen) == 1
    assert s.poll() == 0
    with pytest.raises(ivm_layer.IVMError, match="no incremental view named 'w'"):
        s.info("w")
