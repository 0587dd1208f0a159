"""A DuckDB session is safe by construction: tampered catalog rows touch nothing but their own
view, a raising subscriber cannot put the engine ahead of the database, SQL the session need
not understand reaches DuckDB untouched, and sources replaced or dropped behind the session's
back stop only the views that read them."""

import warnings

import duckdb
import pytest

from ivm_layer import IVMError, SQLError
from ivm_layer.session.core import SubscriberWarning
from ivm_layer.errors import CatalogWarning, SourceGoneError
from ivm_layer.session import connect


def _file_db(tmp_path):
    url = f"duckdb:///{tmp_path / 'app.duckdb'}"
    s = connect(url)
    s.execute("CREATE TABLE r(a INTEGER, b INTEGER)")
    s.execute("CREATE TABLE u(a INTEGER, b INTEGER)")
    s.execute("INSERT INTO r SELECT i, i % 10 FROM range(1000) t(i)")
    s.execute("INSERT INTO u SELECT i, i FROM range(5) t(i)")
    s.execute("CREATE INCREMENTAL VIEW good AS SELECT r.a, u.b FROM r JOIN u ON r.b = u.a")
    s.execute("CREATE INCREMENTAL MATERIALIZED VIEW mat AS SELECT a FROM r WHERE b = 3")
    s.close()
    return url


def test_tampered_catalog_rows_touch_nothing_else(tmp_path):
    url = _file_db(tmp_path)
    conn = duckdb.connect(str(tmp_path / "app.duckdb"))
    tampered = [
        # stored under one name, defining another (an existing table): must not replace r
        ("evil", "materialized", "CREATE INCREMENTAL MATERIALIZED VIEW r AS SELECT * FROM u"),
        # a materialized view whose name is a user table the layer did not create
        ("u", "materialized", "CREATE INCREMENTAL MATERIALIZED VIEW u AS SELECT * FROM r"),
        # not a view definition at all
        ("junk", "incremental", "DROP TABLE r"),
        ("odd", "weird-kind", "CREATE INCREMENTAL VIEW odd AS SELECT * FROM r"),
        ("broken", "incremental", "CREATE INCREMENTAL VIEW broken AS SELECT * FROM no_such_table"),
    ]
    for row in tampered:
        conn.execute("INSERT INTO ivm.views VALUES (?, ?, ?)", list(row))
    conn.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = connect(url)
    assert sum(isinstance(w.message, CatalogWarning) for w in caught) == len(tampered)
    assert s.execute("SELECT count(*) FROM r").fetchone() == (1000,)
    assert s.execute("SELECT count(*) FROM u").fetchone() == (5,)
    assert s.execute("SELECT count(*) FROM good").fetchone() == (500,)
    assert s.execute("SELECT count(*) FROM mat").fetchone() == (100,)
    for name in ("evil", "junk", "odd", "broken"):
        with pytest.raises(IVMError, match="could not be resumed"):
            s.view(name)
    stopped = {i.name for i in s.info() if i.kind == "stopped"}
    assert stopped == {"evil", "u", "junk", "odd", "broken"}
    # the healthy views keep working, and the bad rows can be dropped
    s.execute("INSERT INTO r VALUES (2000, 3)")
    assert s.execute("SELECT count(*) FROM mat").fetchone() == (101,)
    for name in ("evil", "junk", "odd", "broken"):
        s.execute(f"DROP VIEW {name}")
    assert s.execute("SELECT count(*) FROM u").fetchone() == (5,)
    s.close()


def test_raising_subscriber_never_leaves_the_engine_ahead():
    s = connect()
    s.execute("CREATE TABLE r(a INTEGER)")
    s.execute("CREATE INCREMENTAL VIEW v AS SELECT a FROM r WHERE a > 0")
    seen = []

    def bad(change):
        seen.append(change)
        raise RuntimeError("subscriber bug")

    s.subscribe("v", bad)
    with pytest.warns(SubscriberWarning, match="subscriber bug"):
        s.execute("INSERT INTO r VALUES (1), (2)")
    assert seen == [[((1,), 1), ((2,), 1)]] or sorted(seen[0]) == [((1,), 1), ((2,), 1)]
    assert s.execute("SELECT count(*) FROM r").fetchone() == (2,)  # the write is committed
    assert sorted(s.execute("SELECT * FROM v").fetchall()) == [(1,), (2,)]
    # inside a transaction the subscriber hears at COMMIT, once, and nothing on ROLLBACK
    s.execute("BEGIN")
    s.execute("INSERT INTO r VALUES (3)")
    assert len(seen) == 1
    s.execute("ROLLBACK")
    assert len(seen) == 1
    s.execute("BEGIN")
    s.execute("INSERT INTO r VALUES (4)")
    s.execute("DELETE FROM r WHERE a = 1")
    with pytest.warns(SubscriberWarning):
        s.execute("COMMIT")
    assert sorted(seen[-1]) == [((1,), -1), ((4,), 1)]
    assert sorted(s.execute("SELECT * FROM v").fetchall()) == [(2,), (4,)]


