"""Fault suite, sessions (issue 29): writes and statements that used to leave views stale or raise
raw exceptions. Each test states the expected outcome: the views equal their SELECT, or a named
``ivm_layer`` error and nothing half-applied."""

from __future__ import annotations

from collections import Counter

import psycopg
import pytest

import ivm_layer
from ivm_layer.errors import IVMError


def _bag(s, view):
    return Counter(r for r, k in s.view(view).rows() for _ in range(k))


def _table(s, sql):
    return Counter(s.connection.execute(sql).fetchall())


@pytest.mark.parametrize("write", [
    "INSERT INTO memory.main.r VALUES (7, 7)",
    "INSERT INTO memory.r VALUES (7, 7)",
    "INSERT INTO main.r VALUES (7, 7)",
    'INSERT INTO "memory"."main"."r" VALUES (7, 7)',
    "DELETE FROM memory.r WHERE a = 1",
    "DELETE FROM memory.main.r WHERE a = 1",
    "UPDATE main.r SET b = b + 10 WHERE a = 1",
    "UPDATE memory.main.r SET b = b + 10",
    'UPDATE "main".r SET b = 0',
    "TRUNCATE memory.main.r",
    "INSERT INTO memory.main.r SELECT a + 1, b FROM r",
])
def test_case3_qualified_writes_are_captured_without_sync(write):
    """Issue 29 case 3: writes naming the catalog or schema change the views at once."""
    s = ivm_layer.connect()
    s.execute("CREATE TABLE r (a INT, b INT)")
    s.execute("INSERT INTO r VALUES (1, 1), (2, 2)")
    s.execute("CREATE INCREMENTAL VIEW v AS SELECT a, b FROM r")
    s.execute("CREATE INCREMENTAL MATERIALIZED VIEW m AS SELECT a, count(*) AS n FROM r GROUP BY a")
    s.execute(write)
    assert _bag(s, "v") == _table(s, "SELECT a, b FROM r")       # no sync()
    assert _table(s, "SELECT * FROM m") == _table(s, "SELECT a, count(*) FROM r GROUP BY a")
    s.close()


def test_case3_a_file_database_catalog_name(tmp_path):
    s = ivm_layer.connect(str(tmp_path / "shop.duckdb"))
    s.execute("CREATE TABLE r (a INT, b INT)")
    s.execute("CREATE INCREMENTAL VIEW v AS SELECT a, b FROM r")
    s.execute("INSERT INTO shop.main.r VALUES (1, 2)")
    s.execute("INSERT INTO shop.r VALUES (3, 4)")
    assert _bag(s, "v") == Counter({(1, 2): 1, (3, 4): 1})
    with pytest.raises(IVMError, match="v"):  # a tracked table is protected under every spelling
        s.execute("DROP TABLE shop.main.r")
    s.close()


def test_case3_other_catalogs_are_left_alone(tmp_path):
    s = ivm_layer.connect()
    s.execute("CREATE TABLE r (a INT, b INT)")
    s.execute("CREATE INCREMENTAL VIEW v AS SELECT a, b FROM r")
    s.execute(f"ATTACH '{tmp_path / 'other.duckdb'}' AS other")
    s.execute("CREATE TABLE other.r (a INT, b INT)")
    s.execute("INSERT INTO other.r VALUES (5, 5)")          # another database's r: not the view's
    s.execute("INSERT INTO other.main.r VALUES (6, 6)")
    assert _bag(s, "v") == Counter()
    s.close()


def test_case3_postgres_qualified_names_name_the_tracked_table(pg_url):
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("CREATE TABLE r (a int, b int)")
        db = c.execute("SELECT current_database()").fetchone()[0]
    s = ivm_layer.connect(pg_url, set_replica_identity=True)
    try:
        s.execute("CREATE INCREMENTAL VIEW v AS SELECT a, b FROM r")
        s.execute(f"INSERT INTO {db}.public.r VALUES (1, 2)")
        s.execute("INSERT INTO public.r VALUES (3, 4)")
        s.sync()
        assert _bag(s, "v") == Counter({(1, 2): 1, (3, 4): 1})
        for drop in (f"DROP TABLE {db}.public.r", "DROP TABLE public.r"):
            with pytest.raises(IVMError, match="v"):
                s.execute(drop)
    finally:
        s.close()


def test_case12_a_failing_copy_reports_its_own_error():
    s = ivm_layer.connect()
    s.execute("CREATE TABLE r (a INT, b INT)")
    s.execute("CREATE INCREMENTAL VIEW v AS SELECT a, b FROM r")
    for block in (False, True):
        if block:
            s.execute("BEGIN")
        with pytest.raises(Exception, match="(?i)no files found") as info:
            s.execute("COPY r FROM '/nonexistent/x.csv'")
        assert "aborted" not in str(info.value)
        if block:
            s.execute("ROLLBACK")
    s.execute("INSERT INTO r VALUES (1, 2)")   # the session is usable, the view exact
    assert _bag(s, "v") == Counter({(1, 2): 1})
    s.close()


@pytest.mark.parametrize("stmt", ["ALTER VIEW v RENAME TO w", "ALTER VIEW IF EXISTS v RENAME TO w",
                                  "ALTER TABLE v RENAME TO w", "ALTER TABLE m RENAME TO w"])
def test_case14_altering_an_incremental_view_is_refused(stmt):
    s = ivm_layer.connect()
    s.execute("CREATE TABLE r (a INT, b INT)")
    s.execute("CREATE INCREMENTAL VIEW v AS SELECT a, b FROM r")
    s.execute("CREATE INCREMENTAL MATERIALIZED VIEW m AS SELECT a FROM r")
    with pytest.raises(IVMError, match="cannot be altered or renamed"):
        s.execute(stmt)
    s.execute("INSERT INTO r VALUES (1, 2)")
    assert s.execute("SELECT * FROM v").fetchall() == [(1, 2)]
    assert s.execute("SELECT * FROM m").fetchall() == [(1,)]
    s.close()


def test_case14_and_17_postgres(pg_url):
    """ALTER VIEW of an incremental view is refused; a view dropped and created again with other
    column types reads back (no 'cached plan must not change result type' from a plan psycopg
    prepared for the old view)."""
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("CREATE TABLE r (a int, b int, c text)")
        c.execute("INSERT INTO r VALUES (1, 2, 'x')")
    s = ivm_layer.connect(pg_url, set_replica_identity=True)
    reads = ["SELECT * FROM v ORDER BY 1", "SELECT v.* FROM v, r WHERE r.a = 1", "SELECT * FROM v"]
    try:
        for kind in ("", "MATERIALIZED "):
            s.execute(f"CREATE INCREMENTAL {kind}VIEW v AS SELECT a, b FROM r")
            with pytest.raises(IVMError, match="cannot be altered or renamed"):
                s.execute("ALTER VIEW v RENAME TO w")
            for q in reads:
                for _ in range(7):  # psycopg prepares a statement run 5 times
                    assert s.execute(q).fetchall() == [(1, 2)]
            s.execute("DROP VIEW v")
            s.execute(f"CREATE INCREMENTAL {kind}VIEW v AS SELECT c, a FROM r")
            for q in reads:
                for _ in range(7):
                    assert s.execute(q).fetchall() == [("x", 1)]
            s.execute("DROP VIEW v")
    finally:
        s.close()
