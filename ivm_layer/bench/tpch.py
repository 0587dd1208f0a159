"""TPC-H-shaped data and the equi-join workloads of paper 002 §5.1.

The paper streams dbgen output as single-tuple inserts; we cannot ship dbgen, so this module
generates a database with the TPC-H *shape* at a tiny, fractional scale factor: the same
tables and key/foreign-key structure (lineitem → orders → customer → nation → region,
lineitem/partsupp → part, supplier), the same cardinality ratios (per SF: 10k suppliers,
150k customers, 200k parts with 4 suppliers each, 10 orders per customer, 1–7 line items per
order), uniform attribute values, dates as day numbers (0 = 1992-01-01). Only the columns the
queries read are generated. The stream holds every row of the query's tables in a seeded
random order (a line item may arrive before its order, as in any out-of-order change stream).

Full joins FQ1–FQ4 are the FROM–WHERE equi-join parts of TPC-H queries (002 §5.1 takes "the
FROM clause of the corresponding queries"; its exact list is in its reference [12], which we
do not have, so ours are named after their source query): FQ1 = Q3 (customer, orders,
lineitem), FQ2 = Q10 (+ nation), FQ3 = Q2 (part, partsupp, supplier, nation, region),
FQ4 = Q7 (supplier, lineitem, orders, customer and nation twice). The grouped aggregates
AQ3, AQ10, AQ18 keep their query's joins, constant filters and GROUP BY, with SUM over a
single column (no arithmetic inside the aggregate) and without Q18's HAVING subquery.
"""

from __future__ import annotations

import random

from .streams import Update

SCHEMA = {
    "region": ["r_regionkey", "r_name"],
    "nation": ["n_nationkey", "n_name", "n_regionkey"],
    "supplier": ["s_suppkey", "s_name", "s_nationkey", "s_acctbal"],
    "customer": ["c_custkey", "c_name", "c_nationkey", "c_mktsegment", "c_acctbal"],
    "part": ["p_partkey", "p_name", "p_type", "p_size"],
    "partsupp": ["ps_partkey", "ps_suppkey", "ps_availqty", "ps_supplycost"],
    "orders": ["o_orderkey", "o_custkey", "o_orderstatus", "o_totalprice", "o_orderdate",
               "o_shippriority"],
    "lineitem": ["l_orderkey", "l_linenumber", "l_partkey", "l_suppkey", "l_quantity",
                 "l_extendedprice", "l_discount", "l_returnflag", "l_shipdate"],
}

# rows per unit of scale factor (lineitem: 4 per order on average)
PER_SF = {"supplier": 10_000, "customer": 150_000, "part": 200_000, "partsupp": 800_000,
          "orders": 1_500_000, "lineitem": 6_000_000}
FIXED = {"region": 5, "nation": 25}
SEGMENTS = ["AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD", "MACHINERY"]
REGIONS = ["AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"]
DAYS = 2406  # 1992-01-01 .. 1998-08-02


def schema_for(tables: list[str]) -> dict[str, list[str]]:
    return {t: SCHEMA[t] for t in tables}


def scale_for(n: int, tables: list[str]) -> float:
    """The scale factor whose tables (those the query reads) hold about ``n`` rows in all."""
    fixed = sum(FIXED.get(t, 0) for t in tables)
    per = sum(PER_SF.get(t, 0) for t in tables)
    return max(n - fixed, 1) / per if per else 0.0


