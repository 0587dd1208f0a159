"""Issue 30: views with no base table or over constant inputs (``SELECT 1``, ``VALUES``,
``generate_series`` / ``range`` / ``unnest`` of constants) are maintained with those inputs as
static tables: equal to DuckDB after every step of a stream on the real tables, never changed by
an update, and their constant tables are not tables of the view."""

import collections
import random

import duckdb
import pytest

import ivm_layer
from ivm_layer.errors import UnsupportedSQLError, UpdateError

SCHEMA = {"a": {"i": "INTEGER", "j": "INTEGER"}}
VIEWS = [
    "SELECT 1",
    "SELECT 1 AS x, 'a' AS y, 2 + 3 AS z",
    "SELECT * FROM (VALUES (1, 'one'), (2, 'two'), (2, 'two')) AS v(id, name)",
    "SELECT * FROM generate_series(1, 10, 3)",
    "SELECT * FROM range(4) r",
    "SELECT x FROM unnest([3, 1, 3]) AS u(x)",
    "SELECT i FROM a, generate_series(1, 3)",
    "SELECT a.i, g FROM a JOIN generate_series(0, 3) AS g ON a.j = g",
    "SELECT g, count(a.i) AS n FROM generate_series(0, 3) AS g LEFT JOIN a ON a.j = g GROUP BY g",
    "SELECT v.name, sum(a.j) AS s FROM a JOIN (VALUES (1, 'x'), (2, 'y')) AS v(id, name) ON a.i = v.id GROUP BY v.name",
    "SELECT a.i FROM a WHERE a.j IN (SELECT 2)",
    "SELECT i FROM a UNION SELECT 7",
]


@pytest.mark.parametrize("sql", VIEWS)
def test_constant_views_match_duckdb(sql):
    view = ivm_layer.compile_view(sql, SCHEMA)
    assert all(t == "a" for t in view.tables)
    con = duckdb.connect()
    con.execute("CREATE TABLE a (i INTEGER, j INTEGER)")
    rng = random.Random(len(sql))
    bag = []
    for step in range(15):
        if view.tables:
            batch = []
            for _ in range(rng.randint(1, 3)):
                if bag and rng.random() < 0.35:
                    batch.append((bag.pop(rng.randrange(len(bag))), -1))
                else:
                    row = (rng.choice([None, 0, 1, 2]), rng.choice([None, 0, 1, 2, 3]))
                    bag.append(row)
                    batch.append((row, 1))
            view.apply({"a": batch})
            con.execute("DELETE FROM a")
            if bag:
                con.executemany("INSERT INTO a VALUES (?, ?)", bag)
        want = collections.Counter(map(tuple, con.execute(sql).fetchall()))
        assert collections.Counter(dict(view.rows())) == want, (step, sql)
        assert len(view) == sum(want.values())
    assert "constant inputs" in view.explain()


def test_constant_tables_are_not_tables_of_the_view():
    view = ivm_layer.compile_view("SELECT i, g FROM a, generate_series(1, 2) AS g", SCHEMA)
    assert view.tables == ["a"]
    with pytest.raises(UpdateError, match="unknown table"):
        view.apply({"__const_0": [((5,), 1)]})
    only = ivm_layer.compile_view("SELECT 1 AS one", SCHEMA)
    assert only.tables == [] and list(only.rows()) == [((1,), 1)]


def test_refusals_name_what_was_written():
    for sql, fragment in [("SELECT * FROM a, generate_series(1, a.i)", "over something other than constants"),
                          ("SELECT * FROM generate_series(1, 100000000)", "at most"),
                          ("SELECT * FROM read_csv('x.csv')", "table function"),
                          ("SELECT a.i FROM a WHERE a.j IN (SELECT 2) OR a.i IS NULL", r"\(\(SELECT 2\)\)")]:
        with pytest.raises(UnsupportedSQLError, match=fragment):
            ivm_layer.compile_view(sql, SCHEMA)
