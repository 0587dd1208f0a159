"""Static tables through a PostgreSQL session (paper 003): the view is planned with its static
dimension, dynamic changes stream in incrementally, a change to the static table rebuilds the
view from the stream's base rows (counted in info()), and the view equals PostgreSQL's SELECT."""

from __future__ import annotations

import random
from collections import Counter

import psycopg
import pytest

import ivm_layer

VIEW = "SELECT o.id, o.nk, o.amount, n.name FROM orders o JOIN nation n ON o.nk = n.nk"


@pytest.mark.parametrize("materialized", [False, True])
def test_static_dimension_through_a_postgres_session(pg_url, tmp_path, materialized):
    w = psycopg.connect(pg_url, autocommit=True)
    w.execute("CREATE TABLE nation (nk int, name text)")
    w.execute("CREATE TABLE orders (id int, nk int, amount int)")
    w.execute("INSERT INTO nation VALUES (1, 'FR'), (2, 'DE')")
    w.execute("INSERT INTO orders SELECT i, i % 3, i FROM generate_series(1, 30) i")
    s = ivm_layer.connect(pg_url, state_dir=tmp_path / "st", set_replica_identity=True)
    kind = "MATERIALIZED " if materialized else ""
    s.execute(f"CREATE INCREMENTAL {kind}VIEW v WITH (static = 'nation') AS {VIEW}")
    assert "C_lin" in s.explain("v")
    rng = random.Random(2)
    for step in range(12):
        if step % 4 == 3:
            w.execute(f"INSERT INTO nation VALUES ({rng.randint(0, 3)}, 'N{step}')")
        else:
            w.execute(f"INSERT INTO orders VALUES ({100 + step}, {rng.randint(0, 3)}, {step})")
        s.sync()
        assert Counter(s.execute("SELECT * FROM v").fetchall()) == Counter(w.execute(VIEW).fetchall())
    assert s.info("v")[0].rebuilds == 3
    # parameterized views work in PostgreSQL sessions too (issue 28 item 6)
    s.execute("CREATE INCREMENTAL VIEW p AS SELECT o.id FROM orders o WHERE o.nk = $nk")
    for nk in range(4):
        assert Counter(s.execute("SELECT * FROM p WHERE nk = ?", [nk]).fetchall()) == \
            Counter(w.execute("SELECT id FROM orders WHERE nk = %s", [nk]).fetchall())
    s.close(drop=True)
    w.close()
