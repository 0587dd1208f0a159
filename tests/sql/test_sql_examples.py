"""Every view in ivm_layer/sql_examples/ compiles, has the class the papers give, and matches DuckDB
(the grouped TPC-H views also over TPC-H-shaped data in test_aggregates_tpch.py)."""

import collections
import datetime
import decimal
import random

import duckdb
import pytest

import ivm_layer
from ivm_layer.sql_examples import DIR as EXAMPLES

RST = {
    "r": {"a": "INTEGER", "b": "INTEGER", "c": "VARCHAR", "k": "INTEGER"},
    "s": {"d": "INTEGER", "e": "INTEGER", "f": "INTEGER", "k": "INTEGER"},
    "t": {"g": "INTEGER", "h": "INTEGER", "i": "VARCHAR", "k": "INTEGER"},
}
TPCH = {
    "region": {"r_regionkey": "INTEGER", "r_name": "VARCHAR"},
    "nation": {"n_nationkey": "INTEGER", "n_name": "VARCHAR", "n_regionkey": "INTEGER"},
    "supplier": {"s_suppkey": "INTEGER", "s_name": "VARCHAR", "s_nationkey": "INTEGER"},
    "customer": {"c_custkey": "INTEGER", "c_name": "VARCHAR", "c_nationkey": "INTEGER", "c_mktsegment": "VARCHAR"},
    "orders": {"o_orderkey": "INTEGER", "o_custkey": "INTEGER", "o_orderstatus": "VARCHAR",
               "o_orderdate": "DATE", "o_orderpriority": "VARCHAR", "o_shippriority": "INTEGER"},
    "lineitem": {"l_orderkey": "INTEGER", "l_linenumber": "INTEGER", "l_quantity": "INTEGER",
                 "l_shipdate": "DATE", "l_commitdate": "DATE", "l_receiptdate": "DATE",
                 "l_suppkey": "INTEGER", "l_extendedprice": "DECIMAL(12,2)", "l_discount": "DECIMAL(4,2)",
                 "l_returnflag": "VARCHAR"},
}
TRANS = {"trans": {"id": "INTEGER", "acc": "INTEGER", "ts": "INTEGER", "amnt": "INTEGER"}}
EVENTS = {"clicks": {"user_id": "INTEGER", "ts": "INTEGER", "page": "VARCHAR"},
          "purchases": {"user_id": "INTEGER", "ts": "INTEGER", "amount": "DECIMAL(10,2)"}}
SHOP = {"orders": {"order_id": "INTEGER", "customer": "INTEGER", "total": "DECIMAL(10,2)"},
        "payments": {"order_id": "INTEGER", "amount": "DECIMAL(10,2)"},
        "blocked": {"customer": "INTEGER"}}

FREE_CONNEX = {"q01", "q02", "q03", "q04", "q05", "q06", "q07", "q08", "q09"}
NOT_FREE_CONNEX = {"q10", "q11", "q12"}


def schema_for(name):
    if name.startswith("q"):
        return RST
    if name.startswith("tpch"):
        return TPCH
    if name.startswith("events"):
        return EVENTS
    if name.startswith("shop"):
        return SHOP
    return TRANS


def value(rng, sql_type):
    if sql_type == "INTEGER":
        return rng.choice([1, 2, 3, 4, 5, None]) if rng.random() < 0.9 else None
    if sql_type == "DATE":
        return datetime.date(2026, 1, 1) + datetime.timedelta(days=rng.randint(0, 60))
    if sql_type.startswith("DECIMAL"):
        # as the database stores them: at the column's scale
        return None if rng.random() < 0.1 else (decimal.Decimal(rng.randint(0, 10)) / 20).quantize(decimal.Decimal("0.01"))
    if rng.random() < 0.3:
        return rng.choice(["/product/1", "/cart", "/home", None])
    return rng.choice(["BUILDING", "EUROPE", "O", "F", "R", "1-URGENT", "2-HIGH", "x"])


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.sql")), ids=lambda p: p.stem)
def test_example_compiles_classifies_and_matches_duckdb(path):
    sql = path.read_text()
    schema = schema_for(path.stem)
    view = ivm_layer.compile_view(sql, schema)
    if path.stem in FREE_CONNEX:
        assert view.query_class in ("free-connex", "q-hierarchical"), view.explain()
    if path.stem in NOT_FREE_CONNEX:
        assert view.query_class == "acyclic-not-free-connex"
    con = duckdb.connect()
    for t, cols in schema.items():
        con.execute(f"CREATE TABLE {t} ({', '.join(f'{c} {ty}' for c, ty in cols.items())})")
    rng = random.Random(path.stem)
    tables = [t for t in schema if t in view.tables]
    present = {t: [] for t in tables}
    for step in range(90):
        t = rng.choice(tables)
        if present[t] and rng.random() < 0.3:  # deletes too (anti-joins, outer joins flip both ways)
            row = present[t].pop(rng.randrange(len(present[t])))
            view.delete(t, row)
            cond = " AND ".join(f"{c} IS NOT DISTINCT FROM ?" for c in schema[t])
            con.execute(f"DELETE FROM {t} WHERE rowid = (SELECT min(rowid) FROM {t} WHERE {cond})", list(row))
        else:
            row = tuple(value(rng, ty) for ty in schema[t].values())
            present[t].append(row)
            view.insert(t, row)
            con.execute(f"INSERT INTO {t} VALUES ({', '.join('?' * len(row))})", list(row))
        if step % 15 == 14:
            expected = collections.Counter(map(tuple, con.execute(sql).fetchall()))
            assert collections.Counter(dict(view.rows())) == expected, step
