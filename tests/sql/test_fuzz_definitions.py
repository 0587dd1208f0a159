"""Fuzzing view definitions through a session (issue 29, case 10): mutations of the example views
(ivm_layer/sql_examples/*.sql) typed as ``CREATE INCREMENTAL VIEW`` into a DuckDB session either
create the view or raise an ``ivm_layer`` error (or DuckDB's own, for a second statement after a
``;`` that goes to DuckDB as it is) — never a raw Python exception, never a hang.

CI runs a small budget; ``-m slow`` runs 2,000 definitions. Planning time is kept (the slowest
is printed); a definition that takes more than ``HANG_SECONDS`` fails the test."""

from __future__ import annotations

import re
import signal
import time

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ivm_layer
from ivm_layer import sql_examples
from ivm_layer.errors import IVMError

HANG_SECONDS = 20
#: what a user may see: the layer's errors, or the database's own for text it passes through
ALLOWED = (IVMError, duckdb.Error)
TABLES = {
    "q": "CREATE TABLE r (a INT, b INT, c VARCHAR, k INT); CREATE TABLE s (d INT, e INT, f INT, k INT);"
         "CREATE TABLE t (g INT, h INT, i VARCHAR, k INT)",
    "fraud": "CREATE TABLE trans (id INT, acc INT, ts INT, amnt INT)",
    "events": "CREATE TABLE clicks (user_id INT, ts INT, page VARCHAR);"
              "CREATE TABLE purchases (user_id INT, ts INT, amount DECIMAL(10,2))",
    "shop": "CREATE TABLE orders (order_id INT, customer INT, total DECIMAL(10,2));"
            "CREATE TABLE payments (order_id INT, amount DECIMAL(10,2)); CREATE TABLE blocked (customer INT)",
    "tpch": "CREATE TABLE region (r_regionkey INT, r_name VARCHAR);"
            "CREATE TABLE nation (n_nationkey INT, n_name VARCHAR, n_regionkey INT);"
            "CREATE TABLE supplier (s_suppkey INT, s_name VARCHAR, s_nationkey INT);"
            "CREATE TABLE customer (c_custkey INT, c_name VARCHAR, c_nationkey INT, c_mktsegment VARCHAR);"
            "CREATE TABLE orders (o_orderkey INT, o_custkey INT, o_orderstatus VARCHAR, o_orderdate DATE,"
            " o_orderpriority VARCHAR, o_shippriority INT);"
            "CREATE TABLE lineitem (l_orderkey INT, l_linenumber INT, l_quantity INT, l_shipdate DATE,"
            " l_commitdate DATE, l_receiptdate DATE, l_suppkey INT, l_extendedprice DECIMAL(12,2),"
            " l_discount DECIMAL(4,2), l_returnflag VARCHAR)",
}
FAMILY = {name: next(f for f in TABLES if name.startswith(f)) for name in sql_examples.names()}
EXAMPLES = {name: "\n".join(ln for ln in sql_examples.read(name).splitlines() if not ln.lstrip().startswith("--"))
            .strip().rstrip(";") for name in sql_examples.names()}
TOKEN = re.compile(r"\s+|'[^']*'|\"[^\"]*\"|\w+|[^\w\s]")
VOCAB = ["(", ")", "'", '"', ",", ";", "*", "+", "-", "/", "%", "=", "<", ">=", "<>", "||", "::INT", "AND",
         "OR", "NOT", "NULL", "SELECT", "FROM", "WHERE", "JOIN", "LEFT JOIN", "ON", "USING", "GROUP BY",
         "HAVING", "UNION", "EXISTS", "IN", "AS", "DISTINCT", "CASE WHEN", "THEN", "END", "1e400", "9" * 45,
         "$1", "?", "r.a", "s.d", "t.g", "trans.ts", "count(*)", "sum(", "LATERAL", "TABLESAMPLE 5",
         "WITH (static = 'r')", "INTERVAL '1 hour'", "DATE '2020-02-30'", "\\", "--", "/*", "ü", "\x00"]


@st.composite
def definitions(draw):
    name = draw(st.sampled_from(sorted(EXAMPLES)))
    toks = [t for t in TOKEN.findall(EXAMPLES[name]) if not t.isspace()]
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["insert", "delete", "replace", "swap", "truncate", "repeat"]))
        i = draw(st.integers(0, max(0, len(toks) - 1)))
        if op == "insert":
            toks.insert(i, draw(st.sampled_from(VOCAB)))
        elif op == "delete" and len(toks) > 1:
            del toks[i]
        elif op == "replace":
            toks[i] = draw(st.sampled_from(VOCAB + toks))
        elif op == "swap":
            j = draw(st.integers(0, max(0, len(toks) - 1)))
            toks[i], toks[j] = toks[j], toks[i]
        elif op == "truncate":
            toks = toks[: max(1, i)]
        else:
            toks[i:i] = toks[i:i + draw(st.integers(1, 6))] * draw(st.integers(1, 3))
    return FAMILY[name], " ".join(toks)


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang()


@pytest.fixture(scope="module")
def sessions():
    out = {}
    for fam, ddl in TABLES.items():
        out[fam] = ivm_layer.connect()
        out[fam].execute(ddl)
    yield out
    for s in out.values():
        s.close()


def _run(sessions, family: str, body: str, slowest: list) -> None:
    s = sessions[family]
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(HANG_SECONDS)
    t0 = time.monotonic()
    try:
        s.execute(f"CREATE INCREMENTAL VIEW fz AS {body}")
    except ALLOWED as e:
        assert str(e).strip() and "\x1b[" not in str(e), body
    except _Hang:
        pytest.fail(f"planning took more than {HANG_SECONDS} s: {body[:300]}")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    slowest[0] = max(slowest[0], time.monotonic() - t0)
    if "fz" in s.views:
        s.execute("DROP VIEW fz")


def _fuzz(sessions, n: int) -> None:
    slowest = [0.0]

    @settings(max_examples=n, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(definitions())
    def check(case):
        _run(sessions, *case, slowest)

    check()
    print(f"\nslowest definition: {slowest[0]:.3f} s over {n} definitions")


def test_fuzzed_definitions_create_or_raise_an_ivm_error(sessions):
    _fuzz(sessions, 150)


@pytest.mark.slow
def test_fuzzed_definitions_large_budget(sessions):
    _fuzz(sessions, 2000)


def test_every_example_still_creates(sessions):
    """The mutation base is sound: each unmutated example creates and drops cleanly."""
    for name, body in EXAMPLES.items():
        s = sessions[FAMILY[name]]
        s.execute(f"CREATE INCREMENTAL VIEW fz AS {body}")
        assert "fz" in s.views
        s.execute("DROP VIEW fz")
