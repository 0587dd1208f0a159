"""Issue 30 through real sessions: join trees with several outer joins (3 and 4 tables, mixes with
inner joins, parenthesized, USING), window functions, Top-N per group, ORDER BY … LIMIT, views of
constants and set-returning functions, USING columns unqualified and a short column list — served
and MATERIALIZED — follow INSERT / UPDATE / DELETE statements with NULLs and duplicates, committed
and rolled back; after every step each view equals the database evaluating its SELECT.

DuckDB sessions see writes through the session; PostgreSQL sessions see other clients' writes
through logical replication."""

from __future__ import annotations

import collections
import random
from decimal import Decimal

import psycopg

import ivm_layer
from ivm_layer.session import connect

TABLES = {"a": "k INTEGER, v INTEGER", "b": "k INTEGER, j INTEGER, v INTEGER", "c": "j INTEGER, v INTEGER",
          "d": "k INTEGER, j INTEGER", "t": "g INTEGER, x INTEGER, y INTEGER, z DECIMAL(6,2)"}
TOTAL = "x DESC, y, z"
VIEWS = {
    "v_left3": "SELECT a.k, a.v, b.v AS bv, c.v AS cv FROM a LEFT JOIN b ON a.k = b.k LEFT JOIN c ON b.j = c.j",
    "v_right3": "SELECT a.k, b.j, c.v FROM a RIGHT JOIN b ON a.k = b.k RIGHT JOIN c ON b.j = c.j",
    "v_full4": "SELECT a.v, b.v AS bv, c.v AS cv, d.k AS dk FROM a FULL JOIN b ON a.k = b.k FULL JOIN c ON b.j = c.j "
               "FULL JOIN d ON c.j = d.j",
    "v_mix4": "SELECT a.k, b.v, c.v AS cv, d.k AS dk FROM a JOIN b ON a.k = b.k LEFT JOIN c ON b.j = c.j "
              "JOIN d ON d.j = b.j",
    "v_paren": "SELECT a.v, b.j, c.v AS cv FROM a LEFT JOIN (b JOIN c ON b.j = c.j) ON a.k = b.k",
    "v_using": "SELECT k, a.v, b.j FROM a JOIN b USING (k)",
    "v_self": "SELECT x.k, y.v, z.v AS zv FROM a x LEFT JOIN a y ON x.v = y.k FULL JOIN a z ON y.v = z.k",
    "v_rank": "SELECT g, x, RANK() OVER (PARTITION BY g ORDER BY x DESC) AS r, "
              "DENSE_RANK() OVER (PARTITION BY g ORDER BY x) AS dr FROM t",
    "v_rownum": f"SELECT g, x, y, z, ROW_NUMBER() OVER (PARTITION BY g ORDER BY {TOTAL}) AS rn, "
                f"LAG(x) OVER (PARTITION BY g ORDER BY {TOTAL}) AS px, "
                f"LEAD(y, 1, -1) OVER (PARTITION BY g ORDER BY {TOTAL}) AS ny FROM t",
    "v_running": f"SELECT g, x, y, z, SUM(x) OVER (PARTITION BY g ORDER BY {TOTAL} ROWS UNBOUNDED PRECEDING) AS s, "
                 "MIN(z) OVER (PARTITION BY g ORDER BY x) AS m, COUNT(*) OVER (PARTITION BY g) AS n FROM t",
    "v_top2": f"SELECT * FROM (SELECT g, x, y, z, ROW_NUMBER() OVER (PARTITION BY g ORDER BY {TOTAL}) AS rn FROM t) s "
              "WHERE rn <= 2",
    "v_limit": "SELECT g, x, y, z FROM t ORDER BY x DESC, y, z, g LIMIT 3",
    "v_series": "SELECT a.k, g FROM a, generate_series(1, 3) AS g(g) WHERE a.v >= g",
    "v_values": "SELECT v.name, count(b.k) AS n FROM (VALUES (1, 'one'), (2, 'two')) AS v(id, name) "
                "LEFT JOIN b ON b.k = v.id GROUP BY v.name",
}
SHORT = ("v_short", "CREATE INCREMENTAL MATERIALIZED VIEW v_short (kk) AS SELECT k, sum(v) AS total FROM a GROUP BY k",
         "SELECT k AS kk, sum(v) AS total FROM a GROUP BY k")


def _val(rng, hi=3):
    return "NULL" if rng.random() < 0.15 else str(rng.randint(0, hi))


