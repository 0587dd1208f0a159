"""``CREATE INCREMENTAL VIEW v WITH (epsilon = ε) AS …`` (paper 004's heavy/light trade-off) in
a DuckDB session: the option reaches the engine, ``SELECT * FROM v WHERE a = …`` is answered
from the heavy/light structure after every write of a random stream (NULLs, duplicates,
updates, deletes), checked against DuckDB running the query with the input substituted."""

import random
from collections import Counter

import pytest

from ivm_layer import IVMError
from ivm_layer.session import connect

VIEW = "SELECT r.b, r.c FROM r JOIN s ON r.b = s.b WHERE r.a = $a"
PLAIN = "SELECT r.b, r.c FROM r JOIN s ON r.b = s.b WHERE r.a = {a}"


@pytest.mark.parametrize("eps", [0, 0.5, 1])
def test_heavy_light_view_in_a_duckdb_session(eps):
    s = connect()
    s.execute("CREATE TABLE r (a INTEGER, b INTEGER, c INTEGER)")
    s.execute("CREATE TABLE s (b INTEGER)")
    s.execute("INSERT INTO r SELECT i % 6, CASE WHEN i % 3 = 0 THEN 0 ELSE i % 11 END, i % 4 FROM range(60) t(i)")
    s.execute("INSERT INTO s VALUES (0), (1), (2), (2), (NULL)")
    s.execute(f"CREATE INCREMENTAL VIEW v WITH (epsilon = {eps}) AS {VIEW}")
    assert f"class CQAP1, ε = {eps:g}" in s.explain("v")
    rng = random.Random(int(eps * 100) + 3)

    def val():
        return "NULL" if rng.random() < 0.1 else str(rng.randint(0, 10))

    for step in range(25):
        roll = step % 5
        if roll == 0:
            s.execute(f"INSERT INTO r VALUES ({val()}, 0, {val()}), ({val()}, 0, {val()})")
        elif roll == 1:
            s.execute(f"INSERT INTO s VALUES ({val()})")
        elif roll == 2:
            s.execute(f"DELETE FROM s WHERE b = {rng.randint(0, 10)}")
        elif roll == 3:
            s.execute(f"UPDATE r SET b = {rng.randint(0, 3)} WHERE a = {rng.randint(0, 5)} AND c = {rng.randint(0, 3)}")
        else:
            row = f"({val()}, {val()}, {val()})"
            s.execute(f"INSERT INTO r VALUES {row}, {row}")  # duplicates
        for _ in range(3):
            a = rng.randint(0, 7)
            got = Counter(s.execute(f"SELECT * FROM v WHERE a = {a}").fetchall())
            assert got == Counter(s.execute(PLAIN.format(a=a)).fetchall()), (eps, step, a)
            got = Counter(s.execute("SELECT b, c FROM v WHERE a = ?", [a]).fetchall())
            assert got == Counter(s.execute(PLAIN.format(a=a)).fetchall()), (eps, step, a)
    if eps == 0:
        assert "0 heavy of" not in s.explain("v")  # ε = 0: every key value is heavy


def test_epsilon_option_errors_in_a_session():
    s = connect()
    s.execute("CREATE TABLE r (a INTEGER, b INTEGER)")
    with pytest.raises(IVMError, match="between 0 and 1"):
        s.execute("CREATE INCREMENTAL VIEW v WITH (epsilon = 3) AS SELECT r.b FROM r WHERE r.a = $a")
    with pytest.raises(IVMError, match="CQAP0"):  # a one-table lookup has nothing to trade
        s.execute("CREATE INCREMENTAL VIEW v WITH (epsilon = 0.5) AS SELECT r.b FROM r WHERE r.a = $a")
    with pytest.raises(IVMError, match="options are"):
        s.execute("CREATE INCREMENTAL VIEW v WITH (delta = 0.5) AS SELECT r.b FROM r WHERE r.a = $a")


def test_epsilon_option_round_trips_through_the_statement_text():
    from ivm_layer.sql.statements import classify

    st = classify("CREATE INCREMENTAL VIEW v WITH (static = 'n', epsilon = 0.25) AS SELECT r.b FROM r WHERE r.a = $a")
    assert st.epsilon == 0.25 and st.static == ["n"]
    again = classify(st.definition())
    assert again.epsilon == 0.25 and again.static == ["n"] and again.select_sql == st.select_sql
    assert classify("CREATE INCREMENTAL VIEW v AS SELECT r.b FROM r").epsilon is None


def test_daemon_views_file_refuses_epsilon_rather_than_dropping_it():
    from ivm_layer.daemon.state import parse_views

    with pytest.raises(IVMError, match="epsilon.*daemon"):
        parse_views("CREATE INCREMENTAL VIEW v WITH (epsilon = 0.5) AS SELECT r.b FROM r JOIN s ON r.b = s.b "
                    "WHERE r.a = $1")
