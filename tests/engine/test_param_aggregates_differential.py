"""Parameterized aggregates and Boolean lookups (issue 28 item 1) against DuckDB.

Each view runs a random insert/delete stream (NULLs, duplicate rows) and, after every step,
looks up present, absent and NULL inputs; DuckDB evaluates the same SQL with the placeholders
bound. Shapes: a global aggregate per input (SQL's row over no input for an absent one), a
grouped aggregate over a join, HAVING, MIN/MAX, Boolean lookups ``SELECT 1 AS hit … WHERE
r.a = $a`` (004's ·|ABCDE), a constant beside an output column.
"""

import random
from collections import Counter

import duckdb
import pytest

from ivm_layer import compile_view

SCHEMA = {"r": ["a", "b", "c"], "s": ["b", "d"], "t": ["a", "e"]}
VIEWS = [
    ("global", "SELECT count(*) AS n, sum(r.c) AS total, count(r.c) AS nc FROM r WHERE r.a = $a", ["a"]),
    ("grouped join", ("SELECT r.b, count(*) AS n, min(r.c) AS lo, max(s.d) AS hi "
                      "FROM r JOIN s ON r.b = s.b WHERE r.a = $a GROUP BY r.b"), ["a"]),
    ("having", "SELECT r.b, sum(r.c) AS total FROM r WHERE r.a = $a GROUP BY r.b HAVING count(*) > 1", ["a"]),
    ("two inputs", "SELECT count(*) AS n FROM r JOIN s ON r.b = s.b WHERE r.a = $a AND s.d = $d", ["a", "d"]),
    ("global having", "SELECT count(*) AS n FROM r WHERE r.a = $a HAVING count(*) > 0", ["a"]),
    ("boolean", "SELECT 1 AS hit FROM r JOIN s ON r.b = s.b WHERE r.a = $a AND s.d = $d", ["a", "d"]),
    ("boolean ABCDE", ("SELECT 1 AS hit FROM r JOIN s ON r.b = s.b JOIN t ON t.a = r.a "
                       "WHERE r.a = $a AND r.b = $b AND r.c = $c AND s.d = $d AND t.e = $e"),
     ["a", "b", "c", "d", "e"]),
    ("constant and output", "SELECT 'x' AS tag, r.c, 1 AS one FROM r WHERE r.a = $a", ["a"]),
]


def _val(rnd: random.Random):
    return None if rnd.random() < 0.15 else rnd.randint(0, 3)


def _duck(con, sql: str, params: list[str], values: tuple) -> Counter:
    return Counter(con.execute(sql, dict(zip(params, values))).fetchall())


def _reload(con, tables: dict[str, Counter]) -> None:
    for t, rows in tables.items():
        con.execute(f"DELETE FROM {t}")
        flat = [r for r, k in rows.items() for _ in range(k)]
        if flat:
            con.executemany(f"INSERT INTO {t} VALUES ({', '.join('?' * len(SCHEMA[t]))})", flat)


@pytest.mark.parametrize("name,sql,params", VIEWS, ids=[v[0] for v in VIEWS])
def test_parameterized_aggregates_and_boolean_lookups_match_duckdb(name, sql, params):
    con = duckdb.connect()
    for t, cols in SCHEMA.items():
        con.execute(f"CREATE TABLE {t} ({', '.join(c + ' INTEGER' for c in cols)})")
    for seed in range(3):
        rnd = random.Random(f"{name}:{seed}")
        view = compile_view(sql, SCHEMA)
        assert view.params == params
        tables = {t: Counter() for t in SCHEMA}
        checked = 0
        for step in range(30):
            t = rnd.choice(list(SCHEMA))
            present = [r for r, k in tables[t].items() if k]
            if present and rnd.random() < 0.35:
                row = rnd.choice(present)
                view.delete(t, row)
                tables[t][row] -= 1
            else:
                row = tuple(_val(rnd) for _ in SCHEMA[t])
                k = rnd.choice((1, 1, 2))  # duplicates
                view.apply({t: [(row, k)]})
                tables[t][row] += k
            _reload(con, tables)
            for _ in range(3):
                values = tuple(_val(rnd) for _ in params)
                got = Counter()
                for row, k in view.lookup(*values):
                    got[row] += k
                assert got == _duck(con, sql, params, values), (name, seed, step, values)
                checked += 1
        assert checked == 90
