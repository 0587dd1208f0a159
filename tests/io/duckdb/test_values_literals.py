"""``INSERT … VALUES`` of literals read by the session (:mod:`ivm_layer.io.duckdb.literals`): the
rewritten statement leaves a table exactly as DuckDB's own statement does (randomized, value by
value, the sign of zero and the bits of every double included); statements the module does not
take are left alone; through a session the rewrite is used and the views stay equal to DuckDB."""

import math
import random
import struct

import duckdb
import pytest

from ivm_layer.io.duckdb import literals
from ivm_layer.session import connect
from ivm_layer.session.router import route

COLUMNS = ["ti", "si", "i", "b", "ub", "d", "s", "f"]
TYPES = ["TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UBIGINT", "DOUBLE", "VARCHAR", "BOOLEAN"]
TABLE = "CREATE TABLE t (" + ", ".join(f"{c} {t}" for c, t in zip(COLUMNS, TYPES)) + ")"
STRINGS = ["NULL", "'x'", "'y'", "''''"]
BITS = {"TINYINT": 7, "SMALLINT": 15, "INTEGER": 31, "BIGINT": 63}


def literal(rng, typ, top=3):
    if rng.random() < 0.1:
        return "NULL"
    if typ in BITS:
        hi = (1 << BITS[typ]) - 1
        return str(rng.choice([0, -0, 1, -1, hi, -hi - 1, rng.randint(-hi - 1, hi), rng.randint(-9, 9)]))
    if typ == "UBIGINT":
        return str(rng.choice([0, (1 << 64) - 1, rng.randint(0, 1 << 64 - 1)]))
    if typ == "DOUBLE":
        kind = rng.random()
        if kind < 0.3:
            return str(rng.randint(-10**(15 - top) + 1, 10**(15 - top) - 1))
        sign = rng.choice(["", "-"])
        scale = rng.randint(0, top)     # the statement's largest scale: its digits stay < 2**53
        whole = rng.choice(["0", str(rng.randint(0, 99)), str(rng.randint(0, 10**(15 - top) - 1))])
        frac = "".join(rng.choice("0123456789") for _ in range(scale))
        return f"{sign}{whole}.{frac}"
    if typ == "VARCHAR":
        return "'" + "".join(rng.choice(["a", "'", "''", " ", "é", "\\", "\n", ",", ")", "x"])
                             for _ in range(rng.randint(0, 6))).replace("''", "'").replace("'", "''") + "'"
    return rng.choice(["TRUE", "FALSE", "true", "False"])


def exact(rows):
    """Rows with doubles as their bits (so -0.0 ≠ 0.0 and every rounding shows)."""
    return sorted((tuple(struct.pack("<d", x) if isinstance(x, float) else x for x in r) for r in rows), key=repr)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_rewrite_leaves_the_table_as_duckdbs_own_values_statement(seed):
    rng = random.Random(seed)
    plain, fast = duckdb.connect(), duckdb.connect()
    for con in (plain, fast):
        con.execute(TABLE)
    taken = 0
    for step in range(60):
        cols = COLUMNS if rng.random() < 0.5 else rng.sample(COLUMNS, rng.randint(1, len(COLUMNS)))
        types = [TYPES[COLUMNS.index(c)] for c in cols]
        head = "INSERT INTO t" if cols == COLUMNS else f"INSERT INTO t ({', '.join(cols)})"
        scale = rng.choice([0, 1, 2, 3, 7, 12])
        rows = [" (" + ", ".join(literal(rng, t, scale) for t in types) + ")" for _ in range(rng.randint(1, 30))]
        text = f"{head} VALUES{','.join(rows)}" + rng.choice(["", ";", " ;\n"])
        r = route(text)
        got = literals.rewrite(text, r.target_span[1], COLUMNS, TYPES)
        assert got is not None, text      # every statement generated here is of the shape taken
        taken += 1
        plain.execute(text)
        fast.execute(*got)
        assert exact(plain.execute("SELECT * FROM t").fetchall()) == \
            exact(fast.execute("SELECT * FROM t").fetchall()), text
    assert taken == 60


def test_a_negative_zero_and_a_long_decimal_are_stored_as_duckdb_stores_them():
    con = duckdb.connect()
    con.execute("CREATE TABLE t (d DOUBLE)")
    for text in ("INSERT INTO t VALUES (-0), (-0.0), (0.1), (123456789012.345)",
                 "INSERT INTO t VALUES (0.3000000000000000)"):
        sql, params = literals.rewrite(text, len("INSERT INTO t"), ["d"], ["DOUBLE"])
        con.execute(sql, params)
    got = [r[0] for r in con.execute("SELECT d FROM t").fetchall()]
    assert [math.copysign(1, x) for x in got[:2]] == [1.0, 1.0]
    assert got[2:] == [0.1, 123456789012.345, 0.3]


