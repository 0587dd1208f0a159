"""One small application, written once against the DB-API surface of a session, run unchanged
on a DuckDB session and on a PostgreSQL session (the ``any_session`` fixture): schema, an
incremental view, bulk loading with ``executemany``, the three placeholder styles,
transactions through ``commit()``/``rollback()``, errors by their PEP 249 class and SQLSTATE,
and the results as tuples, pandas, Arrow and polars. Every answer is checked against the
database's own answer to the view's query over the same rows (the oracle)."""

from __future__ import annotations

import random
from collections import Counter

import pandas
import polars
import pyarrow
import pytest

import ivm_layer
from ivm_layer.errors import IntegrityError, ProgrammingError, SQLError

VIEW_SQL = ("SELECT o.id, o.amount, c.region FROM orders o JOIN customers c ON o.cust = c.id "
            "WHERE o.amount > 10")


def oracle(s) -> Counter:
    """The database's own answer to the view's query (a plain SELECT over the tables)."""
    return Counter(s.execute(VIEW_SQL).fetchall())


def view_rows(s) -> Counter:
    return Counter(s.execute("SELECT * FROM big_orders").fetchall())


def setup_app(s) -> None:
    cur = s.cursor()
    cur.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, region TEXT)")
    cur.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, cust INTEGER, amount INTEGER)")
    cur.executemany("INSERT INTO customers VALUES (?, ?)", [(i, f"r{i % 3}") for i in range(10)])
    cur.execute(f"CREATE INCREMENTAL VIEW big_orders AS {VIEW_SQL}")
    cur.close()


def test_the_application_runs_on_both_backends(any_session):
    s = any_session
    setup_app(s)
    rng = random.Random(5)
    rows = [(i, rng.randrange(10), rng.randrange(100)) for i in range(500)]
    cur = s.cursor()
    cur.executemany("INSERT INTO orders VALUES (?, ?, ?)", rows)
    assert cur.rowcount == 500
    assert view_rows(s) == oracle(s) and sum(oracle(s).values()) > 0

    # the three placeholder styles, on both backends
    cur.execute("UPDATE orders SET amount = amount + ? WHERE cust = ?", (50, 3))
    cur.execute("DELETE FROM orders WHERE id < $1 AND cust <> $2", (20, 3))
    n = cur.execute("SELECT count(*) FROM big_orders WHERE region = $region", {"region": "r0"}).fetchone()[0]
    assert n == sum(k for r, k in oracle(s).items() if r[2] == "r0")
    assert view_rows(s) == oracle(s)

    # a transaction through the DB-API methods: rolled back, then committed
    before = view_rows(s)
    cur.execute("BEGIN")
    cur.execute("DELETE FROM orders WHERE cust = ?", (1,))
    s.rollback()
    assert view_rows(s) == before == oracle(s)
    cur.execute("BEGIN")
    cur.executemany("INSERT INTO orders VALUES ($1, $2, $3)", [(1000 + i, i % 10, 99) for i in range(30)])
    s.commit()
    assert view_rows(s) == oracle(s)
    s.commit()          # no transaction open: nothing to do
    s.rollback()

    # errors by class and SQLSTATE, the driver's exception as the cause; the session goes on
    with pytest.raises(IntegrityError) as e:
        cur.execute("INSERT INTO orders VALUES (?, ?, ?)", (1000, 1, 1))
    assert e.value.sqlstate == "23505" and e.value.__cause__ is not None
    with pytest.raises(SQLError) as e:
        cur.execute("SELEC 1")
    assert e.value.sqlstate == "42601" and isinstance(e.value, ivm_layer.ProgrammingError)
    with pytest.raises(ProgrammingError) as e:
        cur.execute("SELECT * FROM no_such_table")
    assert e.value.sqlstate == "42P01"
    assert view_rows(s) == oracle(s)

    # results: tuples, iteration, pandas, Arrow, polars, record batches
    cur.execute("SELECT id, amount, region FROM big_orders ORDER BY id")
    assert [d[0] for d in cur.description] == ["id", "amount", "region"]
    first = cur.fetchone()
    two = cur.fetchmany(2)
    rest = list(cur)
    everything = [first, *two, *rest]
    assert Counter(everything) == oracle(s)
    df = s.execute("SELECT id, amount, region FROM big_orders ORDER BY id").df()
    assert isinstance(df, pandas.DataFrame) and list(df.columns) == ["id", "amount", "region"]
    assert [tuple(r) for r in df.itertuples(index=False)] == everything
    table = s.execute("SELECT id, amount, region FROM big_orders ORDER BY id").arrow()
    assert isinstance(table, pyarrow.Table) and table.num_rows == len(everything)
    assert list(zip(*(table.column(i).to_pylist() for i in range(3)))) == everything
    pl = s.execute("SELECT id, amount, region FROM big_orders ORDER BY id").pl()
    assert isinstance(pl, polars.DataFrame) and pl.rows() == everything
    reader = s.execute("SELECT id FROM big_orders ORDER BY id").fetch_record_batch(7)
    ids = [v for b in reader for v in b.column(0).to_pylist()]
    assert ids == [r[0] for r in everything]

    # pandas.read_sql takes the session as a DB-API connection
    with pytest.warns(UserWarning, match="SQLAlchemy"):   # pandas' note about non-SQLAlchemy connections
        frame = pandas.read_sql("SELECT id, amount, region FROM big_orders ORDER BY id", s)
    assert [tuple(r) for r in frame.itertuples(index=False)] == everything
    with pytest.warns(UserWarning, match="SQLAlchemy"):
        frame = pandas.read_sql("SELECT id FROM big_orders WHERE amount > ? ORDER BY id", s, params=(50,))
    assert frame["id"].tolist() == [r[0] for r in everything if r[1] > 50]
