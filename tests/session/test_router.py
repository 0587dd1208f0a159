"""The lexical statement router (ivm_layer.session.router): kinds, targets, flags, splitting."""

import pytest

from ivm_layer.session.router import route, split


@pytest.mark.parametrize("sql, kind, target, flags", [
    ("INSERT INTO r VALUES (1)", "insert", "r", {"values"}),
    ("INSERT INTO r (a, \"b(\") VALUES (1, 2)", "insert", "r", {"values"}),
    ("INSERT INTO r SELECT 1", "insert", "r", set()),
    ("INSERT INTO r (a) SELECT 1 -- VALUES", "insert", "r", set()),
    ("  /* c */ -- x\n insert into Main.\"My T\" select 1", "insert", "my t", set()),
    ("INSERT OR REPLACE INTO k VALUES (1, 2)", "insert", "k", {"upsert", "values"}),
    ("INSERT OR IGNORE INTO k VALUES (1, 2)", "insert", "k", {"values"}),
    ("INSERT INTO k VALUES (1) ON CONFLICT (id) DO UPDATE SET v = 1", "insert", "k", {"upsert", "values"}),
    ("INSERT INTO k VALUES (1) ON CONFLICT DO NOTHING RETURNING *", "insert", "k", {"returning", "values"}),
    ("INSERT INTO other.k VALUES (1)", "insert", None, {"values"}),
    ("INSERT INTO db.main.k VALUES (1)", "insert", None, {"values"}),
    ("UPDATE r SET a = 1 WHERE b = 2", "update", "r", set()),
    ("DELETE FROM r WHERE a = 1 RETURNING a", "delete", "r", {"returning"}),
    ("TRUNCATE TABLE r", "truncate", "r", set()),
    ("TRUNCATE r", "truncate", "r", set()),
    ("COPY r FROM 'x.csv' (HEADER)", "copy_from", "r", set()),
    ("COPY r TO 'x.csv'", "read", None, set()),
    ("COPY (SELECT 1) TO 'x.csv'", "read", None, set()),
    ("MERGE INTO k USING s ON k.id = s.id WHEN MATCHED THEN DELETE", "merge", "k", set()),
    ("SELECT * FROM r", "read", None, set()),
    ("(SELECT 1)", "read", None, set()),
    ("WITH x AS (SELECT 1) SELECT * FROM x", "read", None, set()),
    ("WITH x AS (SELECT 1) INSERT INTO r SELECT * FROM x", "unknown_write", None, set()),
    ("EXPLAIN ANALYZE DELETE FROM r", "unknown_write", None, set()),
    ("EXPLAIN SELECT 1", "read", None, set()),
    ("EXECUTE p(1)", "unknown_write", None, set()),
    ("SET threads = 1", "other", None, set()),
    ("CREATE INDEX i ON r(a)", "other", None, set()),
    ("CREATE OR REPLACE TABLE r AS SELECT 1", "create_table", "r", {"or_replace"}),
    ("CREATE TEMP TABLE r2 (a INT)", "create_table", "r2", set()),
    ("create or replace incremental view v as select 1", "create_view", None, set()),
    ("ALTER TABLE r ADD COLUMN z INT", "alter", "r", {"table"}),
    ("ALTER VIEW IF EXISTS v RENAME TO w", "alter", "v", {"view"}),
    ("INSERT INTO memory.main.r VALUES (1)", "insert", None, {"values"}),
    ("DROP SCHEMA IF EXISTS ivm CASCADE", "drop", "ivm", {"schema"}),
    ("DROP VIEW v", "drop", None, set()),
    ("BEGIN TRANSACTION", "begin", None, set()),
    ("commit", "commit", None, set()),
    ("ABORT", "rollback", None, set()),
    ("", "empty", None, set()),
])
def test_route(sql, kind, target, flags):
    r = route(sql)
    assert (r.kind, r.target, set(r.flags)) == (kind, target, flags)


def test_copy_column_list_and_span():
    r = route("COPY s (b, d) FROM 'f.csv'")
    assert r.kind == "copy_from" and r.columns == "(b, d)"
    assert "COPY s (b, d) FROM"[r.target_span[0]:r.target_span[1]] == "s"


def test_split_respects_quotes_comments_and_dollar_quotes():
    sql = "SELECT ';' AS a; -- c;\nSELECT 2 /* ; */; SELECT $$a;b$$; SELECT 'it''s;'"
    assert split(sql) == ["SELECT ';' AS a", "-- c;\nSELECT 2 /* ; */", "SELECT $$a;b$$", "SELECT 'it''s;'"]
    assert split("SELECT 1;;  ") == ["SELECT 1"]
    assert split("  ;  ") == []


def test_routing_never_parses_or_tokenizes(monkeypatch):
    """Routing a write with a 20,000-row VALUES list is a lexical scan of its head: sqlglot's
    parser and tokenizer are never called."""
    import sqlglot
    from sqlglot.dialects.dialect import Dialect

    def forbidden(*a, **k):
        raise AssertionError("the router must not parse or tokenize")

    monkeypatch.setattr(sqlglot, "parse_one", forbidden)
    monkeypatch.setattr(sqlglot, "parse", forbidden)
    monkeypatch.setattr(Dialect, "tokenize", forbidden)
    values = ", ".join(f"({i}, 'x{i}')" for i in range(20_000))
    sql = f"INSERT INTO r VALUES {values}"
    assert route(sql).target == "r"
    assert split(sql) == [sql]
    assert split(sql + "; " + sql) == [sql, sql]


def test_qualified_names_of_the_sessions_own_database_are_local():
    own = frozenset({"memory"})
    for sql in ("INSERT INTO memory.main.r VALUES (1)", "INSERT INTO memory.r VALUES (1)",
                'INSERT INTO "memory"."main"."r" VALUES (1)', "INSERT INTO main.r VALUES (1)"):
        assert route(sql, own).target == "r", sql
    for sql in ("INSERT INTO other.main.r VALUES (1)", "INSERT INTO memory.other.r VALUES (1)",
                "INSERT INTO other.r VALUES (1)"):
        assert route(sql, own).target is None, sql
