"""Every capture route of a DuckDB session, randomized: after every statement each view equals
DuckDB running the view's SELECT (the oracle), through INSERT … VALUES / SELECT, OR IGNORE,
ON CONFLICT DO NOTHING / DO UPDATE, INSERT OR REPLACE, UPDATE (also … FROM, with parameters),
DELETE (also … USING), TRUNCATE, COPY FROM a CSV file (with and without a column list), MERGE,
a user's own RETURNING, EXECUTE of a prepared statement, writes through ``session.connection``
seen at ``sync()``, and failed statements and rollbacks inside transactions."""

import random

import duckdb
import pytest

from ivm_layer.errors import DataError, IntegrityError
from ivm_layer.session import connect

VIEWS = {
    "v_join": "SELECT r.a, r.b, s.d FROM r, s WHERE r.b = s.b",
    "v_theta": "SELECT r.a, k.id, k.v FROM r, k WHERE r.a < k.v",
    "v_k": "SELECT k.id, k.v, s.d FROM k JOIN s ON k.v = s.b",
    # composite views (computed column over an outer join; a union) take the same capture routes
    "v_left": "SELECT k.id, k.v * 2 AS v2, s.d FROM k LEFT JOIN s ON k.v = s.b",
    "v_union": "SELECT b AS x FROM s UNION SELECT v FROM k",
}
MATERIALIZED = {"m_k": "SELECT k.id, k.v, r.c FROM k JOIN r ON k.id = r.a WHERE k.v > 1"}


def bag(rows):
    return sorted(rows, key=repr)


def check(s, where=""):
    for name, sql in {**VIEWS, **MATERIALIZED}.items():
        got = bag(s.execute(f"SELECT * FROM {name}").fetchall())
        want = bag(s.execute(sql).fetchall())
        assert got == want, f"{name} after {where}"
        assert s.execute(f"SELECT count(*) FROM {name}").fetchone()[0] == len(want), name


def v(rng, hi=6, p_null=0.15):
    return "NULL" if rng.random() < p_null else str(rng.randint(0, hi))


def statement(rng, csv_path):
    """(sql, params) for one random write; params None or a list."""
    r = rng.randrange(17)
    if r == 0:
        rows = ", ".join(f"({v(rng)}, {v(rng)}, '{rng.choice('xy')}')" for _ in range(rng.randint(1, 3)))
        return f"INSERT INTO r VALUES {rows}", None
    if r == 1:
        return f"INSERT INTO r SELECT b, d, 'z' FROM s WHERE d > {rng.randint(0, 6)}", None
    if r == 2:
        return "INSERT INTO s VALUES (?, ?), (?, ?)", [rng.randint(0, 6), rng.randint(0, 6), None, rng.randint(0, 6)]
    if r == 3:
        return f"INSERT OR IGNORE INTO k VALUES ({rng.randint(0, 8)}, {v(rng)}), ({rng.randint(0, 8)}, {v(rng)})", None
    if r == 4:
        return (f"INSERT INTO k VALUES ({rng.randint(0, 8)}, {v(rng)}) ON CONFLICT DO NOTHING", None)
    if r == 5:
        return (f"INSERT INTO k VALUES ({rng.randint(0, 8)}, {v(rng)}), ({rng.randint(0, 8)}, 3) "
                "ON CONFLICT (id) DO UPDATE SET v = excluded.v", None)
    if r == 6:
        return f"INSERT OR REPLACE INTO k VALUES ({rng.randint(0, 8)}, {v(rng)})", None
    if r == 7:
        return f"UPDATE r SET b = b + 1 WHERE a = {rng.randint(0, 6)}", None
    if r == 8:
        return "UPDATE s SET d = ? WHERE b = ? AND d IS NOT NULL", [rng.randint(0, 6), rng.randint(0, 6)]
    if r == 9:
        return "UPDATE k SET v = s.d FROM s WHERE k.v = s.b AND s.d < 3", None
    if r == 10:
        return f"DELETE FROM r WHERE a = {rng.randint(0, 6)} OR c IS NULL", None
    if r == 11:
        return "DELETE FROM s USING k WHERE s.b = k.v AND k.id > 5", None
    if r == 12:
        return f"DELETE FROM k WHERE id = {rng.randint(0, 8)} RETURNING id, v * 10 AS ten_v", None
    if r == 13:
        with open(csv_path, "w") as f:
            f.writelines(f"{rng.randint(0, 6)},{rng.choice(['', str(rng.randint(0, 6))])}\n" for _ in range(rng.randint(1, 4)))
        return rng.choice([f"COPY s FROM '{csv_path}'", f"COPY s (b, d) FROM '{csv_path}' (HEADER false)"]), None
    if r == 14:
        return (f"MERGE INTO k USING (SELECT {rng.randint(0, 8)} AS id, {rng.randint(0, 6)} AS v) src "
                "ON k.id = src.id WHEN MATCHED THEN UPDATE SET v = src.v "
                "WHEN NOT MATCHED THEN INSERT VALUES (src.id, src.v)"), None
    if r == 15:
        return "TRUNCATE s" if rng.random() < 0.3 else "DELETE FROM s WHERE d IS NULL", None
    return f"EXECUTE ins_r({rng.randint(0, 6)}, {rng.randint(0, 6)})", None


