"""Fault suite, SQL front-end (issue 29): bad or unmaintainable view definitions are refused with a
named IVMError, never a raw exception and never accepted with a clause silently dropped.

Each case names the issue's number; the session cases run through a DuckDB session, as a user
types them, and check that nothing was created."""

from __future__ import annotations

import pytest

import ivm_layer
from ivm_layer.errors import IVMError, SQLError, UnsupportedSQLError


@pytest.fixture
def s():
    sess = ivm_layer.connect()
    sess.execute("CREATE TABLE r (a INT, b INT); CREATE TABLE s (a INT, c INT); CREATE TABLE t (i INT, j INT)")
    yield sess
    sess.close()


def _refused(s, body: str, err: type, *words: str) -> None:
    with pytest.raises(err) as info:
        s.execute(f"CREATE INCREMENTAL VIEW v AS {body}")
    msg = str(info.value)
    for w in words:
        assert w.lower() in msg.lower(), msg
    assert s.views == []  # nothing half-created


def test_case10_unclosed_quote_is_a_parse_error(s):
    _refused(s, 'SELECT * FROM r WHERE " a > 1', SQLError, "cannot parse", "not closed")


@pytest.mark.parametrize("depth", [45, 150, 250])
def test_case10_deep_nesting_is_accepted_or_refused_by_name(s, depth):
    body = "SELECT * FROM r WHERE " + "(" * depth + "a > 1" + ")" * depth
    if depth <= 150:
        s.execute(f"CREATE INCREMENTAL VIEW v AS {body}")
        s.execute("INSERT INTO r VALUES (2, 1), (0, 1)")
        assert s.execute("SELECT * FROM v").fetchall() == [(2, 1)]
    else:
        _refused(s, body, SQLError, "nests parentheses")


def test_case13_correlated_subqueries_are_named(s):
    _refused(s, "SELECT a, (SELECT count(*) FROM s WHERE s.a = r.a) AS n FROM r", UnsupportedSQLError,
             "correlated subquery", "SELECT list")
    _refused(s, "SELECT a FROM r WHERE b = (SELECT max(c) FROM s WHERE s.a = r.a)", UnsupportedSQLError,
             "correlated subquery")
    _refused(s, "SELECT a, (SELECT max(c) FROM s) AS m FROM r", UnsupportedSQLError, "scalar subquery")


@pytest.mark.parametrize("body, word", [
    ("SELECT i, j FROM t TABLESAMPLE SYSTEM(50)", "TABLESAMPLE"),
    ("SELECT i, j FROM t TABLESAMPLE 10 ROWS", "TABLESAMPLE"),
    ("SELECT i, j FROM t USING SAMPLE 10%", "SAMPLE"),
    ("SELECT i FROM t FOR UPDATE", "FOR UPDATE"),
    ("SELECT i FROM t FOR SHARE", "FOR UPDATE"),
    ("SELECT i2 FROM t AS x(i2, j2)", "column aliases"),
    ("SELECT i, x FROM t, LATERAL (SELECT t.j + 1 AS x) l", "not a plain table"),
])
def test_case16_clauses_that_change_the_rows_are_refused(s, body, word):
    _refused(s, body, IVMError, word)


def test_case16_only_is_refused_by_the_translator():
    with pytest.raises(UnsupportedSQLError, match="ONLY"):
        ivm_layer.compile_view("SELECT i FROM ONLY t", {"t": ["i", "j"]}, dialect="postgres")


def test_case7_comment_only_statements_run_nothing(s):
    for text in ("-- just a comment", "/* a */ -- b\n", "  ;  -- c", "-- x\n;\n-- y"):
        cur = s.execute(text)
        assert cur.fetchall() == []
    assert s.execute("SELECT 1 -- after").fetchall() == [(1,)]
