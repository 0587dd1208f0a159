"""What a psql user sends works through a PostgreSQL session: COPY both ways, multi-statement
strings, SET, LISTEN/NOTIFY, prepared statements, and reads inside BEGIN … COMMIT that see
the transaction's own writes — checked against PostgreSQL's own SELECT."""

from __future__ import annotations

from collections import Counter

import psycopg
import pytest

import ivm_layer
from ivm_layer.errors import IVMError, SQLError

Q = "SELECT r.a, s.c FROM r JOIN s ON r.b = s.b"


@pytest.fixture
def env(pg_url, tmp_path):
    w = psycopg.connect(pg_url, autocommit=True)
    w.execute("CREATE TABLE r (a int, b int)")
    w.execute("CREATE TABLE s (b int, c text)")
    w.execute("INSERT INTO r VALUES (1, 10), (2, 20)")
    w.execute("INSERT INTO s VALUES (10, 'x'), (20, 'y')")
    s = ivm_layer.connect(pg_url, state_dir=tmp_path / "state", set_replica_identity=True)
    s.execute(f"CREATE INCREMENTAL VIEW v AS {Q}")
    yield s, w
    s.close(drop=True)
    w.close()


def want(w) -> Counter:
    return Counter(w.execute(Q).fetchall())


def served(s) -> Counter:
    return Counter(s.execute("SELECT * FROM v").fetchall())


def test_copy_in_both_directions(env):
    s, w = env
    s.execute("COPY r FROM STDIN", "3\t10\n4\t20\n")                      # text data
    s.execute("COPY r (a, b) FROM STDIN", [(5, 10), (6, None)])           # rows
    with s.copy("COPY s FROM STDIN WITH (FORMAT csv)") as cp:             # psycopg's copy()
        cp.write("10,z\n")
        cp.write("30,w\n")
    assert served(s) == want(w) and sum(want(w).values()) == 8
    lines = s.execute("COPY (SELECT a, b FROM r ORDER BY a) TO STDOUT").fetchall()
    assert lines[:2] == [("1\t10",), ("2\t20",)] and lines[-1] == ("6\t\\N",)
    with s.copy("COPY r TO STDOUT") as cp:
        out = b"".join(bytes(c) for c in cp)
    assert out.count(b"\n") == 6
    with pytest.raises(IVMError, match="COPY … FROM STDIN needs its data"):
        s.execute("COPY r FROM STDIN")
    with pytest.raises(SQLError, match="invalid input syntax for type integer"):
        s.execute("COPY r FROM STDIN", "not a number\t1\n")
    with pytest.raises(SQLError, match="invalid input syntax"):
        with s.copy("COPY r FROM STDIN") as cp:
            cp.write("x\ty\n")
    assert s.execute("SELECT count(*) FROM r").fetchone() == (6,)          # the session still works


def test_multi_statement_strings_set_prepare_and_notify(env):
    s, w = env
    cur = s.execute("INSERT INTO r VALUES (7, 10); INSERT INTO r VALUES (8, 20); SELECT count(*) FROM v")
    assert cur.fetchone() == (sum(want(w).values()),) == (4,)
    # a string the splitter hands over whole (dollar quoting): PostgreSQL runs it, the last result counts
    cur = s.execute("DO $$ BEGIN INSERT INTO r VALUES (9, 10); END $$; SELECT 'done'")
    assert cur.fetchall() == [("done",)]
    assert served(s) == want(w)
    s.execute("SET statement_timeout = 5000")
    s.execute("SET search_path TO public")
    assert s.execute("SHOW statement_timeout").fetchone() == ("5s",)
    s.execute("PREPARE ins (int, int) AS INSERT INTO r VALUES ($1, $2)")
    s.execute("EXECUTE ins (11, 20)")
    s.execute("INSERT INTO r VALUES (%s, %s)", [12, 10])
    assert served(s) == want(w)
    s.execute("DEALLOCATE ins")
    s.execute("LISTEN ivm_test")
    w.execute("NOTIFY ivm_test, 'hello'")
    got = [n.payload for n in s.connection.notifies(timeout=5, stop_after=1)]
    assert got == ["hello"]
    s.execute("UNLISTEN ivm_test")


def test_reads_inside_a_transaction_see_its_own_writes(env):
    s, w = env
    before = want(w)
    s.execute("BEGIN")
    s.execute("INSERT INTO r VALUES (3, 10)")
    s.execute("DELETE FROM s WHERE b = 20")
    mine = served(s)                                   # PostgreSQL evaluates the view in the transaction
    assert mine == Counter({(1, "x"): 1, (3, "x"): 1})
    assert want(w) == before                           # nobody else sees them
    s.execute("ROLLBACK")
    assert served(s) == before
    s.execute("BEGIN")
    s.execute("INSERT INTO r VALUES (4, 20)")
    assert served(s) == before + Counter({(4, "y"): 1})
    s.execute("COMMIT")
    assert served(s) == want(w) == before + Counter({(4, "y"): 1})
    assert Counter({r: k for r, k in s.view("v").rows()}) == want(w)