@pytest.mark.parametrize("text", [
    "INSERT INTO t VALUES (1e5)",                   # an exponent
    "INSERT INTO t VALUES (1.5::DOUBLE)",           # a cast
    "INSERT INTO t VALUES (abs(-1))",               # a function
    "INSERT INTO t VALUES (1 + 1)",                 # an expression
    "INSERT INTO t VALUES (DEFAULT)",
    "INSERT INTO t VALUES ('a')",                   # a string into a number column
    "INSERT INTO t VALUES (12345678901234567.5)",   # digits past 2**53
    "INSERT INTO t VALUES (1), (2) RETURNING d",
    "INSERT INTO t VALUES (1) ON CONFLICT DO NOTHING",
    "INSERT INTO t VALUES (1) -- comment",
    "INSERT INTO t VALUES (1, 2)",                  # wider than the table
    "INSERT INTO t (x) VALUES (1)",                 # no such column
    "INSERT INTO t (d, d) VALUES (1, 2)",
    "INSERT INTO t VALUES (.5)",
    "INSERT INTO t VALUES (?)",
    "INSERT INTO t VALUES ($1)",
])
def test_other_statements_are_left_as_written(text):
    assert literals.rewrite(text, len("INSERT INTO t"), ["d"], ["DOUBLE"]) is None


@pytest.mark.parametrize("typ,cell", [
    ("INTEGER", "2147483648"), ("TINYINT", "-129"), ("UBIGINT", "-1"), ("INTEGER", "1.5"),
    ("VARCHAR", "1"), ("VARCHAR", "E'a'"), ("VARCHAR", "'a' 'b'"), ("BOOLEAN", "1"),
    ("DATE", "'2020-01-01'"), ("FLOAT", "1.5"), ("DECIMAL(9,2)", "1.5"), ("HUGEINT", "1"),
])
def test_cells_whose_stored_value_is_not_certain_are_left_to_duckdb(typ, cell):
    assert literals.rewrite(f"INSERT INTO t VALUES ({cell})", len("INSERT INTO t"), ["c"], [typ]) is None


def test_through_a_session_values_inserts_use_the_rewrite_and_the_views_stay_exact(monkeypatch):
    calls = []
    real = literals.rewrite

    def counting(*a):
        out = real(*a)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(literals, "rewrite", counting)
    rng = random.Random(7)
    s = connect()
    s.execute("CREATE TABLE r (a BIGINT, b INTEGER, c VARCHAR)")
    s.execute("CREATE TABLE q (b INTEGER, w DOUBLE)")
    views = {"v_eq": "SELECT r.a, r.c, q.w FROM r JOIN q ON r.b = q.b",
             "v_lt": "SELECT r.a, q.w FROM r, q WHERE r.a < q.w",
             "v_g": "SELECT b, count(*) AS n, sum(a) AS sa FROM r GROUP BY b"}
    for name, sql in views.items():
        s.execute(f"CREATE INCREMENTAL VIEW {name} AS {sql}")

    def cell(p_null=0.15, hi=5):
        return "NULL" if rng.random() < p_null else str(rng.randint(-1, hi))

    for step in range(40):
        if rng.random() < 0.6:
            rows = ", ".join(f"({cell()}, {cell()}, {rng.choice(STRINGS)})" for _ in range(rng.randint(1, 25)))
            s.execute(f"INSERT INTO r VALUES {rows}")
        elif rng.random() < 0.7:
            rows = ", ".join(f"({cell()}, {rng.choice(['NULL', f'{rng.randint(-1, 9)}.{rng.randint(0, 99)}'])})" for _ in range(rng.randint(1, 10)))
            s.execute(f"INSERT INTO q (b, w) VALUES {rows}")
        else:
            s.execute(f"DELETE FROM r WHERE a = {rng.randint(-1, 5)}")
        for name, sql in views.items():
            assert sorted(s.execute(f"SELECT * FROM {name}").fetchall(), key=repr) == \
                sorted(s.execute(sql).fetchall(), key=repr), (name, step)
    assert calls and all(calls)
    s.close()


def test_a_failing_values_insert_outside_a_transaction_leaves_the_views_as_they_were():
    from ivm_layer.errors import IntegrityError

    s = connect()
    s.execute("CREATE TABLE k (id BIGINT PRIMARY KEY, v INTEGER)")
    s.execute("CREATE INCREMENTAL VIEW kv AS SELECT v, count(*) AS n FROM k GROUP BY v")
    s.execute("INSERT INTO k VALUES (1, 10), (2, 10), (3, 20)")
    with pytest.raises(IntegrityError):
        s.execute("INSERT INTO k VALUES (4, 30), (1, 40)")        # the second row breaks the key
    s.execute("INSERT OR IGNORE INTO k VALUES (2, 50), (5, 20)")   # one row ignored: not the fast path
    want = sorted(s.execute("SELECT v, count(*) FROM k GROUP BY v").fetchall())
    assert sorted(s.execute("SELECT * FROM kv").fetchall()) == want == [(10, 2), (20, 2)]
    s.execute("BEGIN")
    s.execute("INSERT INTO k VALUES (6, 60)")
    s.execute("ROLLBACK")
    assert sorted(s.execute("SELECT * FROM kv").fetchall()) == want
    s.close()