def make_session():
    s = connect()
    s.execute("CREATE TABLE r(a INTEGER, b INTEGER, c VARCHAR)")
    s.execute("CREATE TABLE s(b INTEGER, d INTEGER)")
    s.execute("CREATE TABLE k(id INTEGER PRIMARY KEY, v INTEGER)")
    s.execute("INSERT INTO r VALUES (1, 2, 'x'), (1, 2, 'x'), (2, NULL, 'y'), (NULL, 4, 'z')")
    s.execute("INSERT INTO s VALUES (2, 5), (2, 5), (3, NULL), (4, 4)")
    s.execute("INSERT INTO k VALUES (1, 2), (2, 4), (6, 3)")
    s.execute("PREPARE ins_r AS INSERT INTO r VALUES ($1, $2, 'p')")
    for name, sql in VIEWS.items():
        s.execute(f"CREATE INCREMENTAL VIEW {name} AS {sql}")
    for name, sql in MATERIALIZED.items():
        s.execute(f"CREATE INCREMENTAL MATERIALIZED VIEW {name} AS {sql}")
    return s


def run(s, rng, csv_path, steps):
    check(s, "creation")
    for _ in range(steps):
        p = rng.random()
        if p < 0.08:  # a write the session cannot see, found at sync()
            s.connection.execute(f"INSERT INTO r VALUES ({rng.randint(0, 6)}, {rng.randint(0, 6)}, 'c')")
            s.connection.execute(f"DELETE FROM s WHERE b = {rng.randint(0, 6)}")
            s.sync()
            check(s, "sync")
            continue
        if p < 0.28:
            s.execute("BEGIN")
            for _ in range(rng.randint(1, 3)):
                sql, params = statement(rng, csv_path)
                try:
                    s.execute(sql, params)
                except IntegrityError:
                    s.execute("ROLLBACK")
                    check(s, f"constraint error in a transaction: {sql}")
                    break
                check(s, f"{sql} in a transaction")
            else:
                if rng.random() < 0.2:
                    with pytest.raises(DataError):
                        s.execute("INSERT INTO r VALUES (1/0::INTEGER, 1, 'x')")
                s.execute(rng.choice(["COMMIT", "ROLLBACK"]))
                check(s, "end of transaction")
            continue
        sql, params = statement(rng, csv_path)
        try:
            s.execute(sql, params)
        except IntegrityError:
            pass  # a duplicate key: nothing changed
        check(s, sql)


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_every_capture_route_matches_duckdb(seed, tmp_path):
    s = make_session()
    run(s, random.Random(seed), str(tmp_path / "in.csv"), 70)
    s.close()


def test_user_returning_and_counts_look_like_duckdb():
    s = make_session()
    cur = s.execute("INSERT INTO r VALUES (7, 7, 'q'), (8, 8, 'q') RETURNING a + 1 AS a1, c")
    assert [d[0] for d in cur.description] == ["a1", "c"]
    assert sorted(cur.fetchall()) == [(8, "q"), (9, "q")]
    cur = s.execute("INSERT INTO r VALUES (9, 9, 'q')")
    assert cur.description[0][0] == "Count" and cur.fetchall() == [(1,)] and cur.rowcount == 1
    assert s.execute("DELETE FROM r WHERE c = 'q'").fetchall() == [(3,)]
    assert s.execute("UPDATE s SET d = d WHERE b = 2").fetchall() == [(2,)]
    check(s)


