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
