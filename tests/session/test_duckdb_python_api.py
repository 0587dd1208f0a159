"""What DuckDB's Python users expect of a DuckDB session beyond PEP 249: replacement scans of
the caller's pandas/Arrow/polars objects, served views readable through ``session.connection``,
lazy (streamed) results that survive interleaved statements, record batch readers, and the
connection-style shortcuts (``s.execute(q); s.fetchall()``). Oracle: DuckDB over the base tables."""

from __future__ import annotations

from collections import Counter

import duckdb
import pandas
import polars
import pyarrow
import pytest

import ivm_layer
from ivm_layer import errors


def make():
    s = ivm_layer.connect()
    s.execute("CREATE TABLE t (a INTEGER, b VARCHAR)")
    s.execute("CREATE INCREMENTAL VIEW v AS SELECT a, b FROM t WHERE a % 2 = 0")
    return s


def oracle(s):
    return Counter(s.execute("SELECT a, b FROM t WHERE a % 2 = 0").fetchall())


def test_replacement_scans_of_the_callers_objects_through_the_session():
    s = make()
    frame = pandas.DataFrame({"a": [2, 3, 4], "b": ["x", "y", "z"]})
    s.execute("INSERT INTO t SELECT * FROM frame")
    arrow_rows = pyarrow.table({"a": [6, 7], "b": ["p", "q"]})

    def inner():                    # a name two frames up from the session's code
        s.execute("INSERT INTO t SELECT * FROM arrow_rows")

    inner()
    pl_rows = polars.DataFrame({"a": [8], "b": ["w"]})
    s.execute("INSERT INTO t SELECT a, b FROM pl_rows")
    assert Counter(s.execute("SELECT * FROM v").fetchall()) == oracle(s) == Counter(
        [(2, "x"), (4, "z"), (6, "p"), (8, "w")])
    with pytest.raises(errors.SQLError) as e:
        s.execute("SELECT * FROM no_such_frame")
    assert e.value.sqlstate == "42P01"


def test_served_views_read_through_the_raw_connection_and_twice_in_a_statement():
    s = make()
    s.executemany("INSERT INTO t VALUES (?, ?)", [(i, str(i)) for i in range(20)])
    raw = s.connection.execute("SELECT a, b FROM v").fetchall()
    assert Counter(raw) == oracle(s)
    assert s.connection.execute("SELECT count(*) FROM v x JOIN v y ON x.a = y.a").fetchone() == (10,)
    assert s.execute("WITH w AS (SELECT * FROM v) SELECT count(*) FROM w, w AS w2").fetchone() == (100,)
    s.connection.execute("INSERT INTO t VALUES (100, 'raw')")   # around the session: seen at sync()
    s.sync()
    assert (100, "raw") in s.connection.execute("SELECT * FROM v").fetchall()
    with pytest.raises(duckdb.Error) as e:                        # the raw connection's own error
        s.connection.execute("SELECT nope FROM v")
    assert "_ivm_rows" not in str(e.value)
    with pytest.raises(errors.SQLError) as e2:
        s.execute("SELECT nope FROM v")
    assert "_ivm_rows" not in str(e2.value)


def test_results_stream_from_duckdb():
    """The first row does not wait for the rest: a counting UDF shows DuckDB computed only a
    small part of 2M rows when fetchone() returned."""
    s = ivm_layer.connect()
    calls = [0]

    def seen(x):
        calls[0] += 1
        return x

    s.connection.create_function("seen", seen, ["BIGINT"], "BIGINT", side_effects=True)
    cur = s.execute("SELECT seen(range) FROM range(2000000)")
    assert cur.fetchone() == (0,)
    assert calls[0] < 1_000_000
    assert len(cur.fetchall()) == 1_999_999 and calls[0] == 2_000_000


def test_interleaved_cursors_keep_their_rows():
    s = make()
    s.executemany("INSERT INTO t VALUES (?, ?)", [(i, str(i)) for i in range(10_000)])
    c1 = s.execute("SELECT a FROM t ORDER BY a")
    assert c1.fetchone() == (0,)
    reader = s.execute("SELECT a FROM v ORDER BY a").fetch_record_batch(1000)
    c3 = s.cursor().execute("SELECT count(*) FROM v")           # runs while both are pending
    assert c3.fetchone() == (5000,)
    s.execute("INSERT INTO t VALUES (10001, 'late')")            # a write in between
    assert [r[0] for r in c1.fetchall()] == list(range(1, 10_000))
    assert [v for b in reader for v in b.column(0).to_pylist()] == list(range(0, 10_000, 2))
    assert s.execute("SELECT count(*) FROM v").fetchone() == (5000,)
    # a parameterized view's lookup stays registered as long as its stream needs it
    s.execute("CREATE INCREMENTAL VIEW by_b AS SELECT a, b FROM t WHERE b = $b")
    look = s.execute("SELECT a FROM by_b WHERE b = '42'")
    s.execute("SELECT 1").fetchall()
    assert look.fetchall() == [(42,)]


def test_connection_style_shortcuts_and_arrow_results():
    s = make()
    s.execute("INSERT INTO t VALUES (2, 'x'), (4, 'y')")
    s.execute("SELECT a, b FROM v ORDER BY a")
    assert s.description[0][0] == "a"
    assert s.fetchone() == (2, "x")
    assert s.fetchall() == [(4, "y")]
    s.execute("SELECT a, b FROM v ORDER BY a")
    table = s.fetch_arrow_table()
    assert table.column("a").to_pylist() == [2, 4]
    assert s.execute("SELECT a FROM v ORDER BY a").df()["a"].tolist() == [2, 4]
    assert s.execute("SELECT a FROM v ORDER BY a").pl()["a"].to_list() == [2, 4]
    cur = s.execute("SELECT a FROM v ORDER BY a")
    assert cur.fetchone() == (2,)
    assert cur.arrow().column("a").to_pylist() == [4]          # the rows not fetched yet
