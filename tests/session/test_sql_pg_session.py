"""A smaller set of the issue-15 constructs through a PostgreSQL session (logical replication):
after other clients' writes, each view equals PostgreSQL evaluating the same SELECT."""

from __future__ import annotations

import random
from collections import Counter

import psycopg

import ivm_layer

VIEWS = {
    "v_computed": "SELECT r.a / 2 AS h, upper(r.c) AS u, CASE WHEN s.d > 2 THEN 'hi' ELSE 'lo' END AS k "
                  "FROM r JOIN s ON r.a = s.a WHERE (r.b + r.a) % 2 = 0 OR r.c LIKE 'a%'",
    "v_union": "SELECT r.a, r.b FROM r UNION SELECT s.a, s.d FROM s",
    "v_not_exists": "SELECT r.a, r.c FROM r WHERE NOT EXISTS (SELECT 1 FROM s WHERE s.a = r.a AND s.d > 1)",
    "v_left": "SELECT r.a, s.d, coalesce(s.e, 0) AS e FROM r LEFT JOIN s ON r.a = s.a",
    "v_avg": "SELECT s.a, avg(s.e) AS m, sum(s.e * 2) AS t FROM s GROUP BY s.a",
}


def _v(rng, hi=4):
    return None if rng.random() < 0.15 else rng.randint(0, hi)


def test_views_follow_other_clients_through_a_postgres_session(pg_url, tmp_path):
    rng = random.Random(5)
    w = psycopg.connect(pg_url, autocommit=True)
    w.execute("CREATE TABLE r (a int, b int, c text)")
    w.execute("CREATE TABLE s (a int, d int, e numeric(6,2))")
    w.execute("INSERT INTO r VALUES (1, 2, 'ab'), (2, NULL, 'x'), (3, 3, NULL)")
    try:
        with ivm_layer.connect(pg_url, state_dir=tmp_path / "state", set_replica_identity=True) as s:
            for name, sql in VIEWS.items():
                s.execute(f"CREATE INCREMENTAL VIEW {name} AS {sql}")
            for step in range(12):
                for _ in range(3):
                    t = rng.random()
                    if t < 0.4:
                        w.execute("INSERT INTO r VALUES (%s, %s, %s)", (_v(rng), _v(rng), rng.choice([None, "ab", "x"])))
                    elif t < 0.8:
                        w.execute("INSERT INTO s VALUES (%s, %s, %s)", (_v(rng), _v(rng), rng.choice([None, 1.25, 0.5])))
                    elif t < 0.9:
                        w.execute("UPDATE s SET d = %s WHERE a = %s", (_v(rng), rng.randint(0, 4)))
                    else:
                        w.execute("DELETE FROM r WHERE a = %s", (rng.randint(0, 4),))
                s.sync()
                for name, sql in VIEWS.items():
                    got = Counter({r: k for r, k in s.view(name).rows()})
                    want = Counter(map(tuple, w.execute(sql).fetchall()))
                    assert got == want, (step, name)
            s.close(drop=True)
    finally:
        w.close()

