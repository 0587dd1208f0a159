"""Views over incremental views in a DuckDB session: each is maintained from the base-table
changes (the views it reads are inlined as WITH items: joins directly, aggregates as nested
views), equals DuckDB evaluating plain views with the same definitions after every write,
survives a reconnect whatever the catalog order, and DROP VIEW keeps dependency order."""

import random
from collections import Counter

import duckdb
import pytest

from ivm_layer import SQLError
from ivm_layer.session import connect

DEFS = [  # (name, definition); later ones read earlier ones
    ("z_base", "SELECT r.a, r.b, s.c FROM r JOIN s ON r.b = s.b"),
    ("a_over", "SELECT z.a, z.c, t.d FROM z_base z JOIN t ON z.a = t.a WHERE z.c < 8"),
    ("m_totals", "SELECT b, count(*) AS n, sum(c) AS total FROM z_base GROUP BY b"),
    ("m_big", "SELECT b, n FROM m_totals WHERE n > 1"),
]


def writes(rng):
    t = rng.choice("rst")
    if rng.random() < 0.6:
        vals = ", ".join(f"({rng.randint(0, 5)}, {rng.randint(0, 9)})" for _ in range(rng.randint(1, 3)))
        return f"INSERT INTO {t} VALUES {vals}"
    return f"DELETE FROM {t} WHERE {'abd'['rst'.index(t)] if t != 's' else 'b'} = {rng.randint(0, 5)}"


def setup(execute):
    execute("CREATE TABLE r (a INTEGER, b INTEGER)")
    execute("CREATE TABLE s (b INTEGER, c INTEGER)")
    execute("CREATE TABLE t (a INTEGER, d INTEGER)")
    execute("INSERT INTO r VALUES (1, 2), (2, 2), (3, 4)")
    execute("INSERT INTO s VALUES (2, 5), (4, 1), (4, 7)")
    execute("INSERT INTO t VALUES (1, 10), (3, 30)")


def test_views_over_views_follow_every_write(tmp_path):
    url = f"duckdb:///{tmp_path / 'v.duckdb'}"
    s = connect(url)
    oracle = duckdb.connect()
    setup(s.execute)
    setup(oracle.execute)
    for name, sql in DEFS:
        s.execute(f"CREATE INCREMENTAL VIEW {name} AS {sql}")
        oracle.execute(f"CREATE VIEW {name} AS {sql}")
    rng = random.Random(6)

    def check(session):
        for name, _ in DEFS:
            assert Counter(session.execute(f"SELECT * FROM {name}").fetchall()) == \
                Counter(oracle.execute(f"SELECT * FROM {name}").fetchall()), name

    for step in range(40):
        w = writes(rng)
        s.execute(w)
        oracle.execute(w)
        check(s)
        if step == 20:  # reconnect: a_over sorts before z_base but must resume after it
            s.close()
            s = connect(url)
            check(s)
    with pytest.raises(SQLError, match="a_over.*read 'z_base'"):
        s.execute("DROP VIEW z_base")
    s.execute("DROP VIEW m_big")
    s.execute("DROP VIEW a_over, m_totals")
    s.execute("DROP VIEW z_base")
    assert s.views == []
    s.close()
