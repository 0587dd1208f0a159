"""Fault suite, ``ivm serve`` (issue 29 case 11): quoted upper-case, non-ASCII and mixed-case
names reach the served views through the PostgreSQL protocol (DuckDB file and PostgreSQL proxy
mode): the views are created, maintained and read back under the name given, and equal the
backend's own SELECT of their definition."""

from __future__ import annotations

from collections import Counter

import psycopg


def test_case11_served_views_under_quoted_names(any_served):
    table, view, col = ("TÀB", "MixÉd", "Vâl") if any_served.mode == "duckdb" else ("MixedCase", "MixedView", "Val")
    sql = f'SELECT "Id", "{col}" FROM "{table}" WHERE "{col}" > 0'
    agg = f'SELECT "Id", count(*) AS "Nø" FROM "{table}" GROUP BY "Id"'
    with psycopg.connect(any_served.url(), autocommit=True) as c:
        c.execute(f'CREATE TABLE "{table}" ("Id" INT, "{col}" INT)')
        c.execute(f'INSERT INTO "{table}" VALUES (1, 5), (2, -1)')
        c.execute(f'CREATE INCREMENTAL VIEW "{view}" AS {sql}')
        c.execute(f'CREATE INCREMENTAL VIEW "{view}Σ" AS {agg}')
        writes = [f'INSERT INTO "{table}" VALUES (3, 7), (1, 9)', f'UPDATE "{table}" SET "{col}" = 4 WHERE "Id" = 2',
                  f'DELETE FROM "{table}" WHERE "Id" = 1']
        for w in writes:
            c.execute(w)
            for name, d in ((view, sql), (view + "Σ", agg)):
                want = Counter(c.execute(d).fetchall())
                assert Counter(c.execute(f'SELECT * FROM "{name}"').fetchall()) == want, (name, w)
            assert Counter(c.execute(f'SELECT "Id" FROM "{view}" WHERE "Id" = 3').fetchall()) == \
                Counter(c.execute(f'SELECT "Id" FROM ({sql}) q WHERE "Id" = 3').fetchall())
        assert len(c.execute(f'EXPLAIN INCREMENTAL VIEW "{view}"').fetchall()) > 1
        shown = [r[0] for r in c.execute("SHOW INCREMENTAL VIEWS").fetchall()]
        assert any(n.lower() == view.lower() for n in shown), shown
        c.execute(f'DROP VIEW "{view}Σ"')
        c.execute(f'DROP VIEW "{view}"')