@pytest.mark.parametrize("sql, params", [
    ("UPDATE r SET b = b + 1 WHERE a = 1", None),
    ("UPDATE r AS x SET b = ? WHERE x.a = ? AND x.c <> 'where'", [9, 1]),
    ("UPDATE r x SET c = 'from' WHERE a IN (SELECT b FROM s WHERE d > ?) -- WHERE", [1]),
    ("UPDATE k SET v = s.d FROM s WHERE k.v = s.b AND s.d < ?", [6]),
    ("UPDATE main.r SET a = (SELECT max(b) FROM s WHERE s.b > ?) WHERE b IS NOT NULL RETURNING a", [0]),
    ("UPDATE r SET b = $2 WHERE a = $1", [1, 5]),
    ("UPDATE r SET b = 0", None),
])
def test_update_preimages_read_the_rows_the_update_changes(sql, params):
    """The lexical pre-image and the parsed one select the same rows DuckDB then updates."""
    from ivm_layer.io.duckdb.preimage import update_preimage, update_preimage_lexical

    s = make_session()
    conn = s.connection
    table = sql.split()[1].split(".")[-1]
    cols = [c[0] for c in conn.execute(f"DESCRIBE {table}").fetchall()]
    built = [b for b in (update_preimage_lexical(sql, cols), update_preimage(sql, cols)) if b is not None]
    assert built, "at least the parser reads every UPDATE here"
    results = []
    for pre, wanted in built:
        sub = None if params is None else [params[i] for i in wanted]
        results.append(sorted(conn.execute(pre, sub).fetchall(), key=repr))
    assert all(r == results[0] for r in results)
    before = sorted(map(tuple, conn.execute(f"SELECT * FROM {table}").fetchall()), key=repr)
    s.execute(sql, params)
    after = sorted(map(tuple, conn.execute(f"SELECT * FROM {table}").fetchall()), key=repr)
    changed = [r for r in before if r not in after or before.count(r) != after.count(r)]
    assert set(changed) <= {r[:len(cols)] for r in results[0]}
    check(s, sql)


@pytest.mark.parametrize("sql, params", [
    ("UPDATE r SET b = b + 1 WHERE a = 1", None),
    ("UPDATE r AS x SET b = ?, c = upper(c) WHERE x.a = ? AND x.c <> 'where'", [9, 1]),
    ("UPDATE r SET a = b, b = a", None),
    ("UPDATE r SET b = 2.7 WHERE c = 'x'", None),                     # cast to the column type
    ("UPDATE r SET c = CASE WHEN a IS NULL THEN 'n' ELSE c || '!' END", None),
    ("UPDATE main.r SET \"B\" = coalesce(b, 0) * 2 WHERE a IN (1, 2)", None),
    ("UPDATE r SET b = NULL WHERE false", None),
])
def test_update_rows_read_before_the_update_are_its_changes(sql, params):
    """update_rows() reads exactly the rows the UPDATE then changes, before and after, and the
    table's fingerprint kept from them equals a scan of the table afterwards."""
    s = make_session()
    conn = s.connection
    cap = s._catalog.captures["r"]
    before = sorted(conn.execute("SELECT * FROM r").fetchall(), key=repr)
    got = cap.update_rows(conn, sql, params)
    assert got is not None, "this UPDATE takes the in-place route"
    old, new = got
    n = cap.run_update(conn, sql, params, old, new)
    after = sorted(conn.execute("SELECT * FROM r").fetchall(), key=repr)
    assert n == len(old) == len(new)
    rebuilt = list(before)
    for row in old:
        rebuilt.remove(row)
    assert sorted(rebuilt + new, key=repr) == after
    assert not cap.changed(conn)