def test_sql_the_session_need_not_understand_goes_to_duckdb_untouched():
    s = connect()
    s.execute("CREATE TABLE r(a INTEGER)")
    s.execute("INSERT INTO r VALUES (1), (2)")
    s.execute("CREATE INCREMENTAL VIEW v AS SELECT a FROM r")
    deep = "SELECT " + "(" * 60 + "1" + ")" * 60
    assert s.execute(deep).fetchall() == [(1,)]
    deep_view = "SELECT " + "(" * 60 + "(SELECT count(*) FROM v)" + ")" * 60
    assert s.execute(deep_view).fetchall() == [(2,)]
    deep_write = "INSERT INTO r SELECT " + "(" * 60 + "3" + ")" * 60
    s.execute(deep_write)
    assert sorted(s.execute("SELECT * FROM v").fetchall()) == [(1,), (2,), (3,)]
    with pytest.raises(SQLError) as e:  # DuckDB's own error, not the layer's tokenizer's
        s.execute("SELECT 'abc")
    assert isinstance(e.value.__cause__, duckdb.ParserException) and e.value.sqlstate == "42601"
    with pytest.raises(SQLError) as e:
        s.execute("INSERT INTO r VALUES ((1)")
    assert isinstance(e.value.__cause__, duckdb.ParserException)
    assert len(s.view("v")) == 3


def test_sources_replaced_or_dropped_behind_the_sessions_back():
    s = connect()
    s.execute("CREATE TABLE r(a INTEGER)")
    s.execute("CREATE TABLE t(a INTEGER)")
    s.execute("INSERT INTO r VALUES (1), (2)")
    s.execute("INSERT INTO t VALUES (1)")
    s.execute("CREATE INCREMENTAL VIEW on_r AS SELECT a FROM r")
    s.execute("CREATE INCREMENTAL VIEW on_t AS SELECT a FROM t")
    with pytest.raises(IVMError, match="read by incremental view"):
        s.execute("CREATE OR REPLACE TABLE r AS SELECT 5 AS a")
    with pytest.raises(IVMError, match="read by incremental view"):
        s.execute("DROP TABLE r")
    with pytest.raises(IVMError, match="catalog of incremental views"):
        s.execute("DROP SCHEMA ivm CASCADE")
    assert s.execute("SELECT count(*) FROM r").fetchone() == (2,)
    # behind the session's back: the view on r stops alone, the other keeps working
    s.connection.execute("DROP TABLE r")
    s.sync()
    with pytest.raises(SourceGoneError, match="'r' was dropped"):
        s.execute("SELECT * FROM on_r")
    s.execute("INSERT INTO t VALUES (2)")
    assert sorted(s.execute("SELECT * FROM on_t").fetchall()) == [(1,), (2,)]
    assert {i.name: i.kind for i in s.info()} == {"on_r": "stopped", "on_t": "incremental"}
    # replaced behind the session's back with other columns: stops too
    s.connection.execute("CREATE OR REPLACE TABLE t AS SELECT 'x' AS a")
    s.sync()
    with pytest.raises(SourceGoneError):
        s.view("on_t")
    s.execute("DROP VIEW on_r")
    s.execute("DROP VIEW on_t")
    assert s.views == []


def test_a_raising_engine_level_subscriber_leaves_engine_and_database_together():
    """Issue 29, case 1: a callback registered on the engine view (``s.view(name).subscribe``)
    runs after DuckDB committed, through the same road as the session's subscribers: when it
    raises, the write stays committed in DuckDB and in the view alike (a warning says so), and
    inside a transaction it hears nothing before COMMIT and nothing of a ROLLBACK."""
    s = connect()
    s.execute("CREATE TABLE r(a INTEGER)")
    s.execute("CREATE INCREMENTAL VIEW w AS SELECT a FROM r WHERE a > 0")
    heard = []

    def bad(change):
        heard.append(sorted(change))
        raise RuntimeError("engine subscriber bug")

    s.view("w").subscribe(bad)
    with pytest.warns(SubscriberWarning, match="engine subscriber bug"):
        s.execute("INSERT INTO r VALUES (1), (2)")
    assert heard == [[((1,), 1), ((2,), 1)]]
    assert s.execute("SELECT count(*) FROM r").fetchone() == (2,)          # committed in DuckDB
    assert sorted(s.execute("SELECT * FROM w").fetchall()) == [(1,), (2,)]  # and in the view
    assert len(s.view("w")) == 2
    s.execute("BEGIN")
    s.execute("INSERT INTO r VALUES (3)")
    s.execute("DELETE FROM r WHERE a = 1")
    assert len(heard) == 1                                                  # not before COMMIT
    s.execute("ROLLBACK")
    assert len(heard) == 1 and len(s.view("w")) == 2                        # nothing of a rollback
    s.execute("BEGIN")
    s.execute("INSERT INTO r VALUES (4)")
    s.execute("UPDATE r SET a = 5 WHERE a = 4")
    with pytest.warns(SubscriberWarning):
        s.execute("COMMIT")
    assert heard[-1] == [((5,), 1)]                                         # consolidated, once
    assert sorted(s.execute("SELECT * FROM w").fetchall()) == [(1,), (2,), (5,)]
