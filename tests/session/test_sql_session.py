"""The issue-15 constructs through a DuckDB session: after every write statement (INSERT,
UPDATE, DELETE from other statements of the same session), each incremental view served by
the session equals DuckDB running the view's SELECT."""

import collections
import random

import pytest

from ivm_layer.session import connect

VIEWS = {
    "v_computed": "SELECT r.a + r.b AS x, upper(r.c) AS u, CASE WHEN s.d > 2 THEN 'hi' ELSE 'lo' END AS k "
                  "FROM r JOIN s ON r.a = s.a WHERE (r.b + r.a) % 2 = 0 OR r.c LIKE 'a%'",
    "v_residual": "SELECT r.a, s.d FROM r JOIN s ON r.a = s.a WHERE r.b + s.d > 3 OR r.b = s.d",
    "v_natural": "SELECT * FROM r NATURAL JOIN s",
    "v_with": "WITH big AS (SELECT a, b FROM r WHERE b > 1) SELECT big.a, s.e FROM big JOIN s ON big.a = s.a",
    "v_union": "SELECT r.a, r.b FROM r UNION ALL SELECT s.a, s.d FROM s",
    "v_union_distinct": "SELECT r.a FROM r UNION SELECT s.d FROM s",
    "v_not_exists": "SELECT r.a, r.c FROM r WHERE NOT EXISTS (SELECT 1 FROM s WHERE s.a = r.a)",
    "v_not_in": "SELECT r.a, r.b FROM r WHERE r.b NOT IN (SELECT s.d FROM s)",
    "v_left": "SELECT r.a, r.c, s.d, coalesce(s.e, 0) AS e FROM r LEFT JOIN s ON r.a = s.a AND s.d > 0",
    "v_full": "SELECT r.c, s.d FROM r FULL OUTER JOIN s ON r.a = s.a",
    "v_grouped": "SELECT s.a, sum(CASE WHEN s.d > 1 THEN s.e ELSE 0 END) AS hi, count(*) AS n FROM s GROUP BY s.a",
    "v_q13": "SELECT c_count, count(*) AS custdist FROM (SELECT r.a, count(s.d) AS c_count FROM r "
             "LEFT JOIN s ON r.a = s.a GROUP BY r.a) AS c_orders GROUP BY c_count",
    "v_nested_join": "SELECT r.c, g.total FROM r JOIN (SELECT s.a, sum(s.e) AS total FROM s GROUP BY s.a) g "
                     "ON r.a = g.a",
}


def _v(rng, hi=4):
    return "NULL" if rng.random() < 0.15 else str(rng.randint(0, hi))


def _write(rng) -> str:
    r = rng.random()
    if r < 0.35:
        rows = ", ".join(f"({_v(rng)}, {_v(rng)}, {rng.choice(['NULL', repr('ab'), repr('Abc'), repr('x')])})"
                         for _ in range(rng.randint(1, 3)))
        return f"INSERT INTO r VALUES {rows}"
    if r < 0.65:
        rows = ", ".join(f"({_v(rng)}, {_v(rng)}, {rng.choice(['NULL', '1.25', '2.50', '0.75'])})"
                         for _ in range(rng.randint(1, 3)))
        return f"INSERT INTO s VALUES {rows}"
    if r < 0.8:
        return rng.choice([f"UPDATE r SET b = b + 1 WHERE a = {rng.randint(0, 4)}",
                           f"UPDATE s SET d = {_v(rng)} WHERE a = {rng.randint(0, 4)}",
                           f"UPDATE r SET c = 'a' || c WHERE b = {rng.randint(0, 4)}"])
    return rng.choice([f"DELETE FROM r WHERE a = {rng.randint(0, 4)}", f"DELETE FROM s WHERE d = {rng.randint(0, 4)}",
                       "DELETE FROM s WHERE d IS NULL"])


@pytest.mark.parametrize("seed", [1])
def test_views_follow_writes_through_a_duckdb_session(seed):
    rng = random.Random(seed)
    with connect() as s:
        s.execute("CREATE TABLE r (a INTEGER, b INTEGER, c VARCHAR)")
        s.execute("CREATE TABLE s (a INTEGER, d INTEGER, e DECIMAL(6,2))")
        s.execute("INSERT INTO r VALUES (1, 2, 'ab'), (2, NULL, 'x'), (3, 3, NULL)")
        for name, sql in VIEWS.items():
            s.execute(f"CREATE INCREMENTAL VIEW {name} AS {sql}")
        for step in range(20):
            s.execute(_write(rng))
            for name, sql in VIEWS.items():
                got = collections.Counter(map(tuple, s.execute(f"SELECT * FROM {name}").fetchall()))
                want = collections.Counter(map(tuple, s.execute(sql).fetchall()))
                assert got == want, (step, name)