@pytest.mark.parametrize("sql", [
    "UPDATE r SET b = random() * 10",                 # volatile: the SELECT and UPDATE would differ
    "UPDATE r SET b = 1 WHERE random() < 0.5",
    "UPDATE r SET b = nextval('seq')",
    "UPDATE r SET b = bump(b)",                       # a user's macro: may be volatile
    "UPDATE r SET b = (SELECT max(d) FROM s)",
    "UPDATE r SET b = DEFAULT",
    "UPDATE r SET b = s.d FROM s WHERE r.b = s.b",
    "UPDATE r SET b = 1 RETURNING a",
    "UPDATE r SET b = 1, b = 2",
    "UPDATE r SET nope = 1",
])
def test_update_rows_refuses_what_it_cannot_read_ahead(sql):
    s = make_session()
    s.connection.execute("CREATE SEQUENCE seq")
    s.connection.execute("CREATE MACRO bump(x) AS x + 1")
    cap = s._catalog.captures["r"]
    before = s.connection.execute("SELECT * FROM r").fetchall()
    assert cap.update_rows(s.connection, sql, None) is None
    assert s.connection.execute("SELECT * FROM r").fetchall() == before
    if "nope" not in sql and "b = 1, b = 2" not in sql:
        s.execute(sql)                 # the session still runs it (RETURNING or a diff)
        check(s, sql)


def test_lazy_fingerprint_follows_every_type_and_rollback():
    """Rows captured without their hash are hashed later with the column types: the kept
    fingerprint equals a scan after writes to a table of every lazily hashed type, also after
    a rollback across a settle, and a write around the session still shows."""
    import ivm_layer.io.duckdb.capture as cd

    s = connect()
    s.execute("CREATE TABLE t (i INTEGER, h HUGEINT, f FLOAT, d DOUBLE, m DECIMAL(12,3), v VARCHAR, "
              "b BOOLEAN, u UUID, bl BLOB)")
    s.execute("CREATE INCREMENTAL VIEW vt AS SELECT * FROM t WHERE i >= 0")
    cap = s._catalog.captures["t"]
    assert cap.lazy
    rng = random.Random(5)
    for i in range(40):
        s.execute(f"INSERT INTO t VALUES ({i}, {i}::HUGEINT << 70, {i / 3}, {i / 7}, {i}.125, 'v{i}', "
                  
                  f"{str(i % 2 == 0).lower()}, gen_random_uuid(), '\\x0{i % 10}'::BLOB)")
        s.execute(f"UPDATE t SET d = d * -1, m = m + 0.5, v = v || 'x' WHERE i = {rng.randint(0, i)}")
        s.execute("UPDATE t SET f = f + ? WHERE i = ?", [0.25, rng.randint(0, i)])
    assert not cap.changed(s.connection)
    s.execute("BEGIN")
    s.execute("INSERT INTO t (i, d) VALUES (100, -0.0), (101, 'nan'::DOUBLE)")
    cap.settle(s.connection)                  # hashes summed inside the transaction
    s.execute("ROLLBACK")
    assert cap.mark()[0] is False          # hashes were summed since the BEGIN: unknown now
    assert cap.changed(s.connection)       # … so the next check diffs the table (once)
    s.sync()
    assert not cap.changed(s.connection)
    s.execute("INSERT INTO t (i, d) VALUES (102, -0.0), (103, 'nan'::DOUBLE)")
    assert cd.SETTLE_AT > 2 and not cap.changed(s.connection)
    s.connection.execute("UPDATE t SET v = 'around' WHERE i = 3")
    assert cap.changed(s.connection)
    s.sync()
    got = sorted(map(repr, s.execute("SELECT * REPLACE (u::VARCHAR AS u) FROM vt").fetchall()))
    want = sorted(map(repr, s.execute("SELECT * REPLACE (u::VARCHAR AS u) FROM t WHERE i >= 0").fetchall()))
    assert got == want and len(got) == 42


