"""Reads of served (non-materialized) views through a PostgreSQL session: count(*) and
SELECT * [LIMIT n] answered by the engine, other queries over a TEMP table kept in step by the
view's changes (O(change) per read), right across transaction blocks and ROLLBACK."""

from __future__ import annotations

import random
from collections import Counter

import psycopg

import ivm_layer

VIEW = "SELECT r.a, r.b, s.c FROM r JOIN s ON r.b = s.b WHERE r.a < s.c"


def test_served_reads_follow_writes_and_rollbacks(pg_url, tmp_path):
    w = psycopg.connect(pg_url, autocommit=True)
    w.execute("CREATE TABLE r (a int, b int)")
    w.execute("CREATE TABLE s (b int, c int)")
    w.execute("INSERT INTO r SELECT i, i % 7 FROM generate_series(1, 300) i")
    w.execute("INSERT INTO s SELECT i % 7, i FROM generate_series(1, 60) i")
    s = ivm_layer.connect(pg_url, state_dir=tmp_path / "st", set_replica_identity=True)
    s.execute(f"CREATE INCREMENTAL VIEW v AS {VIEW}")
    rng = random.Random(5)

    def check():
        want = Counter(w.execute(VIEW).fetchall())
        cur = s.execute("SELECT count(*) FROM v")
        assert cur.description[0].name == "count" and cur.fetchall() == [(sum(want.values()),)]
        assert Counter(s.execute("SELECT * FROM v").fetchall()) == want
        assert len(s.execute("SELECT * FROM v LIMIT 5").fetchall()) == min(5, sum(want.values()))
        got = s.execute("SELECT b, count(*) FROM v WHERE c > 10 GROUP BY b").fetchall()
        assert Counter(got) == Counter(w.execute(f"SELECT b, count(*) FROM ({VIEW}) q WHERE c > 10 GROUP BY b").fetchall())

    check()
    for step in range(12):
        x = rng.randint(1, 400)
        if step % 4 == 3:
            s.execute("BEGIN")
            s.execute(f"INSERT INTO r VALUES ({x}, {x % 7})")
            s.execute("SELECT count(*) FROM v WHERE a > 0").fetchall()
            s.execute(rng.choice(["COMMIT", "ROLLBACK"]))
        elif step % 2:
            s.execute(f"DELETE FROM r WHERE a % 13 = {x % 13}")
        else:
            s.execute(f"INSERT INTO s VALUES ({x % 7}, {x}), ({x % 5}, {x // 2})")
        check()
    s.close(drop=True)
    w.close()
