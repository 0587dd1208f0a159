"""Exact numbers: SUM/AVG of DECIMAL(38,10) values with 28 integer digits are exact (Python's
default 28-digit context lost integer digits), AVG(DECIMAL) is a DOUBLE in DuckDB and a
numeric in PostgreSQL; and computed columns under dialect="postgres" match PostgreSQL."""

import collections
import random
from decimal import Decimal

import duckdb
import psycopg
import pytest

import ivm_layer

SQL = "SELECT x.g, sum(x.v) AS s, avg(x.v) AS a, count(*) AS n FROM x GROUP BY x.g"
SCHEMA = {"x": {"g": "INTEGER", "v": "DECIMAL(38,10)"}}


def _rows(seed):
    rng = random.Random(seed)
    rows = []
    for _ in range(60):
        whole = rng.randint(-10 ** 27, 10 ** 27)
        frac = rng.randint(0, 10 ** 10 - 1)
        rows.append((rng.randint(1, 7), Decimal(f"{whole}.{frac:010d}")))
    return rows


def test_decimal_38_10_sums_are_exact_in_every_group_and_avg_is_a_double_like_duckdb():
    rows = _rows(1)
    view = ivm_layer.compile_view(SQL, SCHEMA)
    con = duckdb.connect()
    con.execute("CREATE TABLE x (g INTEGER, v DECIMAL(38,10))")
    for i, row in enumerate(rows):
        view.insert("x", row)
        con.execute("INSERT INTO x VALUES (?, ?)", list(row))
        if i % 3 == 2:  # and deletes
            view.delete("x", rows[i - 1])
            con.execute("DELETE FROM x WHERE g = ? AND v = ?", list(rows[i - 1]))
    want = {r[0]: r for r in con.execute(SQL).fetchall()}
    got = {r[0]: r for r, _k in view.rows()}
    assert len(want) == 7 and got.keys() == want.keys()
    for g, (_, s, a, n) in want.items():
        assert got[g][1] == s and isinstance(got[g][1], Decimal)  # exact, all 38 digits
        assert isinstance(got[g][2], float) and got[g][2] == pytest.approx(a, rel=1e-12)
        assert got[g][3] == n


@pytest.fixture
def pg(pg_url):
    with psycopg.connect(pg_url, autocommit=True) as conn:
        yield conn


def test_postgres_avg_of_numeric_is_an_exact_numeric(pg):
    rows = _rows(2)
    pg.execute("CREATE TABLE x (g integer, v numeric(38,10))")
    with pg.cursor() as cur:
        cur.executemany("INSERT INTO x VALUES (%s, %s)", rows)
    view = ivm_layer.compile_view(SQL, SCHEMA, dialect="postgres")
    view.apply({"x": [(r, 1) for r in rows]})
    want = {r[0]: tuple(r) for r in pg.execute(SQL).fetchall()}
    got = {r[0]: r for r, _k in view.rows()}
    assert got == want
    assert all(isinstance(r[2], Decimal) for r in got.values())
    for g, r in want.items():  # same digits, not just the same value
        assert str(got[g][2]) == str(r[2])


PG_VIEWS = [
    "SELECT r.a / 2 AS h, r.a % 3 AS m, -r.a / 3 AS n FROM r",
    "SELECT CASE WHEN r.b > 2 THEN upper(r.c) ELSE lower(r.c) END AS k, coalesce(r.b, 0) + 1 AS b1 FROM r",
    "SELECT r.c || '-' || r.a AS tag, length(r.c) AS len FROM r WHERE (r.a + r.b) % 2 = 0 OR r.c LIKE 'a%'",
    "SELECT round(r.e, 1) AS re, abs(r.e) AS ae, floor(r.e) AS fe, r.e * 2 AS e2 FROM r WHERE NOT (r.a = 1)",
    "SELECT r.a, s.d FROM r JOIN s ON r.a = s.a WHERE r.b + s.d > 3 UNION ALL SELECT s.a, s.d FROM s",
    "SELECT r.e / 3 AS third, r.e / (r.a + 0.5) AS q, round(r.e::float8 * 2) AS rf, round(r.e) AS rn FROM r",
]


@pytest.mark.parametrize("sql", PG_VIEWS)
def test_computed_columns_match_postgres(pg, sql):
    rng = random.Random(sql)
    pg.execute("CREATE TABLE r (a integer, b integer, c text, e numeric(6,2))")
    pg.execute("CREATE TABLE s (a integer, d integer)")
    schema = {"r": {"a": "integer", "b": "integer", "c": "text", "e": "numeric(6,2)"},
              "s": {"a": "integer", "d": "integer"}}
    view = ivm_layer.compile_view(sql, schema, dialect="postgres")
    bag = {"r": [], "s": []}
    for step in range(30):
        t = rng.choice([t for t in ("r", "s") if t in view.tables])
        if bag[t] and rng.random() < 0.3:
            row = bag[t].pop(rng.randrange(len(bag[t])))
            view.delete(t, row)
            cond = " AND ".join(f"{c} IS NOT DISTINCT FROM %s" for c in schema[t])
            pg.execute(f"DELETE FROM {t} WHERE ctid = (SELECT ctid FROM {t} WHERE {cond} LIMIT 1)", row)
        else:
            if t == "r":
                row = (rng.choice([None, *range(-3, 6)]), rng.choice([None, *range(5)]),
                       rng.choice([None, "ab", "Abc", "x"]), rng.choice([None, Decimal(rng.randint(-500, 500)) / 100]))
            else:
                row = (rng.choice([None, *range(5)]), rng.choice([None, *range(5)]))
            bag[t].append(row)
            view.insert(t, row)
            pg.execute(f"INSERT INTO {t} VALUES ({', '.join(['%s'] * len(row))})", row)
        want = collections.Counter(map(tuple, pg.execute(sql).fetchall()))
        assert collections.Counter(dict(view.rows())) == want, (step, sql)