def test_autocommit_update_that_fails_changes_no_view():
    """An UPDATE outside a transaction reads its rows and prepares the views before it runs:
    a constraint error leaves table and views as they were."""
    s = connect()
    s.execute("CREATE TABLE p (id INTEGER PRIMARY KEY, x INTEGER CHECK (x < 100))")
    s.execute("INSERT INTO p VALUES (1, 1), (2, 2)")
    s.execute("CREATE INCREMENTAL VIEW vp AS SELECT id, x FROM p WHERE x > 0")
    with pytest.raises(IntegrityError) as e:
        s.execute("UPDATE p SET x = x + 98")
    assert e.value.sqlstate == "23514" and isinstance(e.value.__cause__, duckdb.ConstraintException)
    assert sorted(s.execute("SELECT * FROM vp").fetchall()) == [(1, 1), (2, 2)]
    s.execute("UPDATE p SET x = x + 97 WHERE id = 2")
    assert sorted(s.execute("SELECT * FROM vp").fetchall()) == [(1, 1), (2, 99)]
    assert not s._catalog.captures["p"].changed(s.connection)


def test_update_of_a_table_with_generated_columns():
    """A generated column's new value is DuckDB's to compute: such tables take the RETURNING
    route, and the view follows."""
    s = connect()
    s.execute("CREATE TABLE g (a INTEGER, b INTEGER GENERATED ALWAYS AS (a * 2) VIRTUAL)")
    s.execute("INSERT INTO g (a) VALUES (1), (2)")
    s.execute("CREATE INCREMENTAL VIEW vg AS SELECT a, b FROM g")
    assert not s._catalog.captures["g"].in_place
    s.execute("UPDATE g SET a = 10 WHERE a = 1")
    assert sorted(s.execute("SELECT * FROM vg").fetchall()) == [(2, 4), (10, 20)]
    assert not s._catalog.captures["g"].changed(s.connection)


UPSERTS = [
    ("INSERT OR REPLACE INTO kk VALUES (1, 1, 50), (9, 9, 90)", None),
    ("INSERT INTO kk VALUES (1, 2, 7), (3, 3, 3) ON CONFLICT (a, b) DO UPDATE SET v = excluded.v + kk.v", None),
    ("INSERT INTO kk (b, a, v) VALUES (?, ?, ?) ON CONFLICT DO UPDATE SET v = ?", [2, 1, 5, 6]),
    ("INSERT INTO kk VALUES (1, 1, 0), (2, 2, 0) ON CONFLICT DO UPDATE SET v = 100 WHERE excluded.v > kk.v",
     None),                                                        # updates nothing: none returned
    ("INSERT INTO kk SELECT a, b, v * 2 FROM kk WHERE a = 1 ON CONFLICT DO UPDATE SET v = excluded.v", None),
    ("INSERT OR REPLACE INTO kk (SELECT 4, 4, 4) RETURNING v + 1 AS v1", None),
    ("INSERT INTO kk VALUES ('5', 5, NULL) ON CONFLICT DO UPDATE SET v = 0", None),   # a cast key
]


@pytest.mark.parametrize("sql, params", UPSERTS)
def test_upserts_read_the_rows_they_replace(sql, params, monkeypatch):
    """An upsert on a table with one key reads the rows it may replace and learns the ones it
    replaced from RETURNING — no table diff — and every view equals DuckDB after it."""
    from ivm_layer.session.duckdb.writes import DuckWriter

    s = connect()
    s.execute("CREATE TABLE kk (a INTEGER, b INTEGER, v INTEGER, PRIMARY KEY (a, b))")
    s.execute("INSERT INTO kk VALUES (1, 1, 1), (1, 2, 2), (2, 2, 2), (5, 5, 5)")
    s.execute("CREATE INCREMENTAL VIEW vk AS SELECT a, v FROM kk WHERE v IS NULL OR v < 60")
    s.execute("CREATE INCREMENTAL MATERIALIZED VIEW mk AS SELECT x.a, y.v FROM kk x JOIN kk y ON x.a = y.b")
    diffs = []
    real = DuckWriter.apply_unseen
    monkeypatch.setattr(DuckWriter, "apply_unseen", lambda self, cap, undo: diffs.append(cap.table) or
                        real(self, cap, undo))
    cur = s.execute(sql, params)
    if "RETURNING" in sql:
        assert cur.fetchall() == [(5,)]
    assert diffs == []
    for name, q in (("vk", "SELECT a, v FROM kk WHERE v IS NULL OR v < 60"),
                    ("mk", "SELECT x.a, y.v FROM kk x JOIN kk y ON x.a = y.b")):
        assert bag(s.execute(f"SELECT * FROM {name}").fetchall()) == bag(s.execute(q).fetchall()), name
    assert not s._catalog.captures["kk"].changed(s.connection)