def _write(rng) -> str:
    t = rng.choice(list(TABLES))
    names = [c.split()[0] for c in TABLES[t].replace("(6,2)", "").split(",")]
    width = len(names)
    r = rng.random()
    if r < 0.5:
        rows = []
        for _ in range(rng.randint(1, 3)):
            vals = [_val(rng, 6 if t == "t" and i == 1 else 3) for i in range(width)]
            if t == "t":
                vals[3] = "NULL" if rng.random() < 0.15 else f"{rng.randint(-300, 300) / 100:.2f}"
            rows.append(f"({', '.join(vals)})")
        if rng.random() < 0.2:
            rows = rows + rows  # duplicates
        return f"INSERT INTO {t} VALUES {', '.join(rows)}"
    col = names[rng.randrange(width)]
    if r < 0.75 and col != "z":
        return f"UPDATE {t} SET {col} = {_val(rng)} WHERE {names[0]} = {rng.randint(0, 3)}"
    return f"DELETE FROM {t} WHERE {col} = {rng.randint(0, 3)}" if col != "z" else f"DELETE FROM {t} WHERE z < 0"


def _bag(rows) -> collections.Counter:
    return collections.Counter(tuple(float(v) if isinstance(v, float) else v for v in r) for r in rows)


def test_coverage_views_follow_a_duckdb_session():
    rng = random.Random(30)
    with connect() as s:
        for t, cols in TABLES.items():
            s.execute(f"CREATE TABLE {t} ({cols})")
        for i, (name, sql) in enumerate(VIEWS.items()):
            kind = "MATERIALIZED " if i % 3 == 0 else ""
            s.execute(f"CREATE INCREMENTAL {kind}VIEW {name} AS {sql}")
        s.execute(SHORT[1])
        s.execute("CREATE INCREMENTAL VIEW v_one AS SELECT 1 AS one, 'x' AS s")
        views = dict(VIEWS, v_short=SHORT[2], v_one="SELECT 1 AS one, 'x' AS s")
        assert [d[0] for d in s.execute("SELECT * FROM v_short").description] == ["kk", "total"]
        for step in range(40):
            rollback = rng.random() < 0.2
            if rollback:
                s.execute("BEGIN")
            for _ in range(rng.randint(1, 3)):
                s.execute(_write(rng))
            if rollback:
                s.execute("ROLLBACK")
            for name, sql in views.items():
                got = _bag(s.execute(f"SELECT * FROM {name}").fetchall())
                want = _bag(s.execute(sql).fetchall())
                assert got == want, (step, name, want - got, got - want)


def test_coverage_views_follow_a_postgres_session(pg_url, tmp_path):
    rng = random.Random(31)
    w = psycopg.connect(pg_url, autocommit=True)
    pg_views = {n: q.replace("DECIMAL(6,2)", "numeric(6,2)") for n, q in VIEWS.items()}
    try:
        for t, cols in TABLES.items():
            w.execute(f"CREATE TABLE {t} ({cols.replace('DECIMAL', 'numeric')})")
        w.execute("INSERT INTO a VALUES (1, 2), (2, NULL), (NULL, 1), (1, 2)")
        with ivm_layer.connect(pg_url, state_dir=tmp_path / "state", set_replica_identity=True) as s:
            for i, (name, sql) in enumerate(pg_views.items()):
                kind = "MATERIALIZED " if i % 3 == 0 else ""
                s.execute(f"CREATE INCREMENTAL {kind}VIEW {name} AS {sql}")
            s.execute(SHORT[1])
            s.execute("CREATE INCREMENTAL VIEW v_one AS SELECT 1 AS one, 'x' AS s")
            views = dict(pg_views, v_short=SHORT[2], v_one="SELECT 1 AS one, 'x' AS s")
            materialized = [n for i, n in enumerate(pg_views) if i % 3 == 0] + ["v_short"]
            for step in range(25):
                rollback = rng.random() < 0.2
                with w.transaction(force_rollback=rollback):
                    for _ in range(rng.randint(1, 3)):
                        w.execute(_write(rng))
                s.sync()
                for name, sql in views.items():
                    got = _bag(r for r, k in s.view(name).rows() for _ in range(k))
                    want = _bag(w.execute(sql).fetchall())
                    assert got == want, (step, name, want - got, got - want)
                    if name in materialized:  # the table too
                        table = _bag(w.execute(f"SELECT * FROM {name}").fetchall())
                        assert table == want, (step, name)
            s.close(drop=True)
    finally:
        w.close()


def test_window_avg_types_follow_the_dialect(pg_url, tmp_path):
    """AVG over integers: a DOUBLE in DuckDB, a numeric in PostgreSQL (its own division)."""
    w = psycopg.connect(pg_url, autocommit=True)
    try:
        w.execute("CREATE TABLE t (g int, x int)")
        w.execute("INSERT INTO t VALUES (1, 1), (1, 2), (1, 2), (2, 7)")
        sql = "SELECT g, x, AVG(x) OVER (PARTITION BY g ORDER BY x) AS m FROM t"
        with ivm_layer.connect(pg_url, state_dir=tmp_path / "state", set_replica_identity=True) as s:
            s.execute(f"CREATE INCREMENTAL VIEW v AS {sql}")
            got = _bag(r for r, k in s.view("v").rows() for _ in range(k))
            assert got == _bag(w.execute(sql).fetchall())
            assert all(isinstance(r[2], Decimal) for r in got)
            s.close(drop=True)
    finally:
        w.close()
