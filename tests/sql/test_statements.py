"""Statement classification and splitting for sessions (ivm_layer.sql.statements)."""

import pytest
from sqlglot import exp

from ivm_layer import SQLError
from ivm_layer.sql.statements import (
    CreateIncrementalView,
    DropView,
    Passthrough,
    SelectStatement,
    TransactionControl,
    classify,
    split_statements,
)


def test_create_incremental_view_full_head():
    st = classify("create or replace incremental materialized view if not exists V (x, y) "
                  "as select a, b from t where a < 3;")
    assert isinstance(st, CreateIncrementalView)
    assert st.name == "v" and st.materialized and st.or_replace and st.if_not_exists
    assert st.columns == ["x", "y"]
    assert st.tables == ["t"]
    assert isinstance(st.create, exp.Create) and isinstance(st.create.expression, exp.Select)
    assert st.select_sql == "SELECT a, b FROM t WHERE a < 3"


def test_create_incremental_view_minimal_and_comment():
    st = classify("/* c */ CREATE INCREMENTAL VIEW v AS SELECT * FROM r JOIN s ON r.b = s.b, s AS s2")
    assert isinstance(st, CreateIncrementalView)
    assert not st.materialized and not st.or_replace and not st.if_not_exists and st.columns is None
    assert st.tables == ["r", "s"]
    assert st.select_sql.startswith("SELECT * FROM r JOIN s ON r.b = s.b")


def test_definition_round_trips():
    st = classify("CREATE INCREMENTAL MATERIALIZED VIEW v (p, q) AS SELECT a, b FROM t")
    again = classify(st.definition())
    assert isinstance(again, CreateIncrementalView)
    assert (again.name, again.columns, again.materialized, again.select_sql) == ("v", ["p", "q"], True, st.select_sql)


def test_postgres_flavoured_body():
    st = classify("CREATE INCREMENTAL VIEW v AS SELECT r.a FROM r, s WHERE r.a = s.a AND r.t < s.t + 1",
                  dialect="postgres")
    assert isinstance(st, CreateIncrementalView) and st.tables == ["r", "s"]


def test_incremental_without_view_is_an_error():
    with pytest.raises(SQLError, match="expected VIEW"):
        classify("CREATE INCREMENTAL TABLE v AS SELECT 1")


def test_plain_create_view_is_passthrough():
    st = classify("CREATE VIEW v AS SELECT * FROM t")
    assert isinstance(st, Passthrough) and st.kind == "CREATE"


def test_drop_view():
    st = classify("DROP VIEW IF EXISTS v")
    assert st == DropView("DROP VIEW IF EXISTS v", ["v"], True)
    assert classify("drop view v").if_exists is False


def test_select_tables_exclude_ctes_and_other_schemas():
    st = classify("WITH c AS (SELECT * FROM t) SELECT * FROM c, v JOIN other.x ON true, main.w")
    assert isinstance(st, SelectStatement)
    assert sorted(st.tables) == ["t", "v", "w"]
    assert isinstance(classify("SELECT 1 UNION ALL SELECT a FROM u"), SelectStatement)


@pytest.mark.parametrize("sql,kind,targets", [
    ("INSERT INTO t VALUES (1)", "INSERT", ["t"]),
    ("INSERT INTO t (a) SELECT a FROM v", "INSERT", ["t"]),
    ("UPDATE t SET a = 1 FROM s WHERE s.a = t.a", "UPDATE", ["t"]),
    ("DELETE FROM t WHERE a > 1", "DELETE", ["t"]),
    ("TRUNCATE t", "TRUNCATETABLE", ["t"]),
    ("ALTER TABLE t ADD COLUMN c INT", "ALTER", ["t"]),
    ("COPY t FROM 'x.csv'", "COPY", None),
    ("CHECKPOINT", None, None),
])
def test_passthrough_kinds(sql, kind, targets):
    st = classify(sql)
    assert isinstance(st, Passthrough)
    if kind is not None:
        assert st.kind == kind
    assert st.targets == targets


def test_drop_table_passthrough():
    st = classify("DROP TABLE IF EXISTS t")
    assert isinstance(st, Passthrough) and st.drop_kind == "TABLE" and st.targets == ["t"]


@pytest.mark.parametrize("sql,action", [
    ("BEGIN", "begin"), ("begin transaction", "begin"), ("START TRANSACTION", "begin"),
    ("COMMIT", "commit"), ("END", "commit"), ("ROLLBACK", "rollback"), ("abort", "rollback"),
])
def test_transaction_control(sql, action):
    st = classify(sql)
    assert isinstance(st, TransactionControl) and st.action == action


def test_unparseable_is_passthrough():
    st = classify("FROB THE KNOB")
    assert isinstance(st, Passthrough)


def test_split_statements_keeps_text():
    sql = "select 1; select ';' -- a comment; here\n ;; insert into t values (1);\n"
    assert split_statements(sql) == ["select 1", "select ';'", "insert into t values (1)"]
    assert split_statements("  ") == []
    assert split_statements("CREATE INCREMENTAL VIEW v AS SELECT * FROM t; SELECT * FROM v") == [
        "CREATE INCREMENTAL VIEW v AS SELECT * FROM t", "SELECT * FROM v"]