def test_upserts_the_key_route_does_not_take():
    """Several keys (a conflict may be on any), volatile sources, DEFAULT VALUES: diffed."""
    s = connect()
    s.execute("CREATE TABLE u2 (id INTEGER PRIMARY KEY, w VARCHAR UNIQUE, v INTEGER DEFAULT 1)")
    s.execute("CREATE TABLE u1 (id INTEGER PRIMARY KEY, v DOUBLE)")
    s.execute("INSERT INTO u2 VALUES (1, 'a', 1)")
    s.execute("INSERT INTO u1 VALUES (1, 0.5)")
    s.execute("CREATE INCREMENTAL VIEW vu AS SELECT u2.id, u2.w, u1.v FROM u2 JOIN u1 ON u2.id = u1.id")
    assert s._catalog.captures["u2"].key is None and s._catalog.captures["u1"].key == ["id"]
    s.execute("INSERT INTO u2 VALUES (1, 'b', 2) ON CONFLICT (id) DO UPDATE SET w = excluded.w")
    s.execute("INSERT INTO u1 SELECT 1, random() ON CONFLICT DO UPDATE SET v = excluded.v")
    cap = s._catalog.captures["u1"]
    assert cap.upsert(s.connection, "INSERT INTO u1 SELECT 1, random() ON CONFLICT DO UPDATE SET v = 1",
                      None, False) is None
    check_sql = "SELECT u2.id, u2.w, u1.v FROM u2 JOIN u1 ON u2.id = u1.id"
    assert bag(s.execute("SELECT * FROM vu").fetchall()) == bag(s.execute(check_sql).fetchall())


@pytest.mark.parametrize("sql", [
    "UPDATE r SET b = 100 WHERE a IN (SELECT a FROM v)",
    "DELETE FROM r WHERE a IN (SELECT a FROM v) OR b IN (SELECT a FROM v)",
    "INSERT INTO kr SELECT a, 5 FROM v ON CONFLICT DO UPDATE SET b = excluded.b",
    "INSERT INTO r SELECT x.a, y.a FROM v x, v y",
    "WITH x AS (SELECT a FROM v) SELECT count(*) FROM x, x AS y",
])
def test_statements_that_scan_a_served_view_twice(sql):
    """A served view is a one-pass Arrow reader; a statement that may read it twice (named
    twice, under WITH, an UPDATE or upsert read ahead by the session) gets a table of it."""
    s = connect()
    s.execute("CREATE TABLE r (a INTEGER, b INTEGER)")
    s.execute("INSERT INTO r SELECT i, i FROM range(10) t(i)")
    s.execute("CREATE TABLE kr (a INTEGER PRIMARY KEY, b INTEGER)")
    s.execute("INSERT INTO kr VALUES (1, 1)")
    s.execute("CREATE TABLE q (a INTEGER)")
    s.execute("INSERT INTO q VALUES (1), (2), (3)")
    s.execute("CREATE INCREMENTAL VIEW v AS SELECT a FROM q WHERE a < 3")
    s.execute("CREATE INCREMENTAL VIEW w AS SELECT r.a, r.b, kr.b AS kb FROM r LEFT JOIN kr ON r.a = kr.a")
    got = s.execute(sql).fetchall()
    if sql.startswith("WITH"):
        assert got == [(4,)]
    view = "SELECT r.a, r.b, kr.b AS kb FROM r LEFT JOIN kr ON r.a = kr.a"
    assert bag(s.execute("SELECT * FROM w").fetchall()) == bag(s.execute(view).fetchall())
    assert s.execute("SELECT count(*) FROM r WHERE b = 100").fetchone()[0] == (2 if "100" in sql else 0)


