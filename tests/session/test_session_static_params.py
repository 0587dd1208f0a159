"""Static tables and parameterized views through a DuckDB session (papers 003 and 004): the
WITH (static = …) option reaches the engine, writes to a static table rebuild the view (and a
ROLLBACK undoes the rebuild), and SELECT … FROM v WHERE input = value is served by lookups —
each checked against DuckDB running the same query over the base tables."""

import random
from collections import Counter

import pytest

from ivm_layer import IVMError
from ivm_layer.session import connect

STATIC_VIEW = "SELECT o.id, o.nk, o.amount, n.name FROM orders o JOIN nation n ON o.nk = n.nk"


def bag(rows):
    return Counter(rows)


def test_static_dimension_in_a_session():
    s = connect()
    s.execute("CREATE TABLE nation (nk INTEGER, name VARCHAR)")
    s.execute("CREATE TABLE orders (id INTEGER, nk INTEGER, amount INTEGER)")
    s.execute("INSERT INTO nation VALUES (1, 'FR'), (2, 'DE'), (3, 'NL')")
    s.execute("INSERT INTO orders SELECT i, i % 4, i * 10 FROM range(40) t(i)")
    s.execute(f"CREATE INCREMENTAL VIEW v WITH (static = 'nation') AS {STATIC_VIEW}")
    assert "C_lin" in s.explain("v")
    assert "static = 'nation'" in s.info("v")[0].definition
    rng = random.Random(3)

    def check():
        assert bag(s.execute("SELECT * FROM v").fetchall()) == bag(s.execute(STATIC_VIEW).fetchall())

    for step in range(25):
        if step % 6 == 5:
            s.execute(f"INSERT INTO nation VALUES ({rng.randint(0, 5)}, 'X{step}')")
        elif step % 2:
            s.execute(f"INSERT INTO orders VALUES ({100 + step}, {rng.randint(0, 5)}, {step})")
        else:
            s.execute(f"DELETE FROM orders WHERE id % 7 = {rng.randint(0, 6)}")
        check()
    rebuilt = s.info("v")[0].rebuilds
    assert rebuilt == 4
    s.execute("BEGIN")
    s.execute("UPDATE nation SET name = 'France' WHERE nk = 1")
    check()
    assert s.info("v")[0].rebuilds == rebuilt + 1
    s.execute("ROLLBACK")
    check()
    assert s.info("v")[0].rebuilds == rebuilt
    s.execute("INSERT INTO orders VALUES (999, 1, 1)")  # the view after the rollback still updates
    check()


PARAM_VIEW = "SELECT t.id, t.amount, t.ts FROM trans t WHERE t.acc = $acc AND t.ts > $since"


def oracle(s, acc, since):
    return bag(s.execute("SELECT id, amount, ts FROM trans WHERE acc = ? AND ts > ?", [acc, since]).fetchall())


def test_parameterized_view_read_through_sql():
    s = connect()
    s.execute("CREATE TABLE trans (id INTEGER, acc INTEGER, ts INTEGER, amount INTEGER)")
    s.execute("INSERT INTO trans SELECT i, i % 5, i * 3, i % 17 FROM range(200) t(i)")
    s.execute(f"CREATE INCREMENTAL VIEW recent AS {PARAM_VIEW}")
    rng = random.Random(8)
    for step in range(20):
        acc, since = rng.randint(0, 6), rng.randint(0, 700)
        got = s.execute(f"SELECT * FROM recent WHERE acc = {acc} AND since = {since}").fetchall()
        assert bag(got) == oracle(s, acc, since)
        got = s.execute("SELECT * FROM recent WHERE since = ? AND acc = ?", [since, acc]).fetchall()
        assert bag(got) == oracle(s, acc, since)
        # the rest of the query is DuckDB's: filters, aggregates, joins with tables
        got = s.execute(f"SELECT count(*), sum(r.amount) FROM recent r WHERE r.acc = {acc} "
                        f"AND r.since = {since} AND r.amount > 3").fetchall()
        want = s.execute(f"SELECT count(*), sum(amount) FROM trans WHERE acc = {acc} AND ts > {since} "
                         "AND amount > 3").fetchall()
        assert got == want
        s.execute(f"INSERT INTO trans VALUES ({1000 + step}, {acc}, {rng.randint(0, 900)}, {step})")
        if step % 3 == 0:
            s.execute(f"DELETE FROM trans WHERE id = {rng.randint(0, 199)}")
    assert s.execute("SELECT * FROM recent WHERE acc = 99 AND since = 0").fetchall() == []
    with pytest.raises(IVMError, match="acc, since"):
        s.execute("SELECT count(*) FROM recent")
    with pytest.raises(IVMError, match="since"):
        s.execute("SELECT * FROM recent WHERE acc = 1")
    with pytest.raises(IVMError, match="MATERIALIZED"):
        s.execute(f"CREATE INCREMENTAL MATERIALIZED VIEW m AS {PARAM_VIEW}")


SESSION_AGG_VIEWS = {
    "agg": ("SELECT r.b, count(*) AS n, sum(r.c) AS total FROM r JOIN s ON r.b = s.b WHERE r.a = $a GROUP BY r.b",
            "SELECT r.b, count(*) AS n, sum(r.c) AS total FROM r JOIN s ON r.b = s.b WHERE r.a = {a} GROUP BY r.b",
            "SELECT * FROM agg WHERE a = {a}"),
    "totals": ("SELECT count(*) AS n, max(r.c) AS hi FROM r WHERE r.a = $a",
             "SELECT count(*) AS n, max(r.c) AS hi FROM r WHERE r.a = {a}",
             "SELECT * FROM totals WHERE a = {a}"),
    "hit": ("SELECT 1 AS hit FROM r JOIN s ON r.b = s.b WHERE r.a = $a AND s.d = $d",
            "SELECT 1 AS hit FROM r JOIN s ON r.b = s.b WHERE r.a = {a} AND s.d = {d}",
            "SELECT * FROM hit WHERE a = {a} AND d = {d}"),
}


def test_parameterized_aggregates_and_boolean_lookups_in_a_session():
    """Issue 28 item 1: GROUP BY / count(*) with a parameter and SELECT 1 AS hit … WHERE r.a = $a,
    read through SQL after each write of a random stream (NULLs, duplicates, deletes)."""
    s = connect()
    s.execute("CREATE TABLE r (a INTEGER, b INTEGER, c INTEGER)")
    s.execute("CREATE TABLE s (b INTEGER, d INTEGER)")
    for name, (sql, _, _) in SESSION_AGG_VIEWS.items():
        s.execute(f"CREATE INCREMENTAL VIEW {name} AS {sql}")
    rng = random.Random(28)

    def val():
        return "NULL" if rng.random() < 0.15 else str(rng.randint(0, 3))

    checked = 0
    for step in range(30):
        if step % 4 == 3:
            s.execute(f"DELETE FROM r WHERE a = {rng.randint(0, 3)} AND b = {rng.randint(0, 3)}")
        elif step % 3 == 2:
            s.execute(f"INSERT INTO s VALUES ({val()}, {val()}), ({val()}, {val()})")
        else:
            row = f"({val()}, {val()}, {val()})"
            s.execute(f"INSERT INTO r VALUES {row}, {row}")  # duplicates
        for name, (_, plain, read) in SESSION_AGG_VIEWS.items():
            a, d = rng.randint(0, 4), rng.randint(0, 4)
            got = bag(s.execute(read.format(a=a, d=d)).fetchall())
            assert got == bag(s.execute(plain.format(a=a, d=d)).fetchall()), (name, step, a, d)
            checked += 1
    assert checked == 90