def generator(tables: list[str]):
    """A stream generator ``(n, rng) -> [(table, row, +1)]`` over ``tables``."""
    want = set(tables)

    def gen(n: int, rng: random.Random) -> list[Update]:
        sf = scale_for(n, tables)
        n_supp = max(2, round(PER_SF["supplier"] * sf))
        n_cust = max(2, round(PER_SF["customer"] * sf))
        n_part = max(2, round(PER_SF["part"] * sf))
        n_ord = max(2, round(PER_SF["orders"] * sf))
        rows: list[Update] = []

        def emit(t, row):
            if t in want:
                rows.append((t, row, 1))

        for r in range(5):
            emit("region", (r, REGIONS[r]))
        for nk in range(25):
            emit("nation", (nk, "NATION%02d" % nk, nk % 5))
        if want & {"supplier", "partsupp", "lineitem"}:
            for s in range(1, n_supp + 1):
                emit("supplier", (s, "Supplier#%06d" % s, rng.randrange(25),
                                  rng.randint(-999, 9999)))
        if want & {"customer"}:
            for c in range(1, n_cust + 1):
                emit("customer", (c, "Customer#%06d" % c, rng.randrange(25), rng.choice(SEGMENTS),
                                  rng.randint(-999, 9999)))

        def supp_of(p, i):  # the 4 suppliers of part p (TPC-H's formula, simplified)
            return (p - 1 + i * max(1, n_supp // 4)) % n_supp + 1

        if want & {"part", "partsupp"}:
            for p in range(1, n_part + 1):
                emit("part", (p, "part%06d" % p, "TYPE%d" % rng.randrange(150), rng.randint(1, 50)))
                for i in range(4):
                    emit("partsupp", (p, supp_of(p, i), rng.randint(1, 9999), rng.randint(100, 100_000)))
        if want & {"orders", "lineitem"}:
            for o in range(1, n_ord + 1):
                date = rng.randrange(DAYS - 151)
                emit("orders", (o, rng.randint(1, n_cust), rng.choice("OFP"), rng.randint(1000, 500_000),
                                date, 0))
                if "lineitem" in want:
                    for ln in range(1, rng.randint(1, 7) + 1):
                        p = rng.randint(1, n_part)
                        q = rng.randint(1, 50)
                        emit("lineitem", (o, ln, p, supp_of(p, rng.randrange(4)), q,
                                          q * rng.randint(900, 2000), rng.randint(0, 10),
                                          rng.choice("RAN"), date + rng.randint(1, 121)))
        rng.shuffle(rows)
        return rows

    return gen


FULL_JOINS = {
    "FQ1": ("TPC-H Q3 joins: customer ⋈ orders ⋈ lineitem",
            ["customer", "orders", "lineitem"],
            "SELECT * FROM customer, orders, lineitem "
            "WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey"),
    "FQ2": ("TPC-H Q10 joins: customer ⋈ orders ⋈ lineitem ⋈ nation",
            ["customer", "orders", "lineitem", "nation"],
            "SELECT * FROM customer, orders, lineitem, nation "
            "WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey AND c_nationkey = n_nationkey"),
    "FQ3": ("TPC-H Q2 joins: part ⋈ partsupp ⋈ supplier ⋈ nation ⋈ region",
            ["part", "partsupp", "supplier", "nation", "region"],
            "SELECT * FROM part, partsupp, supplier, nation, region "
            "WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey "
            "AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey"),
    "FQ4": ("TPC-H Q7 joins: supplier ⋈ lineitem ⋈ orders ⋈ customer ⋈ nation n1 ⋈ nation n2",
            ["supplier", "lineitem", "orders", "customer", "nation"],
            "SELECT * FROM supplier, lineitem, orders, customer, nation n1, nation n2 "
            "WHERE s_suppkey = l_suppkey AND o_orderkey = l_orderkey AND c_custkey = o_custkey "
            "AND s_nationkey = n1.n_nationkey AND c_nationkey = n2.n_nationkey"),
}

AGGREGATES = {
    "AQ3": ("TPC-H Q3: revenue of unshipped BUILDING orders, per order",
            ["customer", "orders", "lineitem"],
            "SELECT l_orderkey, o_orderdate, o_shippriority, SUM(l_extendedprice) AS revenue "
            "FROM customer, orders, lineitem "
            "WHERE c_mktsegment = 'BUILDING' AND c_custkey = o_custkey AND l_orderkey = o_orderkey "
            "AND o_orderdate < 1170 AND l_shipdate > 1170 "
            "GROUP BY l_orderkey, o_orderdate, o_shippriority"),
    "AQ10": ("TPC-H Q10: returned-item revenue per customer",
             ["customer", "orders", "lineitem", "nation"],
             "SELECT c_custkey, c_name, c_acctbal, n_name, SUM(l_extendedprice) AS revenue "
             "FROM customer, orders, lineitem, nation "
             "WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey AND l_returnflag = 'R' "
             "AND c_nationkey = n_nationkey "
             "GROUP BY c_custkey, c_name, c_acctbal, n_name"),
    "AQ18": ("TPC-H Q18 (without the HAVING subquery): quantity per order and customer",
             ["customer", "orders", "lineitem"],
             "SELECT c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice, SUM(l_quantity) AS qty "
             "FROM customer, orders, lineitem "
             "WHERE c_custkey = o_custkey AND o_orderkey = l_orderkey "
             "GROUP BY c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice"),
}