def test_bulk_results_read_column_wise_keep_values_and_fingerprint(tmp_path):
    """INSERT … SELECT, COPY and TRUNCATE of a table whose types are read column by column
    (NULLs, NaN, float32, unsigned, booleans) give the view the values fetchall() would."""
    s = connect()
    s.execute("CREATE TABLE cw (b BOOLEAN, t TINYINT, u UBIGINT, f FLOAT, d DOUBLE, v VARCHAR)")
    s.execute("CREATE INCREMENTAL VIEW vcw AS SELECT * FROM cw WHERE t IS NULL OR t >= 0")
    cap = s._catalog.captures["cw"]
    assert cap.columnwise
    s.execute("INSERT INTO cw SELECT i % 2 = 0, CASE WHEN i % 5 = 0 THEN NULL ELSE i % 100 END, "
              "18446744073709551615 - i, i / 3, CASE WHEN i % 7 = 0 THEN 'nan'::DOUBLE ELSE i / 7 END, "
              "CASE WHEN i % 3 = 0 THEN NULL ELSE 'v' || i END FROM range(3000) r(i)")
    csv = tmp_path / "cw.csv"
    csv.write_text("true,1,5,0.1,0.25,x\n,,,,,\n")
    s.execute(f"COPY cw FROM '{csv}'")

    def same():
        got = sorted(map(repr, s.execute("SELECT * FROM vcw").fetchall()))
        want = sorted(map(repr, s.connection.execute(
            "SELECT * FROM cw WHERE t IS NULL OR t >= 0").fetchall()))
        return got == want and len(got) > 0

    assert same() and not cap.changed(s.connection)
    s.execute("TRUNCATE cw")
    assert s.execute("SELECT count(*) FROM vcw").fetchone()[0] == 0 and not cap.changed(s.connection)


def test_a_volatile_macro_created_later_is_still_seen():
    """The set of stable functions is read once; a macro created after it is not in it, and
    whether it is volatile is asked when a statement calls it: the UPDATE is diffed."""
    s = make_session()
    s.execute("UPDATE r SET b = b + 1 WHERE a = 1")            # reads the stable set
    s.connection.execute("CREATE MACRO coin() AS random() < 0.5")
    cap = s._catalog.captures["r"]
    assert cap.update_rows(s.connection, "UPDATE r SET b = 0 WHERE coin()", None) is None
    assert cap.volatile(s.connection, "UPDATE r SET b = 0 WHERE coin()")
    assert not cap.volatile(s.connection, "UPDATE r SET b = abs(b) WHERE a IN (1, 2)")
    for _ in range(5):
        s.execute("UPDATE r SET b = coalesce(b, 0) + 1 WHERE coin()")
        check(s, "UPDATE … WHERE coin()")


@pytest.mark.parametrize("sql, calls", [
    ("INSERT OR REPLACE INTO t (id, v) VALUES (?, ?)", set()),
    ('INSERT INTO main.t(id) VALUES (1) ON CONFLICT (id) DO UPDATE SET v = abs(excluded.v)', {"abs"}),
    ("INSERT INTO t SELECT f(x) FROM s WHERE EXISTS (SELECT 1) AND x IN (1, 2)", {"f"}),
    ("INSERT INTO t (a) SELECT into_x(1)", {"into_x"}),
    ("UPDATE t SET v = coin() WHERE a = 1", {"coin"}),
])
def test_an_inserts_target_columns_are_not_calls(sql, calls):
    """``INTO t (cols)``, ``VALUES (…)`` and ``ON CONFLICT (…)`` are not function calls: an
    upsert with a column list is not asked about in duckdb_functions() (27 ms a statement)."""
    from ivm_layer.io.duckdb.preimage import call_names

    assert call_names(sql) == calls


def test_autocommit_delete_of_rows_the_views_never_saw():
    """A DELETE outside a transaction runs alone and the views follow it; when it deletes a row
    written around the session (the views do not hold it), the table is diffed instead of the
    views failing, and every view equals DuckDB."""
    s = make_session()
    s.connection.execute("INSERT INTO s VALUES (9, 9), (2, 7)")          # unseen by the session
    s.execute("DELETE FROM s WHERE b = 9")
    check(s, "DELETE of an unseen row")
    assert not s._catalog.captures["s"].changed(s.connection)
    cur = s.execute("DELETE FROM s WHERE b = 2 RETURNING d")
    assert sorted(cur.fetchall()) == [(5,), (5,), (7,)]
    check(s, "DELETE … RETURNING")
